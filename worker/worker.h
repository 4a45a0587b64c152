// The worker side of the supervisor<->worker protocol.
//
// RunWorker() reads the Hello (with the shard fds as SCM_RIGHTS), maps the
// shards (ModelFiles::FromFds, never opening a path), checks the tensor table
// against the supervisor's, builds the engine and reports Ready. Then:
//   * Generate and Tokenize requests run one at a time, in order, on a
//     generation thread; a Generate streams one TokenChunk per token and a
//     final GenerateDone (or an Error);
//   * Cancel for the running request stops it before the next decode step
//     (the token callback returns false) and is answered with Error CANCELLED;
//   * StatsQuery is answered at once by the reading thread;
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
// entry per token). A failure to build the model (for a CUDA worker: no
// CUDA backend in the binary, no such device, no memory) is sent as `fatal`,
// whose text names the cause, and the worker exits 2.
//
// Test hooks exist only in the test-only binary sluice-worker-testing
// (worker/worker_testing_main.cc), which passes a TestHooks; the production
// sluice-worker passes none and reads no environment variable.
#ifndef SLUICE_WORKER_WORKER_H_
#define SLUICE_WORKER_WORKER_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "memory/fit_planner.h"
#include "model/model.h"

namespace sluice::worker {

// The prompt that triggers the memory hog of TestHooks::hog_memory.
inline constexpr char kHogMemoryPrompt[] = "sluice-test:hog-memory";

struct TestHooks {
  // Sleep this long after each token, so tests can act mid-stream.
  int step_delay_ms = 0;
  // A Generate whose prompt is exactly kHogMemoryPrompt allocates and
  // touches memory until the kernel kills the worker (OOM tests).
  bool hog_memory = false;
  // The device memory the fit planner of a CUDA worker sees instead of
  // asking the device, so that a refusal is tested without a GPU.
  std::optional<memory::DeviceMemory> device_memory;
  // Stands in for the backend's BackendStats::experts (the CPU backend never
  // streams): called with the forward passes this worker has run so far
  // (one per prefill, one per decode step), so its figures are
  // deterministic.
  std::function<ExpertStreamStats(uint64_t forward_passes)> expert_stats;
};

// Serves the supervisor on `socket_fd` until Shutdown or end of stream.
// Returns the process exit code.
int RunWorker(int socket_fd, const TestHooks& hooks = TestHooks());

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_WORKER_H_
