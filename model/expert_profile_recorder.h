// Counts each routed expert's uses into a memory::ExpertProfile as the
// model routes (a RoutingObserver), for `--expert_profile` (issue 22): the
// worker saves it while serving and a restarted worker warms its expert
// arena from it. One use per (layer, expert) per pass, as the data path
// looks an expert up once per pass for all the rows routed to it.
#ifndef SLUICE_MODEL_EXPERT_PROFILE_RECORDER_H_
#define SLUICE_MODEL_EXPERT_PROFILE_RECORDER_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "memory/expert_profile.h"
#include "model/moe.h"

namespace sluice {

class ExpertProfileRecorder : public RoutingObserver {
 public:
  // Counts on top of `start` (a loaded profile, or an empty one of the
  // model's shape).
  explicit ExpertProfileRecorder(memory::ExpertProfile start) : profile_(std::move(start)) {}

  void OnRouting(int64_t layer, int64_t n_expert_used,
                 absl::Span<const Routing> routes) override;

  // Writes the counts to `path` through a temporary file in the same
  // directory and a rename, so a reader (or a crash) never sees half a
  // profile. Errors name the path and the OS error.
  absl::Status Save(const std::string& path) const;

  memory::ExpertProfile Snapshot() const;
  // Uses counted since construction or the last Save (0: nothing to save).
  uint64_t unsaved() const;
  // Routing the profile's shape does not hold (a layer or expert out of
  // range), counted and dropped.
  uint64_t dropped() const;

 private:
  mutable absl::Mutex mu_;
  memory::ExpertProfile profile_ ABSL_GUARDED_BY(mu_);
  mutable uint64_t unsaved_ ABSL_GUARDED_BY(mu_) = 0;  // Save is const
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_EXPERT_PROFILE_RECORDER_H_
