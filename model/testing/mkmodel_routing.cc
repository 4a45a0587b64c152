#include "model/testing/mkmodel_routing.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "model/blocks.h"
#include "model/moe.h"

namespace sluice::mkmodel {

absl::StatusOr<RoutingStats> MeasureRouting(const Options& o) {
  const int64_t n = o.shape.n_embd, n_expert = o.shape.n_expert, k = o.shape.n_expert_used;
  // The first block with routed experts (deepseek2's lead blocks are dense).
  const bool ds2 = o.arch == Arch::kDeepseek2;
  const std::string blk = absl::StrCat("blk.", ds2 ? o.shape.n_dense_lead : 0, ".");
  ASSIGN_OR_RETURN(std::vector<float> embd, GenerateTensor(o, "token_embd.weight"));
  ASSIGN_OR_RETURN(std::vector<float> router, GenerateTensor(o, blk + "ffn_gate_inp.weight"));
  const std::string norm_name = blk + (o.arch == Arch::kQwen35Moe ? "post_attention_norm.weight"
                                                                   : "ffn_norm.weight");
  ASSIGN_OR_RETURN(std::vector<float> norm, GenerateTensor(o, norm_name));
  // deepseek2 routes with its gating, selection bias and groups.
  MoeConfig config;
  config.n_expert = n_expert;
  config.n_expert_used = k;
  std::vector<float> bias;
  if (ds2) {
    config.gating = o.shape.gating_func == 2 ? ExpertGating::kSigmoid : ExpertGating::kSoftmax;
    config.n_group = std::max<int64_t>(1, o.shape.n_group);
    config.n_group_used = config.n_group > 1 ? o.shape.n_group_used : 1;
    config.norm_weights = o.shape.weights_norm != 0;
    config.weights_scale = o.shape.weights_scale;
    ASSIGN_OR_RETURN(bias, GenerateTensor(o, blk + "exp_probs_b.bias"));
  }

  RoutingStats s;
  s.tokens = static_cast<int64_t>(embd.size()) / n;
  s.n_expert = n_expert;
  s.k = k;
  s.hits.assign(n_expert, 0);
  std::vector<float> x(n), logits(n_expert);
  Routing routing;
  for (int64_t t = 0; t < s.tokens; ++t) {
    RmsNorm(embd.data() + t * n, n, norm.data(), o.shape.rms_eps, x.data());
    for (int64_t e = 0; e < n_expert; ++e) {
      const float* row = router.data() + e * n;
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(row[i]) * x[i];
      logits[e] = static_cast<float>(dot);
    }
    RouteTokenWith(config, logits.data(), bias.empty() ? nullptr : bias.data(), &routing);
    for (int64_t i = 0; i < k; ++i) ++s.hits[routing.expert[i]];
  }

  std::vector<int64_t> sorted = s.hits;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const double total = static_cast<double>(s.tokens * k);
  s.top1_share = sorted[0] / total;
  s.top_decile = std::max<int64_t>(1, (n_expert + 5) / 10);
  for (int64_t i = 0; i < s.top_decile; ++i) s.top_decile_share += sorted[i] / total;
  for (int64_t h : s.hits) {
    if (h > 0) s.entropy_bits -= (h / total) * std::log2(h / total);
  }
  s.max_entropy_bits = std::log2(static_cast<double>(n_expert));
  return s;
}

std::string FormatRoutingStats(const Options& o, const RoutingStats& s) {
  return absl::StrFormat(
      "routing: locality=%g layer=%d tokens=%d k=%d experts=%d top1_share=%.4f "
      "(uniform %.4f) top10%%_share=%.3f (%d experts, uniform %.3f) "
      "entropy_bits=%.2f of %.2f",
      o.routing_locality, o.arch == Arch::kDeepseek2 ? o.shape.n_dense_lead : 0, s.tokens, s.k, s.n_expert, s.top1_share,
      1.0 / static_cast<double>(s.n_expert), s.top_decile_share, s.top_decile,
      static_cast<double>(s.top_decile) / s.n_expert, s.entropy_bits, s.max_entropy_bits);
}

}  // namespace sluice::mkmodel
