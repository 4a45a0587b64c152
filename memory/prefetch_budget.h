// How many of the next layer's predicted experts a decode step copies into
// slots ahead of demand (--expert_prefetch).
//
// A prefetch pays only when its copies land before that layer's routing
// comes back. Copies still running then share the link with the layer's
// demand copies, and a demanded expert among them holds up its products.
// So the right amount is what the link moves while the device finishes
// this layer and computes the next one's dense part: it depends on the
// model, the layer's kind, the step and the machine, and is learnt per
// layer from what each prefetch batch did:
//
//   budget.Experts(l)          experts to prefetch for layer l (the most
//                              likely first; fewer when fewer miss)
//   ... at layer l's Acquire:  budget.Observe(l, issued, landed)
//
//   landed, and the batch used the whole budget -> one more (up to max);
//   not landed                                  -> one fewer (down to min).
//
// A batch smaller than the budget (fewer predicted experts missed) says
// nothing about a larger one and leaves it. Measured on the H100 (run 20,
// docs/BENCHMARKS.md): prefetching every predicted expert at 25% of
// bench35's experts made 77% of lookups hits but took the link time the
// misses needed, and decoded no faster.
//
// Plain C++, no CUDA. Thread-safety: none; one forward pass drives it.
#ifndef SLUICE_MEMORY_PREFETCH_BUDGET_H_
#define SLUICE_MEMORY_PREFETCH_BUDGET_H_

#include <cstdint>
#include <vector>

namespace sluice::memory {

class PrefetchBudget {
 public:
  struct Options {
    int min = 1;    // at least 0; 1 keeps measuring
    int max = 8;    // at least min (a token's routed experts)
    int start = 1;  // clamped to [min, max]
  };
  PrefetchBudget(int n_layers, Options options);

  // The budget of layer `layer` (out of range: 0).
  int Experts(int layer) const;
  // Layer `layer`'s prefetch batch of `issued` experts had (`landed`) or
  // had not finished copying when its routing came back. No-op for a layer
  // out of range or an empty batch.
  void Observe(int layer, int issued, bool landed);

  int64_t landed() const { return landed_; }
  int64_t late() const { return late_; }

 private:
  Options o_;
  std::vector<int> budget_;
  int64_t landed_ = 0, late_ = 0;
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_PREFETCH_BUDGET_H_
