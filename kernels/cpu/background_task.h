// One job at a time on a dedicated thread, for host work that the calling
// thread overlaps with its own: the CUDA backend computes a decode step's
// missed experts on the host while its own thread issues the copies of the
// others and launches the device's share.
//
// Start hands a job over, Wait blocks until it returned. Both sides poll
// briefly before sleeping (as kernels::ThreadPool does), so a job handed
// over within a decode step starts in about a microsecond rather than a
// futex wake-up.
//
// Thread-safety: Start and Wait are called by one owner thread;
// destruction waits for a running job.
#ifndef SLUICE_KERNELS_CPU_BACKGROUND_TASK_H_
#define SLUICE_KERNELS_CPU_BACKGROUND_TASK_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace sluice::kernels {

class BackgroundTask {
 public:
  BackgroundTask();
  ~BackgroundTask();
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;

  // Runs `job` on the task's thread. Precondition: the previous job was
  // waited for. `job` must not throw.
  void Start(std::function<void()> job);
  // Returns once the job started last has returned (at once if none is
  // running).
  void Wait();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  std::function<void()> job_;         // guarded by mu_
  std::atomic<bool> pending_{false};  // a job was handed over, not yet taken
  std::atomic<bool> running_{false};  // handed over and not yet returned
  bool stop_ = false;                 // guarded by mu_
  std::thread thread_;
};

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_CPU_BACKGROUND_TASK_H_
