// A RoutingSource (model/moe.h) that replays a routing trace
// (memory/routing_trace.h): one recorded by `generate --record_trace`, or
// a synthetic one (tools/slotsim_lib.h: uniform, zipf, realistic, mixed).
// Each layer hands out its own records in the file's order, one a token,
// and starts again from its first record when they run out, so a trace of
// any length routes a run of any length. Each sequence (stream) reads the
// records on its own: the first one seen from the first record, the j-th
// from j x 0.618... of the way through (wrapped), so the sequences of a
// batch share the trace's popularity but each keeps its own token-to-token
// reuse, as different requests do.
#ifndef SLUICE_MODEL_TRACE_ROUTING_H_
#define SLUICE_MODEL_TRACE_ROUTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "memory/routing_trace.h"
#include "model/moe.h"

namespace sluice {

class TraceRouting final : public RoutingSource {
 public:
  // name: how messages call the trace (its path, or the synthetic kind).
  TraceRouting(memory::RoutingTrace trace, std::string name);

  // InvalidArgument, naming the trace, unless its header has the model's
  // blocks, experts and k, and every routing block has a record.
  absl::Status Bind(int64_t n_layer, int64_t n_expert, int64_t k,
                    absl::Span<const int64_t> moe_layers) override;
  void Next(int64_t layer, const void* stream, int64_t n_tok, int32_t* out) override;

  // Tokens routed so far (summed over layers), how many times a stream's
  // records of a layer ran out and began again, and the streams seen.
  uint64_t tokens_routed() const;
  uint64_t wraps() const;
  size_t streams() const;

 private:
  const memory::RoutingTrace trace_;
  const std::string name_;
  std::vector<std::vector<uint32_t>> records_;  // per layer: record indices

  mutable absl::Mutex mu_;
  // Per stream, in the order first seen: the next record of each layer.
  absl::flat_hash_map<const void*, size_t> stream_index_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<size_t>> cursor_ ABSL_GUARDED_BY(mu_);
  uint64_t tokens_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t wraps_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_TRACE_ROUTING_H_
