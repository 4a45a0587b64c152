// The opt-in lossy mode of issue 22 (--expert_skip, config::ExpertConfig::
// skip_threshold): a routed expert whose weight bytes are not in RAM and
// whose share of its token's routing weights is small is not computed, so
// the pass never waits for the disk on its behalf; the token's other
// weights are scaled up to the sum they had. docs/SLOT_CACHE.md ("Skipping
// cold experts") has the measured quality cost.
//
// Semantics:
//   - share(e) = weight(e) / sum of the token's k weights, i.e. the weight
//     after the model's normalisation (qwen's k weights sum to 1, so the
//     share is the weight; deepseek2's weights_scale does not change it).
//   - An expert is skipped when share < threshold and the residency oracle
//     says it is not resident. The slot with the largest weight (the first
//     such slot on ties) is never skipped, so every token keeps an expert.
//   - The kept weights are multiplied by (sum of all k) / (sum of the kept):
//     the block's output keeps its scale. A token with nothing skipped is
//     left untouched, so threshold 0 changes no bit.
//   - A skipped slot's id becomes kSkippedExpert (model/moe.h): ComputeMoe
//     and RoutedExperts pass over it, so its bytes are never read.
#ifndef SLUICE_MODEL_EXPERT_SKIP_H_
#define SLUICE_MODEL_EXPERT_SKIP_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "model/moe.h"

namespace sluice {

// Whether a routed expert's weight bytes are in RAM. Injectable, so that
// tests and quality measurements do not depend on the page cache.
// Thread-safety: Resident may be called from concurrent forward passes.
class ExpertResidency {
 public:
  virtual ~ExpertResidency() = default;
  // Expert `expert` of block `layer` (a block with routed experts).
  virtual bool Resident(int64_t layer, int32_t expert) const = 0;
};

// The CPU engine's answer: the experts are read in place from the
// read-only mapping, so an expert is resident when its pages are in the
// page cache. mincore(2) is asked about three pages of each of its gate,
// up and down slices (first, middle, last): nine pages, one call each,
// instead of the whole range; a page evicted between samples is missed,
// which only means one more expert computed. `experts[layer][e]` must
// outlive this object (CpuModel's table of experts in place).
class PageCacheResidency final : public ExpertResidency {
 public:
  explicit PageCacheResidency(const std::vector<std::vector<ExpertWeights>>* experts)
      : experts_(experts) {}
  bool Resident(int64_t layer, int32_t expert) const override;

 private:
  const std::vector<std::vector<ExpertWeights>>* experts_;
};

// Whether the sampled pages of [data, data + bytes) are all in the page
// cache (true for an empty range; false when mincore fails).
bool SampledPagesResident(const uint8_t* data, uint64_t bytes);

// Applies the mode to the routes of block `layer` (the first k slots of
// each, k = n_expert_used; routes as RouteMoe leaves them) and returns
// the number of slots skipped. Residency is asked once per distinct
// candidate expert of the call (a micro-batch): the answer is cached for
// the step. threshold <= 0 returns 0 without asking anything.
int64_t SkipColdExperts(int64_t layer, int64_t n_expert, int64_t k, double threshold,
                        const ExpertResidency& residency, absl::Span<Routing> routes);

// The same for one token whose k ids and weights lie in two arrays (the
// CUDA backend's read-back routing): the weights rewritten in place (the
// skipped ones 0, the kept ones rescaled), the skipped ids appended to
// *skipped, their count returned. The ids are left as they are.
int64_t SkipColdExpertsOfToken(int64_t layer, int64_t n_expert, int64_t k, double threshold,
                               const ExpertResidency& residency, const int32_t* ids,
                               float* weights, std::vector<int32_t>* skipped);

}  // namespace sluice

#endif  // SLUICE_MODEL_EXPERT_SKIP_H_
