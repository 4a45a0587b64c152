#include "kernels/cpu/background_task.h"

#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sluice::kernels {
namespace {

// Polls before sleeping: pause instructions first, then yielding the core;
// a few hundred microseconds in all, about one decode layer.
constexpr int kSpinPolls = 256;
constexpr int kPolls = kSpinPolls + 512;

void Pause(int i) {
  if (i >= kSpinPolls) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

BackgroundTask::BackgroundTask() : thread_([this] { Loop(); }) {}

BackgroundTask::~BackgroundTask() {
  Wait();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_one();
  thread_.join();
}

void BackgroundTask::Start(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
    running_.store(true, std::memory_order_release);
    pending_.store(true, std::memory_order_release);
  }
  start_cv_.notify_one();
}

void BackgroundTask::Wait() {
  for (int i = 0; i < kPolls; ++i) {
    if (!running_.load(std::memory_order_acquire)) return;
    Pause(i);
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return !running_.load(std::memory_order_acquire); });
}

void BackgroundTask::Loop() {
  for (;;) {
    for (int i = 0; i < kPolls && !pending_.load(std::memory_order_acquire); ++i) {
      Pause(i);
    }
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [this] {
        return stop_ || pending_.load(std::memory_order_acquire);
      });
      if (!pending_.load(std::memory_order_acquire) && stop_) return;
      job = std::move(job_);
      pending_.store(false, std::memory_order_release);
    }
    job();
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_.store(false, std::memory_order_release);
    }
    done_cv_.notify_one();
  }
}

}  // namespace sluice::kernels
