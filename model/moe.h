// The mixture-of-experts feed-forward block (qwen3moe, qwen35moe,
// deepseek2) and the dense SwiGLU FFN of deepseek2's leading blocks.
//
//   p      = softmax(Wrouter x) over all experts
//   top    = the k most probable experts; their p renormalised to sum 1
//   expert = Wdown_e (silu(Wgate_e x) * Wup_e x)        (SwiGLU)
//   out    = sum over the k slots, in order of decreasing p, of p_e expert_e
//   shared (qwen35moe): out += sigmoid(w_shexp_gate . x) * SwiGLU_shared(x)
//   shared (deepseek2, no shared_gate_inp): out += SwiGLU_shared(x)
//
// deepseek2's routing (MoeConfig's routing fields, the defaults being the
// above): p = softmax or sigmoid of the logits; experts are chosen by
// p + selection_bias (exp_probs_b), among the n_group_used groups (n_group
// equal ranges of consecutive experts) whose two best biased scores sum
// highest; the weights are the chosen experts' unbiased p, renormalised to
// sum 1 when norm_weights, then multiplied by weights_scale. This is
// llama.cpp's build_moe_ffn.
//
// Routed experts are read in place from the expert tensors (one slice per
// expert); the tokens of a batch routed to the same expert are gathered and
// multiplied together.
#ifndef SLUICE_MODEL_MOE_H_
#define SLUICE_MODEL_MOE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/thread_pool.h"
#include "model/weights.h"

namespace sluice {

// How router logits become scores (MoeConfig::gating).
enum class ExpertGating { kSoftmax, kSigmoid };

struct MoeConfig {
  int64_t n_embd = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t expert_ff = 0;
  int64_t shared_ff = 0;  // 0: no shared expert
  // Routing (see the top of this file); the defaults are qwen's.
  ExpertGating gating = ExpertGating::kSoftmax;
  int64_t n_group = 1;       // expert groups; 1: no group limit
  int64_t n_group_used = 1;  // groups the k experts are chosen from
  bool norm_weights = true;  // renormalise the chosen weights to sum 1
  float weights_scale = 1.0f;

