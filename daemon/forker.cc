#include "daemon/forker.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include <thread>

#include "absl/synchronization/mutex.h"

namespace sluice::daemon {
namespace {

class Forker {
 public:
  Forker() {
    // Detached on purpose: it must outlive every worker, i.e. run until the
    // process exits.
    std::thread([this] { Loop(); }).detach();
  }

  pid_t Fork(absl::FunctionRef<void()> child) {
    absl::MutexLock call(&call_mu_);  // one request at a time
    absl::MutexLock lock(&mu_);
    child_ = &child;
    done_ = false;
    auto finished = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; };
    mu_.Await(absl::Condition(&finished));
    child_ = nullptr;
    return result_;
  }

 private:
  void Loop() {
    pthread_setname_np(pthread_self(), "forker");
    while (true) {
      absl::MutexLock lock(&mu_);
      auto requested = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return child_ != nullptr && !done_;
      };
      mu_.Await(absl::Condition(&requested));
      const pid_t pid = fork();
      if (pid == 0) {
        (*child_)();
        _exit(127);
      }
      result_ = pid < 0 ? -errno : pid;
      done_ = true;
    }
  }

  absl::Mutex call_mu_;
  absl::Mutex mu_;
  absl::FunctionRef<void()>* child_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  pid_t result_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

pid_t ForkOnLongLivedThread(absl::FunctionRef<void()> child) {
  static Forker* const forker = new Forker();  // never destroyed, see Forker()
  return forker->Fork(child);
}

}  // namespace sluice::daemon
