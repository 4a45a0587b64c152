// Follows the model load in progress, one at a time: its phases (validating,
// mapping, building, and on CUDA dense and experts), the bytes of the current
// phase, its rate and the time it has left; renders the public LoadProgress
// and the daemon's log lines. Plain data with the clock passed in, so the
// tests need no worker and no sleeps (issue 25, "Loading shows progress").
//
// Thread-safety: none; the supervisor holds it under its mutex.
#ifndef SLUICE_DAEMON_LOAD_TRACKER_H_
#define SLUICE_DAEMON_LOAD_TRACKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "proto/sluice/v1/sluice.pb.h"

namespace sluice::daemon {

class LoadTracker {
 public:
  // A load of `model_id` from `path` begins (phase "validating"). A Begin
  // for the load already in progress (same id and path) keeps its clock.
  void Begin(const std::string& model_id, const std::string& path, absl::Time now);
  // The current phase and its bytes. Returns the log line due now, or "": a
  // phase's first and last report, and every `log_every` in between.
  std::string Update(std::string_view phase, uint64_t done, uint64_t total, absl::Time now);
  // The load ended (ready or failed); returns its one-line summary.
  std::string End(absl::Time now);
  bool active() const { return active_; }

  // Unset when no load is in progress.
  std::optional<v1::LoadProgress> Snapshot(absl::Time now) const;

  absl::Duration log_every = absl::Seconds(5);

 private:
  std::string Line(const v1::LoadProgress& p) const;

  bool active_ = false;
  std::string model_id_, path_, phase_;
  uint64_t done_ = 0, total_ = 0;
  absl::Time began_, phase_began_, logged_;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_LOAD_TRACKER_H_
