// What tests need to know of the test-only worker, sluice-worker-testing
// (worker/worker_testing_main.cc): the production worker has none of it.
#ifndef SLUICE_WORKER_WORKER_TESTING_H_
#define SLUICE_WORKER_WORKER_TESTING_H_

namespace sluice::worker {

// With --test_hog_memory, a Generate whose prompt is exactly this allocates
// and touches memory until the kernel kills the worker (OOM tests). To the
// production worker it is an ordinary prompt.
inline constexpr char kHogMemoryPrompt[] = "sluice-test:hog-memory";

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_WORKER_TESTING_H_
