// The supervisor's time: what it reads as now and how it waits for a
// condition or a deadline, behind one interface so that its tests run on a
// fake clock (daemon/testing/fake_clock.h) with no sleeps.
#ifndef SLUICE_DAEMON_CLOCK_H_
#define SLUICE_DAEMON_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sluice::daemon {

class Clock {
 public:
  virtual ~Clock() = default;

  virtual absl::Time Now() = 0;

  // With `mu` held: waits until `cond` holds or Now() reaches `deadline`
  // (InfiniteFuture: no deadline), as absl::Mutex::AwaitWithDeadline does
  // on real time. Returns whether `cond` holds.
  virtual bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                 absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

// absl::Now() and absl::Mutex's own deadlines. Lives forever.
Clock* RealClock();

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_CLOCK_H_
