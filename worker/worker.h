// The worker side of the supervisor<->worker protocol.
//
// RunWorker() reads the Hello (with the shard fds as SCM_RIGHTS), maps the
// shards (ModelFiles::FromFds, never opening a path), checks the tensor table
// against the supervisor's, builds the engine and reports Ready. Then:
//   * Generate requests run one at a time on a generation thread, streaming
//     one TokenChunk per token and a final GenerateDone (or an Error);
//   * Cancel for the running request stops it before the next decode step
//     (the token callback returns false) and is answered with Error CANCELLED;
//   * Tokenize and StatsQuery are answered at once by the reading thread;
//   * Shutdown, or the supervisor closing the socket, ends the worker.
// Hello.config.kind CUDA builds the engine on the CUDA backend on
// Hello.config.device. A failure to build the model (for a CUDA worker: no
// CUDA backend in the binary, no such device, no memory) is sent as `fatal`,
// whose text names the cause, and the worker exits 2.
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
