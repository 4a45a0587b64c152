// A worker's Generate requests as one continuous batch (issue 19): the
// protocol side of worker/batch/batch_runner.h. Requests join between
// steps (Admit), a step is one batched forward pass (Step), and each
// request streams a TokenChunk per token and ends with a GenerateDone or an
// Error through Hooks::send, as RunWorker's protocol says (worker/worker.h).
//
// Each request's text goes through its own OutputText (the detokenizer and
// stop strings Generate uses), so it streams in a batch what Generate
// streams for it alone; usage, TTFT, decode rate and (where experts stream)
// the expert figures stay per request (a pass's expert figures apportioned
// to its sequences by their rows: OnPass). A prompt that arrives while
// others decode goes in chunks the PrefillPacer sizes (BatchLimits::pacing,
// sluiced --prefill_pacing). A forward pass that fails ends every
// request of the batch with its error and the batch starts again empty (the
// sessions' contents are undefined then); Step returns an error only when
// it cannot start again, and then the worker cannot serve.
//
// Thread-safety: one thread (the worker's generation thread) calls
// everything but Stats() and the *_total() figures, which any thread may
// call.
#ifndef SLUICE_WORKER_GENERATE_BATCH_H_
#define SLUICE_WORKER_GENERATE_BATCH_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "model/engine.h"
#include "proto/sluice/worker/v1/worker.pb.h"
#include "sched/scheduler.h"
#include "worker/batch/batch_runner.h"
#include "worker/batch/prefill_pacer.h"
#include "worker/experts.h"

namespace sluice::worker {

// The Hello's max_sequences; a Hello without one (0) gets one sequence, as
// before there was a batch (sluiced always sets it, --max_sequences).
int32_t MaxSequences(const v1::WorkerConfig& config);

// Paced prefill (the Hello's prefill_pacing): while streams decode, a long
// prompt's chunks are sized by PrefillPacer to keep their pace (on by
// default on both backends, measured: docs/BATCHING.md).
enum class PrefillPacing { kOn, kOff };

// How many sequences run at once and the KV pool they share, in positions
// (the Hello's kv_cache_tokens; 0: every sequence its whole context).
struct BatchLimits {
  int32_t max_sequences = 1;
  int64_t kv_cache_tokens = 0;
  PrefillPacing pacing = PrefillPacing::kOn;
};
BatchLimits BatchLimitsOf(const v1::WorkerConfig& config);

class GenerateBatch {
 public:
  // What the batch needs of the worker; all called on the calling thread.
  struct Hooks {
    std::function<void(const v1::WorkerMessage&)> send;
    std::function<void(uint64_t id, const absl::Status&)> send_error;
    // The expert cache figures now (after the passes counted so far).
    std::function<ExpertStreamStats()> experts;
    // Called once per forward pass, before its tokens are reported.
    std::function<void()> count_pass;
    // Called after each token's chunk was sent; may be empty.
    std::function<void()> after_token;
    std::function<void(const std::string&)> log;
  };

  // A batch of up to `limits.max_sequences` sequences of engine's context
  // each (every one a session, allocated now: the engine's error when one
  // cannot be), sharing a KV pool of limits.kv_cache_tokens positions
  // (InvalidArgument when it holds less than one context).
  static absl::StatusOr<std::unique_ptr<GenerateBatch>> Create(const Engine& engine,
                                                               BatchLimits limits, Hooks hooks);

  // The Generate of `job` joins the batch behind those before it, or is
  // answered with its error (a bad request). job.deadline_unix_micros, when
  // set, ends it at the first step at or after it (DEADLINE_EXCEEDED).
  void Admit(const v1::SupervisorMessage& job);
  // Ends request `id` (Error CANCELLED); nothing when it is not in the
  // batch (it ended already).
  void Cancel(uint64_t id);
  // Every request ends as Cancel ends it.
  void CancelAll();
  // One step; the requests it ended are answered. See the top of the file
  // for its error.
  absl::Status Step();
  bool idle() const { return runner_->idle(); }

  // The batch's figures as of the step whose tokens last went out (and
  // before the answers of the requests a step ended).
  v1::BatchStats Stats() const;
  // Tokens of requests that ended (also by cancel or error).
  uint64_t prompt_tokens_total() const { return prompt_tokens_; }
  uint64_t generated_tokens_total() const { return generated_tokens_; }

 private:
  // One Generate request in the batch.
  struct Live {
    explicit Live(OutputText text) : output(std::move(text)) {}
    OutputText output;
    int prompt_tokens = 0;
    int max_tokens = 0;
    int generated = 0;
    // Set by the token that ended the output (end of generation, stop).
    std::optional<FinishReason> finish;
    absl::Time added;
    absl::Time first_token;
    std::optional<RequestExpertTracker> experts;
  };

  GenerateBatch(const Engine& engine, BatchLimits limits, Hooks hooks);
  // After a step's forward pass, before its tokens: counts the pass and
  // gives each request its share of the pass's expert figures.
  void OnPass(const sched::StepPlan& plan);
  bool OnToken(uint64_t id, int32_t token);
  void Finish(const sched::Finished& finished);
  // A new runner (and its sessions) in place of the current one.
  absl::Status StartRunner();
  // Every request ends with `status`, and the batch starts again empty.
  absl::Status FailBatch(const absl::Status& status);
  // The scheduler's figures into stats_.
  void PublishStats();
  bool pacing() const { return limits_.pacing == PrefillPacing::kOn; }

  const Engine& engine_;
  const BatchLimits limits_;
  const Hooks hooks_;
  std::unique_ptr<BatchRunner> runner_;
  std::map<uint64_t, Live> live_;
  // The expert counters after the last pass (before the next one).
  memory::SlotCacheCounters counters_before_;
  PrefillPacer pacer_;
  uint64_t steps_ = 0;
  uint64_t experts_acquired_ = 0;
  uint64_t experts_last_step_ = 0;
  std::atomic<uint64_t> prompt_tokens_{0};
  std::atomic<uint64_t> generated_tokens_{0};
  mutable absl::Mutex stats_mu_;
  v1::BatchStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_GENERATE_BATCH_H_
