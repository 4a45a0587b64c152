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
// A failure to build the model is sent as `fatal` and the worker exits 2.
//
// Test-only hooks, read from the environment (never set them in production):
//   SLUICE_WORKER_TEST_STEP_DELAY_MS=N   sleep N ms after each token, so tests
//                                        can act in the middle of a stream;
//   SLUICE_WORKER_TEST_HOOKS=1           a Generate whose prompt is exactly
//                                        "sluice-test:hog-memory" makes the
//                                        worker allocate and touch memory until
//                                        the kernel kills it (OOM tests).
#ifndef SLUICE_WORKER_WORKER_H_
#define SLUICE_WORKER_WORKER_H_

namespace sluice::worker {

// The prompt that triggers the memory hog when SLUICE_WORKER_TEST_HOOKS=1.
inline constexpr char kHogMemoryPrompt[] = "sluice-test:hog-memory";

// Serves the supervisor on `socket_fd` until Shutdown or end of stream.
// Returns the process exit code.
int RunWorker(int socket_fd);

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_WORKER_H_
