// Whether a ready worker is hung, as plain data (issue 19's Supervisor
// shape): silent (not even a heartbeat) for `timeout`, or with requests in
// flight and no event of any of them for `timeout`. No clock of its own
// (the caller passes `now`) and no lock (the supervisor holds it under its
// own).
#ifndef SLUICE_DAEMON_HUNG_WATCH_H_
#define SLUICE_DAEMON_HUNG_WATCH_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace sluice::daemon {

class HungWatch {
 public:
  explicit HungWatch(absl::Duration timeout) : timeout_(timeout) {}

  // A worker (newly started or switched to) is watched from `now`, not hung.
  void Start(absl::Time now) {
    heard_ = now;
    hung_ = false;
  }
  // Any message from the worker.
  void Heard(absl::Time now) { heard_ = now; }
  // A request went to the worker, or one in flight had an event.
  void Progress(absl::Time now) { progress_ = now; }

  // Why the worker is hung at `now` with the requests `in_flight` (ids,
  // ascending); empty while it is not. Asks nothing once MarkHung'ed.
  std::string Why(absl::Time now, const std::vector<uint64_t>& in_flight) const {
    if (hung_) return "";
    if (now - heard_ >= timeout_) {
      return absl::StrCat("no message or heartbeat for ", absl::FormatDuration(now - heard_));
    }
    if (!in_flight.empty() && now - progress_ >= timeout_) {
      return absl::StrCat("no progress on request", in_flight.size() > 1 ? "s " : " ",
                          absl::StrJoin(in_flight, ", "), " for ",
                          absl::FormatDuration(now - progress_));
    }
    return "";
  }

  // The worker was found hung (and killed); its exit is pending.
  void MarkHung() { hung_ = true; }
  bool hung() const { return hung_; }

  // When Why() may next say something; InfiniteFuture once hung.
  absl::Time NextCheck(bool requests_in_flight) const {
    if (hung_) return absl::InfiniteFuture();
    absl::Time at = heard_ + timeout_;
    if (requests_in_flight) at = std::min(at, progress_ + timeout_);
    return at;
  }

 private:
  const absl::Duration timeout_;
  absl::Time heard_;
  absl::Time progress_;
  bool hung_ = false;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_HUNG_WATCH_H_
