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
    // Arg-max with ties to the lower id; taken experts hold -1.
    float bv = -2.0f;
    int bi = n_expert;
    for (int e = lane; e < n_expert; e += 32) {
      if (p[e] > bv) {
        bv = p[e];
        bi = e;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) {
        bv = ov;
        bi = oi;
      }
    }
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
