// Tests' RoutingObserver: what the model routed, as a memory::RoutingTrace
// (set its header from the engine's info before routing) and the router's
// weights beside it, record after record.
#ifndef SLUICE_MODEL_TESTING_ROUTING_COLLECTOR_H_
#define SLUICE_MODEL_TESTING_ROUTING_COLLECTOR_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "memory/routing_trace.h"
#include "model/moe.h"

namespace sluice::testing {

class RoutingCollector : public RoutingObserver {
 public:
  void OnRouting(int64_t layer, int64_t k, absl::Span<const Routing> routes) override {
    if (static_cast<size_t>(layer) >= next_.size()) next_.resize(layer + 1, 0);
    for (const Routing& r : routes) {
      trace.Add(next_[layer]++, static_cast<uint32_t>(layer),
                absl::MakeConstSpan(r.expert, static_cast<size_t>(k)));
      weights.insert(weights.end(), r.weight, r.weight + k);
    }
  }
  memory::RoutingTrace trace;
  std::vector<float> weights;

 private:
  std::vector<uint32_t> next_;  // per layer: the next token index
};

}  // namespace sluice::testing

#endif  // SLUICE_MODEL_TESTING_ROUTING_COLLECTOR_H_
