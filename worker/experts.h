// The worker's side of the expert slot cache: the backend's
// ExpertStreamStats turned into the messages the supervisor exports (worker
// Stats -> Prometheus) and each request's GenerateDone. The fit planner run
// before a CUDA engine is built is memory/expert_plan.h.
#ifndef SLUICE_WORKER_EXPERTS_H_
#define SLUICE_WORKER_EXPERTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/expert_profile.h"
#include "memory/slot_counters.h"
#include "model/model.h"
#include "proto/sluice/v1/sluice.pb.h"

namespace sluice::worker {

// The cache's state and counters since the model was built, as the worker's
// Stats carry them (all zero / false when nothing streams).
void ToSlotCacheStats(const ExpertStreamStats& stats, sluice::v1::SlotCacheStats* out);

// The usage profile a worker counts into (--expert_profile): the file's
// when it holds a profile of n_layer x n_expert, else an empty one of that
// shape (no file yet, a malformed file or one of another model: a profile
// is a cache, so the load goes on cold and the file is overwritten at the
// next save). `note` says which, for the log. InvalidArgument only when
// the model has no routed experts to count.
absl::StatusOr<memory::ExpertProfile> OpenExpertProfile(const std::string& path, int32_t n_layer,
                                                        int32_t n_expert, std::string* note);

// One request's figures from the counters' difference around it.
sluice::v1::ExpertRequestStats ToRequestStats(const memory::SlotCacheCounters& delta);

// Follows one request: Add() its share of each forward pass it took part
// in (in a batch, the pass's counters apportioned among its sequences by
// their rows: SlotCacheCounters::Portion), Token() after each pass that
// produced one of its tokens, Finish() at the end. The per-token list is
// kept only when asked for.
class RequestExpertTracker {
 public:
  explicit RequestExpertTracker(bool per_token) : per_token_(per_token) {}
  void Add(const memory::SlotCacheCounters& share);
  void Token();
  sluice::v1::ExpertRequestStats Finish() const;

 private:
  memory::SlotCacheCounters total_;
  memory::SlotCacheCounters since_token_;
  const bool per_token_;
  std::vector<sluice::v1::ExpertTokenStats> tokens_;
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_EXPERTS_H_
