// The routing of one token by one warp (device code shared by ops.cu's
// TopK and decode_ops.cu's router epilogue): softmax over n_expert logits,
// the top k by probability (ties to the lower id), weights renormalised
// (sum clamped at 6.1e-5), as model/moe.cc RouteToken. The logits are read
// through L2 (__ldcg): in the fused router they were written by other blocks
// of the same launch. `p` is n_expert floats of the warp's shared memory.
// paired (optional) receives the ids, then the ids + n_expert.
#ifndef SLUICE_KERNELS_CUDA_TOPK_DEVICE_H_
#define SLUICE_KERNELS_CUDA_TOPK_DEVICE_H_

#include <cstdint>

#include "kernels/cuda/warp_reduce.h"

namespace sluice::cuda::internal {

__device__ inline void RouteOneToken(const float* logits, int n_expert, int k, int32_t* ids,
                                     float* weights, int32_t* paired, float* p) {
  const int lane = threadIdx.x & 31;
  float m = -INFINITY;
  for (int e = lane; e < n_expert; e += 32) m = fmaxf(m, __ldcg(logits + e));
  m = WarpMax(m);
  double sum = 0.0;
  for (int e = lane; e < n_expert; e += 32) {
    const float v = expf(__ldcg(logits + e) - m);
    p[e] = v;
    sum += v;
  }
  sum = WarpSum(sum);
  const float inv = static_cast<float>(1.0 / sum);
  for (int e = lane; e < n_expert; e += 32) p[e] *= inv;
  __syncwarp();
  float total = 0.0f;
  for (int slot = 0; slot < k; ++slot) {
    // Taken experts hold -1, below the floor.
    float bv;
    int bi;
    WarpArgMax(p, n_expert, -2.0f, &bv, &bi);
    if (lane == 0) {
      ids[slot] = bi;
      if (paired != nullptr) {
        paired[slot] = bi;
        paired[k + slot] = bi + n_expert;
      }
      weights[slot] = bv;
      total += bv;
      p[bi] = -1.0f;
    }
    __syncwarp();
  }
  if (lane == 0) {
    total = fmaxf(total, 6.103515625e-5f);
    for (int slot = 0; slot < k; ++slot) weights[slot] /= total;
  }
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_TOPK_DEVICE_H_
