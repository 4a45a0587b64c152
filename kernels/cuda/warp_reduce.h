// Device helpers the kernel files share (ops.cu, decode_ops.cu,
// topk_device.h): activations and warp / block reductions. nvcc only.
#ifndef SLUICE_KERNELS_CUDA_WARP_REDUCE_H_
#define SLUICE_KERNELS_CUDA_WARP_REDUCE_H_

namespace sluice::cuda::internal {

__device__ __forceinline__ float SiluF(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float SigmoidF(float x) { return 1.0f / (1.0f + expf(-x)); }

template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The largest of the lanes' (bv, bi) pairs in every lane, ties to the lower
// index.
__device__ __forceinline__ void WarpArgMaxOfLanes(float& bv, int& bi) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > bv || (ov == bv && oi < bi)) {
      bv = ov;
      bi = oi;
    }
  }
}

// The warp's arg-max of v[0, n): every lane gets the largest value and its
// index, ties to the lower index; `floor` is below every value that may be
// picked (index n and `floor` when none is above it).
__device__ __forceinline__ void WarpArgMax(const float* v, int n, float floor, float* best,
                                           int* index) {
  const int lane = threadIdx.x & 31;
  float bv = floor;
  int bi = n;
  for (int e = lane; e < n; e += 32) {
    if (v[e] > bv) {
      bv = v[e];
      bi = e;
    }
  }
  WarpArgMaxOfLanes(bv, bi);
  *best = bv;
  *index = bi;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result. `scratch` holds 32 values.
template <typename T>
__device__ T BlockSum(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n_warps = blockDim.x >> 5;
  v = WarpSum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = lane < n_warps ? scratch[lane] : T(0);
  return WarpSum(total);
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_WARP_REDUCE_H_
