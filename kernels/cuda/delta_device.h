// Gated DeltaNet device steps shared by ops.cu (the batch scan) and
// decode_ops.cu (the decode prep and the fused decode step), so the kernels
// that must give the same bits run the same code. nvcc only.
#ifndef SLUICE_KERNELS_CUDA_DELTA_DEVICE_H_
#define SLUICE_KERNELS_CUDA_DELTA_DEVICE_H_

#include "kernels/cuda/ops.h"
#include "kernels/cuda/warp_reduce.h"

namespace sluice::cuda::internal {

// The causal conv of channel c (its window: the conv_state rows, oldest
// first, then qkv[c]; channels ch) and its SiLU. The window's newer taps - 1
// values, the channel's next conv state, go to keep.
__device__ __forceinline__ float DeltaConvSilu(const float* conv_state, const float* qkv,
                                               const float* kernel, int ch, int taps, int c,
                                               float* keep) {
  const int hist = taps - 1;
  float window[kDeltaNetMaxConvTaps];
  for (int t = 0; t < hist; ++t) window[t] = conv_state[t * ch + c];
  window[hist] = qkv[c];
  float out = 0.0f;
  for (int t = 0; t < taps; ++t) out += window[t] * kernel[c * taps + t];
  for (int t = 0; t < hist; ++t) keep[t] = window[t + 1];
  return SiluF(out);
}

// A v head's gates: beta = sigmoid(beta), g = softplus(alpha + dt_bias) a.
__device__ __forceinline__ void DeltaGates(float beta_in, float alpha_in, float dt_bias, float a,
                                           float* beta, float* g) {
  *beta = SigmoidF(beta_in);
  const float x = alpha_in + dt_bias;
  const float sp = x > 20.0f ? x : log1pf(expf(x));
  *g = sp * a;
}

// One token of the delta rule for one state row held as kCols registers by
// each of kParts threads (columns p, p + kParts, ...; ks and qs the head's
// k and q): decay, the row's dot with k, the update by (v - dot) b, and the
// row's dot with q, summed across the kParts threads (the return value).
template <int kParts, int kCols>
__device__ __forceinline__ float DeltaRowStep(float (&st)[kCols], const float* ks, const float* qs,
                                              int p, float decay, float b, float v) {
  float dot = 0.0f;
#pragma unroll
  for (int m = 0; m < kCols; ++m) {
    st[m] *= decay;
    dot += st[m] * ks[p + m * kParts];
  }
  for (int off = kParts / 2; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
  const float delta = (v - dot) * b;
  float out = 0.0f;
#pragma unroll
  for (int m = 0; m < kCols; ++m) {
    st[m] += delta * ks[p + m * kParts];
    out += st[m] * qs[p + m * kParts];
  }
  for (int off = kParts / 2; off > 0; off /= 2) out += __shfl_xor_sync(0xffffffffu, out, off);
  return out;
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_DELTA_DEVICE_H_
