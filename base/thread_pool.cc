#include "base/thread_pool.h"

#include <algorithm>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sluice {
namespace {

// Set while a thread runs a loop body, so nested ParallelFor runs inline.
thread_local bool in_parallel_region = false;

// Bounds of range `index` of `parts` when [0, n) is cut into groups of
// `grain` and the groups are dealt out as evenly as possible.
void RangeOf(int64_t n, int64_t grain, int parts, int index, int64_t* begin,
             int64_t* end) {
  const int64_t groups = (n + grain - 1) / grain;
  const int64_t base = groups / parts;
  const int64_t extra = groups % parts;
  const int64_t g0 = index * base + std::min<int64_t>(index, extra);
  const int64_t g1 = g0 + base + (index < extra ? 1 : 0);
  *begin = std::min(n, g0 * grain);
  *end = std::min(n, g1 * grain);
}

// Polls before blocking, first with pause instructions (a few
// microseconds), then yielding the core (a few hundred microseconds in all):
// longer than the serial work between the parallel loops of a decode step,
// so workers stay awake for a whole step (a futex wake-up per loop cost
// more than the loop itself on small models), while a thread that shares
// its core with another runnable one hands the core over instead of
// burning its time slice.
constexpr int kSpinIterations = 256;
constexpr int kYieldIterations = 512;  // times the pool's poll_scale

// Waits a little before poll number i.
void PollPause(int i) {
  if (i >= kSpinIterations) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, int poll_scale)
    : num_threads_(std::max(1, num_threads)),
      poll_iterations_(kSpinIterations + kYieldIterations * std::max(1, poll_scale)) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stopping_.store(true);
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunShare(int index) {
  int64_t begin, end;
  RangeOf(n_, grain_, num_threads_, index, &begin, &end);
  if (begin < end) (*fn_)(begin, end);
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    bool started = false;
    for (int i = 0; i < poll_iterations_ && !started; ++i) {
      started = generation_.load(std::memory_order_acquire) != seen ||
                stopping_.load(std::memory_order_relaxed);
      if (!started) PollPause(i);
    }
    if (!started) {
      std::unique_lock<std::mutex> lock(mu_);
      // Only a Wake that comes while asleep counts (one while polling is moot).
      const uint64_t woken = wake_.load();
      start_cv_.wait(lock, [&] {
        return stop_ || generation_.load() != seen || wake_.load() != woken;
      });
      wakeups_.fetch_add(1, std::memory_order_relaxed);
      if (!stop_ && generation_.load() == seen) continue;  // woken to poll
    }
    if (stopping_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    in_parallel_region = true;
    RunShare(index);
    in_parallel_region = false;
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Taking the lock orders this with the caller's predicate check.
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::Wake() {
  if (num_threads_ == 1) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_.fetch_add(1, std::memory_order_relaxed);
  }
  start_cv_.notify_all();
}

void ThreadPool::ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  ParallelForGrain(n, 1, fn);
}

void ThreadPool::ParallelForGrain(int64_t n, int64_t grain,
                                  absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t groups = (n + grain - 1) / grain;
  if (num_threads_ == 1 || groups == 1 || in_parallel_region) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  n_ = n;
  grain_ = grain;
  fn_ = &fn;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  in_parallel_region = true;
  RunShare(0);
  in_parallel_region = false;
  for (int i = 0; i < poll_iterations_ && pending_.load(std::memory_order_acquire) != 0; ++i) {
    PollPause(i);
  }
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  fn_ = nullptr;
}

}  // namespace sluice
