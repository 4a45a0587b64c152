// MoE routing with DeepSeek's choices on the GPU (deepseek2; any later
// architecture with a selection bias or expert groups), behind a plain C++
// header: softmax or sigmoid scores, the selection bias added for choosing
// only, the group limit, the weights' norm and scale. ops.h's TopK is the
// plain softmax-top-k-renormalise case and stays the qwen models' kernel.
//
// Enqueues only; launch errors surface through LastLaunchError (device.h).
#ifndef SLUICE_KERNELS_CUDA_ROUTE_OPS_H_
#define SLUICE_KERNELS_CUDA_ROUTE_OPS_H_

#include <cstdint>

#include "kernels/cuda/ops.h"

namespace sluice::cuda {

struct RouteShape {
  int n_expert = 0;
  int k = 0;
  bool sigmoid = false;      // scores: sigmoid of the logits; else softmax
  int n_group = 1;           // equal ranges of consecutive experts
  int n_group_used = 1;      // groups the k experts are chosen from
  bool norm_weights = true;  // renormalise the chosen weights (sum clamped)
  float weights_scale = 1.0f;
};

// Whether Route handles `s`: 1 <= k <= min(64, n_expert), n_group divides
// n_expert, 1 <= n_group_used <= n_group, the used groups hold k experts.
bool RouteSupported(const RouteShape& s);

// Per token t < n_tok (model/moe.cc RouteTokenWith): p = softmax or sigmoid
// of logits[t] ([n_tok][n_expert]); experts chosen by p + bias (bias
// [n_expert], or null) among the n_group_used groups whose two best biased
// scores sum highest (ties to the lower group), the k best in decreasing
// order (ties to the lower id); weights their unbiased p, divided by their
// sum (clamped below at 6.1e-5) when norm_weights, times weights_scale.
// ids, weights: [n_tok][k]; paired_ids (optional) [n_tok][2k]: the ids,
// then the ids + n_expert (TopK's pairing of gate and up tables).
void Route(const RouteShape& s, const float* logits, const float* bias, int64_t n_tok,
           int32_t* ids, float* weights, Stream stream, int32_t* paired_ids = nullptr);

}  // namespace sluice::cuda

#endif  // SLUICE_KERNELS_CUDA_ROUTE_OPS_H_
