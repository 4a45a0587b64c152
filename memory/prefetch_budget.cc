#include "memory/prefetch_budget.h"

#include <algorithm>

namespace sluice::memory {

PrefetchBudget::PrefetchBudget(int n_layers, Options options) : o_(options) {
  o_.min = std::max(o_.min, 0);
  o_.max = std::max(o_.max, o_.min);
  o_.start = std::clamp(o_.start, o_.min, o_.max);
  budget_.assign(std::max(n_layers, 0), o_.start);
}

int PrefetchBudget::Experts(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(budget_.size())) return 0;
  return budget_[layer];
}

void PrefetchBudget::Observe(int layer, int issued, bool landed) {
  if (layer < 0 || layer >= static_cast<int>(budget_.size()) || issued <= 0) return;
  int& b = budget_[layer];
  if (landed) {
    ++landed_;
    if (issued >= b) b = std::min(b + 1, o_.max);
  } else {
    ++late_;
    b = std::max(b - 1, o_.min);
  }
}

}  // namespace sluice::memory
