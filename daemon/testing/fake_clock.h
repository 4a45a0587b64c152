// A Clock (daemon/clock.h) that moves only when the test says so, for
// supervisor tests without sleeps: a wait with a deadline returns when its
// condition holds or when Advance() has moved the time past the deadline.
//
// How a wait notices Advance: it registers its mutex while it waits, and
// Advance takes and releases each registered mutex, which makes absl::Mutex
// evaluate the waiters' conditions again. So Advance must not be called
// with such a mutex held (a supervisor test holds none of the supervisor's).
#ifndef SLUICE_DAEMON_TESTING_FAKE_CLOCK_H_
#define SLUICE_DAEMON_TESTING_FAKE_CLOCK_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/clock.h"

namespace sluice::daemon::testing {

class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000))
      : now_ns_(absl::ToUnixNanos(start)) {}

  // Lock-free: the supervisor's wait conditions read it with its lock held.
  absl::Time Now() override { return absl::FromUnixNanos(now_ns_.load()); }

  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    {
      absl::MutexLock lock(&waiters_mu_);
      waiters_.push_back(mu);
    }
    auto done = [&] { return cond.Eval() || Now() >= deadline; };
    mu->Await(absl::Condition(&done));
    {
      absl::MutexLock lock(&waiters_mu_);
      waiters_.erase(std::find(waiters_.begin(), waiters_.end(), mu));
    }
    return cond.Eval();
  }

  void Advance(absl::Duration d) {
    now_ns_ += absl::ToInt64Nanoseconds(d);
    std::vector<absl::Mutex*> waiting;
    {
      absl::MutexLock lock(&waiters_mu_);
      waiting = waiters_;
    }
    for (absl::Mutex* mu : waiting) {
      mu->Lock();
      mu->Unlock();
    }
  }

 private:
  std::atomic<int64_t> now_ns_;
  absl::Mutex waiters_mu_;
  std::vector<absl::Mutex*> waiters_ ABSL_GUARDED_BY(waiters_mu_);
};

}  // namespace sluice::daemon::testing

#endif  // SLUICE_DAEMON_TESTING_FAKE_CLOCK_H_
