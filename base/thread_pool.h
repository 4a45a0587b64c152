// A fixed-size pool of worker threads for data-parallel loops.
//
// The pool is the project's own (no OpenMP): kernels split work over rows
// with ParallelFor, and the caller's thread takes a share of the work, so a
// pool of N threads owns N-1 workers.
//
// Thread-safety: ParallelFor may be called from any thread; concurrent
// calls are serialized (one loop runs at a time). A ParallelFor issued from
// inside a running loop body runs inline on the calling thread instead of
// deadlocking. Destruction must not race with ParallelFor.
//
// Cost: after a loop, idle workers (and a caller waiting for them) poll for
// a while (pause instructions, then yielding the core; a few hundred
// microseconds) before sleeping, so back-to-back loops, as in decode,
// start in about a microsecond instead of a futex wake-up (measured on the
// development machine: 0.5-1.5 us per empty 2-thread loop, 7 us without
// polling).
#ifndef SLUICE_BASE_THREAD_POOL_H_
#define SLUICE_BASE_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace sluice {

class ThreadPool {
 public:
  // `num_threads` threads take part in each loop, the caller included.
  // Values < 1 are treated as 1; 1 means everything runs inline on the
  // caller and no thread is started. `poll_scale` multiplies how long idle
  // workers (and a waiting caller) poll before sleeping (values < 1 are
  // treated as 1): a pool whose loops come further apart than a decode
  // step's, but must start without a wake-up, polls longer.
  explicit ThreadPool(int num_threads, int poll_scale = 1);
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) on disjoint, contiguous, non-empty ranges that
  // together cover [0, n) exactly once, at most num_threads() ranges of
  // near-equal size (they differ by at most one), and returns once all
  // calls have returned. n <= 0 calls nothing. `fn` must not throw.
  // Range i always goes to the same participant for a given (n, threads),
  // so results do not depend on scheduling.
  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn);

  // Wakes sleeping workers into their polling without giving them work,
  // and returns at once: a caller that knows a loop is coming (the host's
  // share of a decode layer, once the device's routing is back) calls it
  // ahead, so the loop does not pay the wake-up. Workers woken so poll as
  // after a loop, then sleep again. No-op for one thread.
  void Wake();
  // How many times workers woke from sleep (for a loop or a Wake).
  int64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }

  // Like ParallelFor, but the range boundaries are multiples of `grain`
  // (except the final end == n), so each range holds whole groups of
  // `grain` items. grain < 1 is treated as 1.
  void ParallelForGrain(int64_t n, int64_t grain,
                        absl::FunctionRef<void(int64_t, int64_t)> fn);

 private:
  void WorkerLoop(int index);
  void RunShare(int index);

  const int num_threads_;
  const int poll_iterations_;  // polls before sleeping
  std::vector<std::thread> workers_;

  std::mutex call_mu_;  // serializes ParallelFor calls

  // Workers and the caller spin briefly on these before sleeping on the
  // condition variables, because decode issues many short loops back to
  // back and a futex wake-up costs microseconds.
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::atomic<uint64_t> generation_{0};  // bumped under mu_ per loop
  std::atomic<uint64_t> wake_{0};        // bumped under mu_ per Wake
  std::atomic<int64_t> wakeups_{0};
  std::atomic<int> pending_{0};          // workers still in the current loop
  bool stop_ = false;                    // guarded by mu_
  std::atomic<bool> stopping_{false};    // stop_ for spinning readers
  // The current loop, written before generation_ is bumped.
  int64_t n_ = 0;
  int64_t grain_ = 1;
  const absl::FunctionRef<void(int64_t, int64_t)>* fn_ = nullptr;
};

}  // namespace sluice

#endif  // SLUICE_BASE_THREAD_POOL_H_
