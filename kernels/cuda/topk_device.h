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

// Slot `slot`'s expert and (not yet renormalised) weight; returns the weight.
__device__ __forceinline__ float StoreRouteSlot(int slot, int id, float w, int n_expert, int k,
                                                int32_t* ids, float* weights, int32_t* paired) {
  ids[slot] = id;
  if (paired != nullptr) {
    paired[slot] = id;
    paired[k + slot] = id + n_expert;
  }
  weights[slot] = w;
  return w;
}

// Experts a lane holds in registers on RouteOneToken's fast path (n_expert
// up to 32 times this: every current model's router).
constexpr int kRouteRegsPerLane = 16;

// The fast path: each lane keeps its experts' probabilities (e = lane + 32 j)
// and its own best in registers, so a round is one warp arg-max of the lanes'
// bests and a rescan by the one lane whose best was taken, instead of a scan
// of all n_expert in shared memory per round. The same sums in the same
// order, the same ties (the lower id), so the same ids and weights.
__device__ inline void RouteOneTokenInRegisters(const float* logits, int n_expert, int k,
                                                int32_t* ids, float* weights, int32_t* paired) {
  const int lane = threadIdx.x & 31;
  float v[kRouteRegsPerLane];
  float m = -INFINITY;
#pragma unroll
  for (int j = 0; j < kRouteRegsPerLane; ++j) {
    const int e = lane + 32 * j;
    v[j] = e < n_expert ? __ldcg(logits + e) : -INFINITY;
    m = fmaxf(m, v[j]);
  }
  m = WarpMax(m);
  double sum = 0.0;
#pragma unroll
  for (int j = 0; j < kRouteRegsPerLane; ++j) {
    if (lane + 32 * j < n_expert) {
      v[j] = expf(v[j] - m);
      sum += v[j];
    }
  }
  sum = WarpSum(sum);
  const float inv = static_cast<float>(1.0 / sum);
#pragma unroll
  for (int j = 0; j < kRouteRegsPerLane; ++j) v[j] = lane + 32 * j < n_expert ? v[j] * inv : -3.0f;
  // This lane's best (floor -2: taken experts hold -1, absent ones -3).
  float lane_v;
  int lane_i;
  auto rescan = [&]() {
    lane_v = -2.0f;
    lane_i = n_expert;
#pragma unroll
    for (int j = 0; j < kRouteRegsPerLane; ++j) {
      if (v[j] > lane_v) {
        lane_v = v[j];
        lane_i = lane + 32 * j;
      }
    }
  };
  rescan();
  float total = 0.0f;
  for (int slot = 0; slot < k; ++slot) {
    float bv = lane_v;
    int bi = lane_i;
    WarpArgMaxOfLanes(bv, bi);
    if (lane == 0) total += StoreRouteSlot(slot, bi, bv, n_expert, k, ids, weights, paired);
    if (bi == lane_i) {
#pragma unroll
      for (int j = 0; j < kRouteRegsPerLane; ++j) {
        if (lane + 32 * j == bi) v[j] = -1.0f;
      }
      rescan();
    }
  }
  if (lane == 0) {
    total = fmaxf(total, 6.103515625e-5f);
    for (int slot = 0; slot < k; ++slot) weights[slot] /= total;
  }
}

__device__ inline void RouteOneToken(const float* logits, int n_expert, int k, int32_t* ids,
                                     float* weights, int32_t* paired, float* p) {
  if (n_expert <= 32 * kRouteRegsPerLane) {
    RouteOneTokenInRegisters(logits, n_expert, k, ids, weights, paired);
    return;
  }
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
      total += StoreRouteSlot(slot, bi, bv, n_expert, k, ids, weights, paired);
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
