#include "model/expert_skip.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace sluice {
namespace {

// mincore on the one page holding `p`.
bool PageResident(const uint8_t* p, uintptr_t page) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  unsigned char vec = 0;
  if (mincore(reinterpret_cast<void*>(start), page, &vec) != 0) return false;
  return (vec & 1) != 0;
}

uint64_t MatrixBytes(const Matrix& m) { return static_cast<uint64_t>(m.rows) * m.row_bytes; }

// The slot of the largest weight among the first k (the first on ties).
int64_t TopSlot(const Routing& r, int64_t k) {
  int64_t top = 0;
  for (int64_t s = 1; s < k; ++s) {
    if (r.weight[s] > r.weight[top]) top = s;
  }
  return top;
}

}  // namespace

bool SampledPagesResident(const uint8_t* data, uint64_t bytes) {
  if (data == nullptr || bytes == 0) return true;
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return PageResident(data, page) && PageResident(data + bytes / 2, page) &&
         PageResident(data + bytes - 1, page);
}

bool PageCacheResidency::Resident(int64_t layer, int32_t expert) const {
  const ExpertWeights& w = (*experts_)[layer][expert];
  return SampledPagesResident(w.gate.data, MatrixBytes(w.gate)) &&
         SampledPagesResident(w.up.data, MatrixBytes(w.up)) &&
         SampledPagesResident(w.down.data, MatrixBytes(w.down));
}

int64_t SkipColdExperts(int64_t layer, int64_t n_expert, int64_t k, double threshold,
                        const ExpertResidency& residency, absl::Span<Routing> routes) {
  if (threshold <= 0) return 0;
  // -1: not asked yet; 0 / 1: the oracle's answer for this step.
  std::vector<int8_t> resident(n_expert, -1);
  const auto is_resident = [&](int32_t e) {
    if (resident[e] < 0) resident[e] = residency.Resident(layer, e) ? 1 : 0;
    return resident[e] == 1;
  };
  int64_t skipped = 0;
  for (Routing& r : routes) {
    float total = 0;
    for (int64_t s = 0; s < k; ++s) total += r.weight[s];
    if (!(total > 0)) continue;
    const int64_t top = TopSlot(r, k);
    float kept = 0;
    int64_t dropped = 0;
    for (int64_t s = 0; s < k; ++s) {
      const bool cold_and_light = s != top && r.expert[s] != kSkippedExpert &&
                                  r.weight[s] / total < threshold && !is_resident(r.expert[s]);
      if (cold_and_light) {
        r.expert[s] = kSkippedExpert;
        r.weight[s] = 0;
        ++dropped;
      } else {
        kept += r.weight[s];
      }
    }
    if (dropped == 0) continue;
    const float scale = total / kept;
    for (int64_t s = 0; s < k; ++s) r.weight[s] *= scale;
    skipped += dropped;
  }
  return skipped;
}

int64_t SkipColdExpertsOfToken(int64_t layer, int64_t n_expert, int64_t k, double threshold,
                               const ExpertResidency& residency, const int32_t* ids,
                               float* weights, std::vector<int32_t>* skipped) {
  Routing r;
  for (int64_t j = 0; j < k; ++j) {
    r.expert[j] = ids[j];
    r.weight[j] = weights[j];
  }
  const int64_t n = SkipColdExperts(layer, n_expert, k, threshold, residency,
                                    absl::MakeSpan(&r, 1));
  if (n == 0) return 0;
  for (int64_t j = 0; j < k; ++j) {
    if (r.expert[j] == kSkippedExpert) skipped->push_back(ids[j]);
    weights[j] = r.weight[j];  // 0 where skipped
  }
  return n;
}

}  // namespace sluice
