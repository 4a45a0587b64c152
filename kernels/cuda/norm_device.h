// The residual add and RMS norm of one row (ops.h AddRmsNorm), as device
// code that ops.cu's kernel and the grouped products' fused norm-and-round
// kernel (quant_matmul_kernel.h) share, and that g++ runs through
// host_emulation.h (include that first there).
#ifndef SLUICE_KERNELS_CUDA_NORM_DEVICE_H_
#define SLUICE_KERNELS_CUDA_NORM_DEVICE_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/warp_reduce.h"

namespace sluice::cuda::internal {

// Row xr (n floats; add's row ar added in place first unless null), its
// RMS norm times w into yr, by the whole block; scratch: 32 doubles of
// shared memory.
//
// kPer > 0: n <= kPer * blockDim.x, and a thread holds its kPer elements in
// registers between the sum and the scaling. Its loads are then issued
// together: x may be xn (a norm in place) and add may be neither, so the
// compiler could not move a load of the loop below past the store before it
// and a 7,168-wide row took 28 round trips to memory per pass. The same
// elements are summed in the same order either way (element threadIdx.x +
// k * blockDim.x, k ascending, then BlockSum): the same bits.
template <int kPer>
__device__ __forceinline__ void AddRmsNormRow(float* xr, const float* ar, int64_t n,
                                              const float* w, float eps, float* yr,
                                              double* scratch) {
  double sum = 0.0;
  if constexpr (kPer > 0) {
    float v[kPer], wk[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      v[k] = i < n ? xr[i] : 0.0f;
      wk[k] = i < n ? w[i] : 0.0f;
    }
    if (ar) {
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < n) v[k] += ar[i];
      }
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < n) xr[i] = v[k];
      }
    }
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i < n) sum += static_cast<double>(v[k]) * v[k];
    }
    sum = BlockSum(sum, scratch);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / sqrtf(mean + eps);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i < n) yr[i] = (v[k] * scale) * wk[k];
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float v = xr[i];
      if (ar) {
        v += ar[i];
        xr[i] = v;
      }
      sum += static_cast<double>(v) * v;
    }
    sum = BlockSum(sum, scratch);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      yr[i] = (xr[i] * scale) * w[i];
    }
  }
}

// AddRmsNormRow's kPer for rows of n with `threads` a block (0: the loop).
inline int NormElemsPerThread(int64_t n, int threads) {
  if (n <= 4 * threads) return 4;
  if (n <= 8 * threads) return 8;
  if (n <= 32 * threads) return 32;
  return 0;
}

// fn(std::integral_constant<int, kPer>{}) with NormElemsPerThread(n,
// threads) as kPer: the one dispatch of the norm kernels' instances.
template <class Fn>
void WithNormElems(int64_t n, int threads, Fn&& fn) {
  switch (NormElemsPerThread(n, threads)) {
    case 4: fn(std::integral_constant<int, 4>{}); break;
    case 8: fn(std::integral_constant<int, 8>{}); break;
    case 32: fn(std::integral_constant<int, 32>{}); break;
    default: fn(std::integral_constant<int, 0>{});
  }
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_NORM_DEVICE_H_
