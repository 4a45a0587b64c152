#include "model/trace_routing.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice {

TraceRouting::TraceRouting(memory::RoutingTrace trace, std::string name)
    : trace_(std::move(trace)), name_(std::move(name)) {
  records_.resize(trace_.header.n_layer);
  for (size_t i = 0; i < trace_.size(); ++i) {
    const uint32_t layer = trace_.layer[i];
    if (layer < records_.size()) records_[layer].push_back(static_cast<uint32_t>(i));
  }
}

absl::Status TraceRouting::Bind(int64_t n_layer, int64_t n_expert, int64_t k,
                                absl::Span<const int64_t> moe_layers) {
  const memory::RoutingTraceHeader& h = trace_.header;
  const auto differs = [&](const char* what, int64_t trace_has, int64_t model_has) {
    return absl::InvalidArgumentError(absl::StrCat(
        "routing trace ", name_, ": ", trace_has, " ", what, ", the model has ", model_has,
        "; replay a trace of this model's shape (generate --record_trace, or a synthetic "
        "kind, which takes the model's shape)"));
  };
  if (h.n_layer != n_layer) return differs("layers", h.n_layer, n_layer);
  if (h.n_expert != n_expert) return differs("experts per layer", h.n_expert, n_expert);
  if (h.k != k) return differs("experts per token", h.k, k);
  for (int64_t layer : moe_layers) {
    if (layer < 0 || layer >= n_layer || records_[layer].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "routing trace ", name_, ": no record of layer ", layer,
          ", which routes experts in this model"));
    }
  }
  return absl::OkStatus();
}

void TraceRouting::Next(int64_t layer, const void* stream, int64_t n_tok, int32_t* out) {
  const int64_t k = trace_.header.k;
  const std::vector<uint32_t>& mine = records_[layer];
  absl::MutexLock lock(&mu_);
  const auto [it, fresh] = stream_index_.try_emplace(stream, cursor_.size());
  if (fresh) {
    // Starting points spread by the golden ratio's fraction: any number of
    // streams lands far apart, and the first starts at the beginning.
    const double start = std::fmod(static_cast<double>(it->second) * 0.6180339887498949, 1.0);
    std::vector<size_t>& at = cursor_.emplace_back(records_.size(), 0);
    for (size_t l = 0; l < records_.size(); ++l) {
      at[l] = static_cast<size_t>(start * static_cast<double>(records_[l].size()));
    }
  }
  size_t& at = cursor_[it->second][layer];
  for (int64_t t = 0; t < n_tok; ++t) {
    if (at >= mine.size()) {
      at = 0;
      ++wraps_;
    }
    const absl::Span<const int32_t> ids = trace_.Experts(mine[at++]);
    std::copy_n(ids.data(), k, out + t * k);
  }
  tokens_ += static_cast<uint64_t>(n_tok);
}

uint64_t TraceRouting::tokens_routed() const {
  absl::MutexLock lock(&mu_);
  return tokens_;
}

uint64_t TraceRouting::wraps() const {
  absl::MutexLock lock(&mu_);
  return wraps_;
}

size_t TraceRouting::streams() const {
  absl::MutexLock lock(&mu_);
  return cursor_.size();
}

}  // namespace sluice
