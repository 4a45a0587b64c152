// The worker side of the supervisor<->worker protocol.
//
// RunWorker() reads the Hello (with the shard fds as SCM_RIGHTS), maps the
// shards (ModelFiles::FromFds, never opening a path), checks the tensor table
// against the supervisor's, builds the engine and reports Ready. Then:
//   * Generate requests run together on a generation thread, continuously
//     batched (worker/generate_batch.h over worker/batch/batch_runner.h): up to Hello.config.max_sequences
//     sequences, one batched forward pass a step, each sequence with its own
//     KV and recurrent state of context_length tokens (the requests beyond
//     them wait in the scheduler, in arrival order). A Generate streams one
//     TokenChunk per token and a final GenerateDone (or an Error), its text
//     through its own OutputText (detokenizer, stop strings), so a request
//     streams in a batch exactly what Generate streams for it alone;
//   * Tokenize requests are answered on the generation thread between steps;
//   * Cancel ends its request between steps (Error CANCELLED) and leaves
//     the others of the batch as they were;
//   * StatsQuery is answered at once by the reading thread, with the
//     batch's figures (Stats.batch: running and waiting sequences, the last
//     step's size, KV blocks, preemptions, experts acquired per step);
//   * every message leaves through a FrameWriter thread (the reader never
//     blocks on a send), which also sends a Heartbeat when idle for
//     Hello.config.heartbeat_interval_ms;
//   * Shutdown, or the supervisor closing the socket, ends the worker.
// Hello.config.kind CUDA builds the engine on the CUDA backend on
// Hello.config.device, after the fit planner (memory/fit_planner.h) has
// checked Hello.config's expert settings against the device and the host
// and filled in what was left to it; a refusal is a `fatal` whose text is
// the planner's (the numbers and a configuration that fits).
// Expert cache telemetry: every Stats answer carries the backend's
// ExpertStreamStats, and where experts stream each GenerateDone carries the
// request's own figures (and, with GenerateRequest.expert_token_stats, one
// entry per token): the counters' difference over the steps it took part
// in, so in a batch of several they include what the other sequences of
// those steps looked up. A failure to build the model (for a CUDA worker: no
// CUDA backend in the binary, no such device, no memory) is sent as `fatal`,
// whose text names the cause, and the worker exits 2.
//
// What the worker needs from outside its protocol (the device's memory, the
// backend's expert figures) and what it tells while a request runs come
// through Collaborators, whose defaults are production's. sluice-worker
// passes the defaults and reads no environment variable; the fakes of the
// tests (a memory hog, a slow stream, a fixed device size, fixed expert
// figures) exist only in the test-only sluice-worker-testing
// (worker/worker_testing_main.cc).
#ifndef SLUICE_WORKER_WORKER_H_
#define SLUICE_WORKER_WORKER_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "memory/device_memory_probe.h"
#include "memory/fit_planner.h"
#include "model/model.h"
#include "proto/sluice/v1/sluice.pb.h"

namespace sluice::worker {

// Thread-safety: device_memory runs on the thread that loads the model;
// expert_stats on the reading thread (Stats) and the generation thread
// (Generate); before_generate (as a request joins the batch) and
// after_token on the generation thread.
struct Collaborators {
  // The device memory the fit planner of a CUDA worker plans for, by device
  // ordinal. Must be set.
  std::function<absl::StatusOr<memory::DeviceMemory>(int device)> device_memory =
      memory::ProbeDeviceMemory;
  // The expert cache figures reported with Stats and GenerateDone, from the
  // built model and the batched forward passes this worker has run so far
  // (one per step). Must be set.
  std::function<ExpertStreamStats(const Model& model, uint64_t forward_passes)> expert_stats =
      [](const Model& model, uint64_t) { return model.ExpertStats(); };
  // Called with each Generate request before it is checked and run (none
  // when empty).
  std::function<void(const sluice::v1::GenerateRequest& request)> before_generate;
  // Called after each generated token has been queued for the supervisor
  // (none when empty).
  std::function<void()> after_token;
};

// Serves the supervisor on `socket_fd` until Shutdown or end of stream.
// Returns the process exit code.
int RunWorker(int socket_fd, Collaborators collaborators = Collaborators());

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_WORKER_H_
