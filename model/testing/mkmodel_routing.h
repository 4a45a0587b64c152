// The expert distribution an mkmodel model's router produces, so every
// benchmark can say which routing it ran with.
//
// MeasureRouting embeds every vocabulary token (token_embd as WriteModel
// draws it, before quantization), normalises it with layer 0's FFN norm
// (RMSNorm; the mixer's contribution to the residual is left out) and routes
// it through layer 0's router with the engine's own RouteToken (model/moe.h).
//
// Thread-safety: pure; reentrant.
#ifndef SLUICE_MODEL_TESTING_MKMODEL_ROUTING_H_
#define SLUICE_MODEL_TESTING_MKMODEL_ROUTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/testing/mkmodel.h"

namespace sluice::mkmodel {

struct RoutingStats {
  int64_t tokens = 0;    // inputs routed
  int64_t n_expert = 0;
  int64_t k = 0;         // experts per token
  std::vector<int64_t> hits;  // per expert: how many tokens chose it
  // Shares of all tokens * k selections.
  double top1_share = 0;       // the most chosen expert
  int64_t top_decile = 0;      // experts in the top 10% (at least 1)
  double top_decile_share = 0; // the top_decile most chosen experts
  double entropy_bits = 0;     // of the selection distribution
  double max_entropy_bits = 0; // log2(n_expert): uniform
};

// Routes every token of the model's vocabulary through the first MoE
// layer's router (layer 0; deepseek2: the first after its dense blocks,
// with its gating, selection bias and groups).
// Errors: those of GenerateTensor / BuildVocab.
absl::StatusOr<RoutingStats> MeasureRouting(const Options& o);

// One line, e.g. "routing: locality=1 layer=0 tokens=1300 k=8 experts=256
// top1_share=0.052 (uniform 0.0039) top10%_share=0.41 (uniform 0.10)
// entropy_bits=6.1 of 8.0".
std::string FormatRoutingStats(const Options& o, const RoutingStats& s);

}  // namespace sluice::mkmodel

#endif  // SLUICE_MODEL_TESTING_MKMODEL_ROUTING_H_
