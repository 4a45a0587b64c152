#include "daemon/clock.h"

namespace sluice::daemon {
namespace {

class Real : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return mu->AwaitWithDeadline(cond, deadline);
  }
};

}  // namespace

Clock* RealClock() {
  static Clock* const clock = new Real();
  return clock;
}

}  // namespace sluice::daemon
