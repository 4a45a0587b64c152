// coldread_tier.h where the build has no CUDA (--config=nocuda; the pair of coldread_tier_cuda.cc).
#include "tools/coldread_tier.h"

namespace sluice::coldread {

absl::StatusOr<TierRun> MeasureTier(const ModelFiles&, const LayerExperts&,
                                    const LayerBatches&, bool, int, uint64_t,
                                    uint64_t) {
  return absl::UnavailableError(
      "built without CUDA (--config=nocuda): the host tier needs pinned memory "
      "from a CUDA device");
}

}  // namespace sluice::coldread
