// The one place each sluiced default is written. The flags (sluiced_main.cc),
// Config, SupervisorOptions and LoadSettings take their defaults from here,
// and deploy/sluiced.conf restates them only in comments, which
// //daemon:config_test checks against these values.
#ifndef SLUICE_DAEMON_DEFAULTS_H_
#define SLUICE_DAEMON_DEFAULTS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace sluice::daemon {

inline constexpr int kDefaultContextLength = 4096;
inline constexpr int kDefaultQueueLimit = 64;
// Sequences one worker generates for at once (continuous batching); each
// holds a KV cache of the whole context.
inline constexpr int kDefaultMaxSequences = 8;
// Time a worker may take to map the shards and build the model.
inline constexpr int kDefaultWorkerStartTimeoutS = 300;
// A ready worker silent this long, or a request with no progress this long,
// is killed as hung.
inline constexpr int kDefaultWorkerHungTimeoutS = 60;
// On SIGTERM, time running and waiting generations get to finish.
inline constexpr int kDefaultDrainTimeoutS = 10;
// A worker that is replaced, unloaded or shut down gets this long after its
// Shutdown message to exit before it is killed.
inline constexpr absl::Duration kWorkerStopGrace = absl::Seconds(5);

// How a worker batches (--max_sequences, --kv_cache_tokens,
// --prefill_pacing): one value from the flags through Config,
// SupervisorOptions and LoadSettings into the Hello's WorkerConfig.
struct BatchSettings {
  // Generations a worker runs at once (WorkerConfig.max_sequences), and so
  // the generations the supervisor sends it at once.
  int max_sequences = kDefaultMaxSequences;
  // The worker's KV pool in positions over all its sequences; 0: every
  // sequence its whole context (WorkerConfig.kv_cache_tokens).
  int64_t kv_cache_tokens = 0;
  // Paced prefill (WorkerConfig.prefill_pacing): on | off.
  std::string prefill_pacing = "on";
};

// --threads: one compute thread per physical core sluiced may run on (its
// workers inherit its CPU affinity). Computed once.
int DefaultThreads();

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_DEFAULTS_H_