  // Whether routing is qwen's plain softmax-top-k-renormalise (RouteToken)
  // given the layer has no selection bias.
  bool plain_routing() const {
    return gating == ExpertGating::kSoftmax && n_group <= 1 && norm_weights &&
           weights_scale == 1.0f;
  }
};

struct MoeWeights {
  Matrix router;      // n_embd -> n_expert
  ExpertMatrix gate;  // n_embd -> expert_ff, per expert
  ExpertMatrix up;    // n_embd -> expert_ff, per expert
  ExpertMatrix down;  // expert_ff -> n_embd, per expert
  // Added to the scores for choosing experts only (exp_probs_b); null: none.
  const float* selection_bias = nullptr;  // [n_expert]
  // Shared expert (used when MoeConfig::shared_ff > 0); without
  // shared_gate_inp its output is added ungated.
  const float* shared_gate_inp = nullptr;  // [n_embd]
  Matrix shared_gate;  // n_embd -> shared_ff
  Matrix shared_up;    // n_embd -> shared_ff
  Matrix shared_down;  // shared_ff -> n_embd
};

// Upper bound on experts used per token (checked when a model loads).
inline constexpr int64_t kMaxExpertsUsed = 64;

// An entry of Routing::expert that the lossy mode (model/expert_skip.h)
// took out: its weight is 0, and ComputeMoe and RoutedExperts pass over it.
inline constexpr int32_t kSkippedExpert = -1;

// Routing of one token: the chosen experts (decreasing probability) and
// their renormalised weights; entries [0, k) are set.
struct Routing {
  int32_t expert[kMaxExpertsUsed];
  float weight[kMaxExpertsUsed];
};

// Softmax over the n_expert router logits, top-k, renormalisation.
// Precondition: 0 < k <= min(kMaxExpertsUsed, n_expert).
void RouteToken(const float* logits, int64_t n_expert, int64_t k,
                Routing* routing);

// The routing of config (gating, selection bias, groups, weight norm and
// scale) for one token's logits; RouteToken when config.plain_routing() and
// there is no bias. selection_bias may be null. Preconditions as RouteToken;
// n_group divides n_expert and 1 <= n_group_used <= n_group.
void RouteTokenWith(const MoeConfig& config, const float* logits,
                    const float* selection_bias, Routing* routing);

// One routed expert's matrices, wherever they are read from (the resident
// weights, a cache slot, a host tier).
struct ExpertWeights {
  Matrix gate;  // n_embd -> expert_ff
  Matrix up;    // n_embd -> expert_ff
  Matrix down;  // expert_ff -> n_embd
};

// Single-token outputs of `experts`, unweighted: y[i] ([n_embd] each,
// n_embd = down.rows, the same for all) = down_i(silu(gate_i x) * up_i x).
// The gate and up products of all of them run as one parallel loop, the
// down products as a second; every output row is computed as Project would
// (same kernel, same order), so results do not depend on the pool. Used by
// the single-token MoE step and by a GPU backend computing missed experts
// on the host.
absl::Status ExpertsOneToken(absl::Span<const ExpertWeights> experts,
                             const float* x, float* y,
                             ThreadPool* pool);

// The MoE block runs in three steps, so that a cache can stand between
// routing and compute:
//   route:   RouteMoe gives each token's experts and weights;
//   acquire: the caller makes a table, indexed by expert id, whose entries
//            for the routed experts point at their weights;
//   compute: ComputeMoe multiplies through that table.
// RunMoe chains them over the resident weights.

// routes (resized to n_tok): each token's top-k experts and weights, from
// the router logits of x [n_tok][n_embd].
absl::Status RouteMoe(const MoeConfig& config, const Matrix& router,
                      const float* x, int64_t n_tok,
                      std::vector<Routing>* routes,
                      ThreadPool* pool);

// The same with w's router and selection bias and config's routing.
absl::Status RouteMoe(const MoeConfig& config, const MoeWeights& w,
                      const float* x, int64_t n_tok,
                      std::vector<Routing>* routes,
                      ThreadPool* pool);

// The distinct experts of routes (the first n_expert_used slots of each,
// kSkippedExpert left out), in increasing id order: the entries the acquire step must set, once
// each, for ComputeMoe over these routes. A batched pass routes every row
// of the step first, so this is the union of the step's experts.
std::vector<int32_t> RoutedExperts(const MoeConfig& config,
                                   absl::Span<const Routing> routes);

// Every expert of w in place (the table of the all-resident case).
std::vector<ExpertWeights> ResidentExperts(const MoeWeights& w);

// out[t] = sum over the slots of routes[t] of weight * expert(x[t]), plus
// the shared expert of w when config.shared_ff > 0. experts[e] must be set
// for every routed e; the experts share w's types and shapes.
// x: normed input [n_tok][n_embd] with n_tok = routes.size(); out:
// [n_tok][n_embd] (no alias).
absl::Status ComputeMoe(const MoeConfig& config, const MoeWeights& w,
                        absl::Span<const Routing> routes,
                        absl::Span<const ExpertWeights> experts,
                        const float* x, float* out,
                        ThreadPool* pool);

// Sees each MoE block's routing as it is computed (a routing-trace recorder,
// per-layer statistics). Called on the forward pass's thread.
class RoutingObserver {
 public:
  virtual ~RoutingObserver() = default;
  // routes: one entry per token of the micro-batch, in order (a batched
  // pass of several sequences: the rows of one chunk after another, so the
  // entries of different sequences follow each other).
  virtual void OnRouting(int64_t layer, int64_t n_expert_used,
                         absl::Span<const Routing> routes) = 0;
};

// Chooses the experts of each token in place of the router: a benchmark
// replays a routing trace (model/trace_routing.h) through the real data
// path, so the experts moved, cached and computed are the trace's. The
// router still runs and its k weights are kept, in its order; only the
// experts they weight change. Called on the forward pass's thread, one
// call at a time per engine.
class RoutingSource {
 public:
  virtual ~RoutingSource() = default;
  // Told the model's shape once, when the backend is built: the blocks
  // (layer ids [0, n_layer)), the experts per block, k, and the blocks
  // that route (moe_layers, increasing). InvalidArgument, naming the
  // source and what differs, when the source cannot route this model.
  virtual absl::Status Bind(int64_t n_layer, int64_t n_expert, int64_t k,
                            absl::Span<const int64_t> moe_layers) = 0;
  // The next n_tok tokens' experts of `layer` (one of moe_layers) for the
  // sequence `stream` (its state's address: a batch's sequences each go
  // on with their own tokens): k distinct ids in [0, n_expert) a token,
  // out[n_tok][k].
  virtual void Next(int64_t layer, const void* stream, int64_t n_tok, int32_t* out) = 0;
};

// A sequence's consecutive rows of a pass.
struct StreamRows {
  const void* stream;
  int64_t rows;
};

// Replaces the first k experts of each of routes with source's next ones
// for `layer`: routes are the rows of `runs`, one run after another (the
// weights stay).
void ForceRouting(RoutingSource& source, int64_t layer, int64_t k,
                  absl::Span<const StreamRows> runs, absl::Span<Routing> routes);

// Route, resident experts, compute.
// x: normed input [n_tok][n_embd]; out: [n_tok][n_embd] (no alias).
absl::Status RunMoe(const MoeConfig& config, const MoeWeights& w,
                    const float* x, int64_t n_tok, float* out,
                    ThreadPool* pool);

// A dense SwiGLU FFN (deepseek2's leading blocks): out = down(silu(gate x)
// * up x). x: [n_tok][n_embd]; out: [n_tok][n_embd] (no alias).
struct DenseFfnWeights {
  Matrix gate;  // n_embd -> ff
  Matrix up;    // n_embd -> ff
  Matrix down;  // ff -> n_embd
};
absl::Status RunDenseFfn(const DenseFfnWeights& w, const float* x,
                         int64_t n_tok, float* out, ThreadPool* pool);

}  // namespace sluice

#endif  // SLUICE_MODEL_MOE_H_
