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

// The sum over the L lanes of a group (every lane of the warp takes part).
__device__ __forceinline__ float GroupSum(float v, int L) {
  for (int off = L >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// GroupSumScattered's level kLevel (off = L >> (kLevel + 1)) and those
// after it: the lane holds max(N >> kLevel, 1) values, keeps the half that
// (lane & off) selects and adds lane ^ off's copy of that half; with one
// value left, the remaining levels add it as GroupSum does.
template <int N, int kLevel = 0>
__device__ __forceinline__ void GroupSumLevels(float (&v)[N], int off, int lane, int& base) {
  if constexpr (kLevel < 5) {
    if (off == 0) return;
    constexpr int n = (N >> kLevel) > 1 ? (N >> kLevel) : 1;
    if constexpr (n == 1) {
      for (; off > 0; off >>= 1) v[0] += __shfl_xor_sync(0xffffffffu, v[0], off);
    } else {
      constexpr int h = n / 2;
      const bool upper = (lane & off) != 0;
#pragma unroll
      for (int i = 0; i < h; ++i) {
        const float send = upper ? v[i] : v[i + h];
        const float keep = upper ? v[i + h] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
      }
      if (upper) base += h;
      GroupSumLevels<N, kLevel + 1>(v, off >> 1, lane, base);
    }
  }
}

// GroupSum of N values at once (N a power of two; L 2 .. 32): at level off
// = L / 2 .. 1 a lane keeps the half of its values that (lane & off)
// selects and adds lane ^ off's copy of that half, so each kept value is
// v_lane + v_{lane ^ off}, GroupSum's sum at that level, for about 2N
// shuffles and adds a lane instead of N log2(L). The lane ends with
// v[0, ScatteredHeld(N, L)) holding the group's sums of values base + i
// (returned); where N < L, L / N adjacent lanes hold the same ones.
template <int N>
__device__ __forceinline__ int GroupSumScattered(float (&v)[N], int L) {
  int base = 0;
  GroupSumLevels<N>(v, L >> 1, static_cast<int>(threadIdx.x & 31), base);
  return base;
}
__host__ __device__ constexpr int ScatteredHeld(int n, int lanes) {
  return n > lanes ? n / lanes : 1;
}
// The adjacent lanes that hold each of those sums (L / N where N < L).
__host__ __device__ constexpr int ScatteredCopies(int n, int lanes) {
  return lanes > n ? lanes / n : 1;
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
