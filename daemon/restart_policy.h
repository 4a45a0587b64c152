// When the supervisor starts a dead worker again, as plain data (issue 19's
// Supervisor shape): exponential back-off over consecutive failures, a
// limit after which it gives up, and what resets the count. No clock of
// its own (the caller passes `now`) and no lock (the supervisor holds it
// under its own).
//
// A failure is a worker that died (after some uptime) or could not be
// spawned. One that had run longer than `healthy_uptime` before dying
// starts a new count: it was working. A completed request, or a model put
// in place by LoadModel, also clears the count (Succeeded).
#ifndef SLUICE_DAEMON_RESTART_POLICY_H_
#define SLUICE_DAEMON_RESTART_POLICY_H_

#include "absl/time/time.h"

namespace sluice::daemon {

// The delay before restart attempt `consecutive_failures` (1-based): `initial`
// doubling per consecutive failure, capped at `max`.
absl::Duration RestartBackoff(int consecutive_failures, absl::Duration initial,
                              absl::Duration max);

class RestartPolicy {
 public:
  struct Options {
    absl::Duration backoff_initial = absl::Milliseconds(100);
    absl::Duration backoff_max = absl::Seconds(30);
    // Failures in a row that are still restarted; one more gives up.
    int max_consecutive_failures = 10;
    absl::Duration healthy_uptime = absl::Seconds(60);
  };

  explicit RestartPolicy(const Options& options) : options_(options) {}

  // The worker works (a request completed, a new one is in place): the
  // count starts again.
  void Succeeded() { failures_ = 0; }

  // A worker died after `uptime` (zero: it could not be spawned). Returns
  // true with a restart due at now + RestartBackoff(count); false when this
  // is more than max_consecutive_failures in a row (no restart is due then).
  bool Failed(absl::Time now, absl::Duration uptime) {
    if (uptime > options_.healthy_uptime) failures_ = 0;
    ++failures_;
    if (failures_ > options_.max_consecutive_failures) {
      restart_at_ = absl::InfiniteFuture();
      return false;
    }
    restart_at_ = now + RestartBackoff(failures_, options_.backoff_initial, options_.backoff_max);
    return true;
  }

  // No restart is due any more (the model was replaced, unloaded, or its
  // start error will not go away by itself).
  void Cancel() { restart_at_ = absl::InfiniteFuture(); }

  // True once when a restart is due at `now` (then none is due until the
  // next Failed).
  bool Due(absl::Time now) {
    if (now < restart_at_) return false;
    restart_at_ = absl::InfiniteFuture();
    return true;
  }

  // When the next restart is due; InfiniteFuture when none is.
  absl::Time restart_at() const { return restart_at_; }
  int consecutive_failures() const { return failures_; }

 private:
  const Options options_;
  int failures_ = 0;
  absl::Time restart_at_ = absl::InfiniteFuture();
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_RESTART_POLICY_H_
