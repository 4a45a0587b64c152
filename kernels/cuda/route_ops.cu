// Device code of route_ops.h: one warp per token, as TopK (no block
// barriers; a decode step routes one token a layer).
#include <cuda_runtime.h>

#include "kernels/cuda/route_ops.h"
#include "kernels/cuda/warp_reduce.h"

namespace sluice::cuda {
namespace {

using internal::SigmoidF;
using internal::WarpArgMax;
using internal::WarpMax;
using internal::WarpSum;

constexpr int kMaxK = 64;
constexpr float kMinWeightSum = 6.103515625e-5f;

// p = softmax (max-subtracted, the sum in double) or sigmoid of the logits;
// sel = p + bias.
__device__ void Scores(const RouteShape& s, const float* logits, const float* bias, float* p,
                       float* sel) {
  const int lane = threadIdx.x & 31, n = s.n_expert;
  if (s.sigmoid) {
    for (int e = lane; e < n; e += 32) p[e] = SigmoidF(logits[e]);
  } else {
    float m = -INFINITY;
    for (int e = lane; e < n; e += 32) m = fmaxf(m, logits[e]);
    m = WarpMax(m);
    double sum = 0.0;
    for (int e = lane; e < n; e += 32) {
      p[e] = expf(logits[e] - m);
      sum += p[e];
    }
    sum = WarpSum(sum);
    const float inv = static_cast<float>(1.0 / sum);
    for (int e = lane; e < n; e += 32) p[e] *= inv;
  }
  for (int e = lane; e < n; e += 32) sel[e] = bias != nullptr ? p[e] + bias[e] : p[e];
  __syncwarp();
}

// Leaves in sel only the experts of the n_group_used groups whose two best
// scores sum highest (the others -inf). gscore: n_group floats; keep:
// n_group ints.
__device__ void LimitGroups(const RouteShape& s, float* sel, float* gscore, int* keep) {
  const int lane = threadIdx.x & 31, per = s.n_expert / s.n_group;
  for (int g = lane; g < s.n_group; g += 32) {
    float b1 = -INFINITY, b2 = -INFINITY;
    for (int e = g * per; e < (g + 1) * per; ++e) {
      const float v = sel[e];
      if (v > b1) {
        b2 = b1;
        b1 = v;
      } else if (v > b2) {
        b2 = v;
      }
    }
    const double sum = per >= 2 ? static_cast<double>(b1) + b2 : static_cast<double>(b1);
    gscore[g] = static_cast<float>(sum);
    keep[g] = 0;
  }
  __syncwarp();
  if (lane == 0) {
    for (int r = 0; r < s.n_group_used; ++r) {
      int best = -1;
      for (int g = 0; g < s.n_group; ++g) {
        if (!keep[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
      }
      keep[best] = 1;
    }
  }
  __syncwarp();
  for (int e = lane; e < s.n_expert; e += 32) {
    if (!keep[e / per]) sel[e] = -INFINITY;
  }
  __syncwarp();
}

__global__ void RouteKernel(RouteShape s, const float* logits, const float* bias, int32_t* ids,
                            float* weights, int32_t* paired) {
  extern __shared__ float smem[];
  float* p = smem;
  float* sel = p + s.n_expert;
  float* gscore = sel + s.n_expert;
  int* keep = reinterpret_cast<int*>(gscore + s.n_group);
  const int t = blockIdx.x, lane = threadIdx.x & 31, k = s.k;
  Scores(s, logits + static_cast<int64_t>(t) * s.n_expert, bias, p, sel);
  if (s.n_group > 1) LimitGroups(s, sel, gscore, keep);
  int32_t* id = ids + static_cast<int64_t>(t) * k;
  float* w = weights + static_cast<int64_t>(t) * k;
  double total = 0.0;
  for (int slot = 0; slot < k; ++slot) {
    float bv;
    int bi;
    WarpArgMax(sel, s.n_expert, -INFINITY, &bv, &bi);
    if (lane == 0) {
      id[slot] = bi;
      w[slot] = p[bi];
      total += p[bi];
      sel[bi] = -INFINITY;
      if (paired != nullptr) {
        paired[static_cast<int64_t>(t) * 2 * k + slot] = bi;
        paired[static_cast<int64_t>(t) * 2 * k + k + slot] = bi + s.n_expert;
      }
    }
    __syncwarp();
  }
  if (lane != 0) return;
  if (s.norm_weights) {
    const float sum = fmaxf(static_cast<float>(total), kMinWeightSum);
    for (int slot = 0; slot < k; ++slot) w[slot] /= sum;
  }
  if (s.weights_scale != 1.0f) {
    for (int slot = 0; slot < k; ++slot) w[slot] *= s.weights_scale;
  }
}

}  // namespace

bool RouteSupported(const RouteShape& s) {
  if (s.k < 1 || s.k > kMaxK || s.k > s.n_expert || s.n_group < 1) return false;
  if (s.n_expert % s.n_group != 0) return false;
  if (s.n_group_used < 1 || s.n_group_used > s.n_group) return false;
  return s.n_group_used * (s.n_expert / s.n_group) >= s.k;
}

void Route(const RouteShape& s, const float* logits, const float* bias, int64_t n_tok,
           int32_t* ids, float* weights, Stream stream, int32_t* paired_ids) {
  if (n_tok <= 0) return;
  const size_t smem = (2 * static_cast<size_t>(s.n_expert) + 2 * s.n_group) * sizeof(float);
  RouteKernel<<<static_cast<unsigned>(n_tok), 32, smem, stream>>>(s, logits, bias, ids, weights,
                                                                  paired_ids);
}

}  // namespace sluice::cuda
