// The tensor-core grouped mat-mul for batches (docs/CUDA_KERNELS.md, "The
// tensor-core kernel"): the same RawGroupedMatMul as GroupedKernel, with the
// weights decoded from their ggml blocks into BF16 tiles in shared memory,
// the activations rounded to BF16 once per tile, and the products on the
// tensor cores (mma.sync m16n8k16, BF16 inputs, F32 accumulation).
//
// Like quant_matmul_kernel.h this is a header so that g++ runs it too
// (host_emulation.h: every thread of a block is a fiber, __syncthreads is a
// barrier and mma.sync is computed from the 32 lanes' registers as the PTX
// ISA lays them out), which is how its indexing is tested without a GPU.
//
// Why BF16 and not FP16: BF16 has F32's exponent range, so no activation
// (massive activations in the down projection's input reach 1e3..1e4 in
// large MoE models, and nothing here bounds them) can overflow to inf and no
// small weight flushes to zero; its 8-bit significand rounds each operand by
// at most 2^-8 relative, so a product's error is below 2^-7 |w x|, which is
// of the order of the Q8 rounding of activations that ggml (and the
// reference goldens) apply to the same products. FP16 would be 8x finer but fails outright past 65504.
//
// Tiles: a block is 4 warps and computes kMmaRows (128) output rows x
// kMmaEntries (32) entries; each k step covers kMmaChunks (2) weight chunks
// of 32 elements. The k order inside a chunk is the chunk reader's (the
// element columns T::Col(c, g) + i), not the row's: the activations are
// staged in the same order, and a dot product does not depend on the order
// of its terms. So every ggml layout reuses its reader from
// quant_blocks_device.h unchanged: one thread decodes one chunk of one row
// with T::Load/T::Decode into 32 BF16 values in shared memory.
//
// Warp w owns rows 32w..32w+31 of the block (two m16 tiles) and all four n8
// tiles of entries; n8 tiles past the group's last entry are skipped, so a
// group of 9 entries costs 2 of the 4 MMAs. The next k step's global loads
// are issued before the MMAs of the current one (held in registers), so
// memory latency overlaps the tensor-core work without cp.async.
//
// Shared memory rows are padded to kMmaStrideWords (36) 32-bit words, so the
// fragment loads (8 rows x 4 words per warp) hit 32 distinct banks.
#ifndef SLUICE_KERNELS_CUDA_QUANT_MATMUL_MMA_KERNEL_H_
#define SLUICE_KERNELS_CUDA_QUANT_MATMUL_MMA_KERNEL_H_

#include <cstdint>

#include "kernels/cuda/quant_blocks_device.h"
#include "kernels/cuda/quant_matmul_impl.h"
#include "kernels/cuda/quant_matmul_kernel.h"
#include "kernels/cuda/mma_fragments.h"

namespace sluice::cuda::internal {

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = 32 * kMmaWarps;
constexpr int kMmaRows = 32 * kMmaWarps;   // output rows per block
constexpr int kMmaEntries = 32;            // entries per block (four n8 tiles)
constexpr int kMmaChunks = 2;              // weight chunks (32 elements) per k step
constexpr int kMmaK = 32 * kMmaChunks;     // k per step: 4 MMAs of k16
constexpr int kMmaStrideWords = kMmaK / 2 + 4;  // a staged row: 32 words + 4 of padding

// Two floats as round-to-nearest-even BF16, `lo` in the low half (the lower
// k index, as the MMA fragments expect).
__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
#if defined(__CUDACC__)
  uint32_t d;
  // cvt.rn.bf16x2.f32 d, a, b puts a in the upper half and b in the lower.
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return emulation::Bf16Bits(lo) | (emulation::Bf16Bits(hi) << 16);
#endif
}

// The A fragment of the 16 staged rows from `rows` (row-major, row stride
// kMmaStrideWords words of two BF16) at k16 step `ks` of the tile.
__device__ __forceinline__ void LoadAFragment(const uint32_t* rows, int ks, int lane,
                                              uint32_t (&a)[4]) {
  const uint32_t* p = rows + (lane >> 2) * kMmaStrideWords + ks * 8 + (lane & 3);
  a[0] = p[0];
  a[1] = p[8 * kMmaStrideWords];
  a[2] = p[4];
  a[3] = p[8 * kMmaStrideWords + 4];
}

// The B fragment of 8 staged entries (entry-major: an entry's k values are
// contiguous, i.e. B column-major) at k16 step `ks`.
__device__ __forceinline__ void LoadBFragment(const uint32_t* entries, int ks, int lane,
                                              uint32_t (&b)[2]) {
  const uint32_t* p = entries + (lane >> 2) * kMmaStrideWords + ks * 8 + (lane & 3);
  b[0] = p[0];
  b[1] = p[4];
}

// Global loads of one k step, held in registers until the shared tile is
// free: two (row, chunk) pairs of weights and four float4 of activations per
// thread.
template <class T>
struct MmaStage {
  static constexpr int kWeightSlots = kMmaRows * kMmaChunks / kMmaThreads;       // 2
  static constexpr int kXSlots = kMmaEntries * (kMmaK / 4) / kMmaThreads;       // 4
  typename T::Raw w[kWeightSlots];
  bool w_ok[kWeightSlots];
  float4 x[kXSlots];
};

// Thread tid stages weight rows tid/2 + 64 s (s < 2) at chunk tid % 2 of the
// step, and activation slots tid + 128 s (s < 4): entry slot / 16, float4
// slot % 16 (chunk q / 8, group q % 8 of the chunk reader).
__device__ __forceinline__ int StageWeightRow(int tid, int s) {
  return tid / kMmaChunks + s * (kMmaThreads / kMmaChunks);
}
__device__ __forceinline__ int StageXEntry(int tid, int s) { return (tid + s * kMmaThreads) / 16; }
__device__ __forceinline__ int StageXQuad(int tid, int s) { return (tid + s * kMmaThreads) % 16; }

template <class T>
__device__ __forceinline__ void LoadStage(const RawGroupedMatMul& a, const uint8_t* w,
                                          int64_t row0, int64_t chunk0, int64_t n_chunks,
                                          const float* const* xp, int tid, MmaStage<T>& st) {
  const int64_t wc = chunk0 + tid % kMmaChunks;
#pragma unroll
  for (int s = 0; s < MmaStage<T>::kWeightSlots; ++s) {
    const int64_t row = row0 + StageWeightRow(tid, s);
    st.w_ok[s] = row < a.rows && wc < n_chunks;
    if (st.w_ok[s]) T::Load(w + row * a.row_bytes, wc, st.w[s]);
  }
#pragma unroll
  for (int s = 0; s < MmaStage<T>::kXSlots; ++s) {
    const int q = StageXQuad(tid, s);
    const int64_t c = chunk0 + q / 8;
    if (xp[s] != nullptr && c < n_chunks) {
      st.x[s] = LoadX4(xp[s] + T::Col(c, q % 8));
    } else {
      st.x[s] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // past the row or the group
    }
  }
}

// Decodes and rounds the held loads into the shared tiles.
template <class T>
__device__ __forceinline__ void StoreStage(const MmaStage<T>& st, int tid, uint32_t* sw,
                                           uint32_t* sx) {
  const int j = tid % kMmaChunks;
#pragma unroll
  for (int s = 0; s < MmaStage<T>::kWeightSlots; ++s) {
    uint32_t* dst = sw + StageWeightRow(tid, s) * kMmaStrideWords + 16 * j;
#pragma unroll
    for (int h = 0; h < 4; ++h) {  // groups 2h and 2h+1: 8 elements, 4 words
      if (st.w_ok[s]) {
        const float4 u = T::Decode(st.w[s], 2 * h), v = T::Decode(st.w[s], 2 * h + 1);
        StoreWords4(dst + 4 * h, PackBf16x2(u.x, u.y), PackBf16x2(u.z, u.w),
                    PackBf16x2(v.x, v.y), PackBf16x2(v.z, v.w));
      } else {
        StoreWords4(dst + 4 * h, 0, 0, 0, 0);  // zeros: finite, and add nothing
      }
    }
  }
#pragma unroll
  for (int s = 0; s < MmaStage<T>::kXSlots; ++s) {
    const float4 v = st.x[s];
    StoreWords2(sx + StageXEntry(tid, s) * kMmaStrideWords + 2 * StageXQuad(tid, s),
                PackBf16x2(v.x, v.y), PackBf16x2(v.z, v.w));
  }
}

// The staged BF16 tiles of one k step (pairs of BF16 per word). 16-byte
// alignment for the 16- and 8-byte stores of StoreStage; both sizes are
// multiples of 16 bytes, so x stays aligned too.
struct alignas(16) MmaTiles {
  uint32_t w[kMmaRows * kMmaStrideWords];     // row-major weights
  uint32_t x[kMmaEntries * kMmaStrideWords];  // entry-major activations
};
static_assert(sizeof(uint32_t) * kMmaRows * kMmaStrideWords % 16 == 0);

// Grid: x = entry tiles of kMmaEntries, y = row blocks of kMmaRows, z =
// groups (GroupedKernel's order). Requires T::kChunk == 32 and a row of whole
// chunks (MmaKernelSupports).
template <class T>
__global__ void __launch_bounds__(kMmaThreads) GroupedMmaKernel(const RawGroupedMatMul a) {
  static_assert(T::kChunk == 32, "tiles are made of 32-element chunks");
  __shared__ MmaTiles tiles;
  uint32_t* const sw = tiles.w;
  uint32_t* const sx = tiles.x;

  const int g = blockIdx.z;
  int64_t begin, end;
  GroupEntries(a, g, begin, end);
  const int64_t e0 = begin + static_cast<int64_t>(blockIdx.x) * kMmaEntries;
  if (e0 >= end) return;  // the whole block: no barrier is left waiting
  const int ne = static_cast<int>(end - e0 < kMmaEntries ? end - e0 : kMmaEntries);
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kMmaRows;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  const uint8_t* w = static_cast<const uint8_t*>(
      a.single_weight != nullptr ? a.single_weight
                                 : a.weights[a.group_weight != nullptr ? a.group_weight[g] : g]);
  const float* xp[MmaStage<T>::kXSlots];
#pragma unroll
  for (int s = 0; s < MmaStage<T>::kXSlots; ++s) {
    const int n = StageXEntry(tid, s);
    if (n < ne) {
      const int64_t entry = e0 + n;
      xp[s] = a.x + (a.x_row != nullptr ? a.x_row[entry] : entry) * a.x_stride;
    } else {
      xp[s] = nullptr;
    }
  }

  float acc[2][4][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
    }
  }
  // Warp-uniform: a warp whose rows all lie past the matrix still stages
  // (and meets every barrier) but multiplies nothing.
  const bool warp_rows = row0 + 32 * warp < a.rows;
  const int n_tiles = (ne + 7) / 8;

  const int64_t n_chunks = a.cols / 32;
  const int64_t steps = (n_chunks + kMmaChunks - 1) / kMmaChunks;
  MmaStage<T> st;
  LoadStage<T>(a, w, row0, 0, n_chunks, xp, tid, st);
  for (int64_t k = 0; k < steps; ++k) {
    StoreStage<T>(st, tid, sw, sx);
    __syncthreads();
    if (k + 1 < steps) LoadStage<T>(a, w, row0, (k + 1) * kMmaChunks, n_chunks, xp, tid, st);
    if (warp_rows) {
#pragma unroll
      for (int ks = 0; ks < kMmaK / 16; ++ks) {
        uint32_t af[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          LoadAFragment(sw + (32 * warp + 16 * mt) * kMmaStrideWords, ks, lane, af[mt]);
        }
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          if (nt < n_tiles) {
            uint32_t bf[2];
            LoadBFragment(sx + 8 * nt * kMmaStrideWords, ks, lane, bf);
            MmaBf16(acc[0][nt], af[0], bf);
            MmaBf16(acc[1][nt], af[1], bf);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with the tiles before they are restaged
  }

  if (!warp_rows) return;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = row0 + 32 * warp + 16 * mt + AccRow(lane, i);
        const int n = 8 * nt + AccCol(lane, i);
        if (row < a.rows && n < ne) a.y[(e0 + n) * a.y_stride + row] = acc[mt][nt][i];
      }
    }
  }
}

// Whether GroupedMmaKernel handles `type` with rows of `cols` elements: every
// kernel type but F32 (whose products stay in F32: the F32 parity gate), and
// a row of whole 32-element chunks (F16/BF16 rows may have a tail).
inline bool MmaSupportsShape(int type, int64_t cols) {
  switch (type) {
    case kF16:
    case kBF16:
    case kQ8_0:
    case kQ1_0:
    case kQ4_K:
    case kQ5_K:
    case kQ6_K: return cols > 0 && cols % 32 == 0;
    default: return false;
  }
}

inline GroupedGeometry ComputeMmaGeometry(const RawGroupedMatMul& a) {
  GroupedGeometry geo;
  geo.lanes_per_row = 0;  // not a lane-group kernel
  geo.rows_per_block = kMmaRows;
  geo.row_blocks = (a.rows + kMmaRows - 1) / kMmaRows;
  geo.entry_tiles = (a.max_entries_per_group + kMmaEntries - 1) / kMmaEntries;
  return geo;
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_QUANT_MATMUL_MMA_KERNEL_H_
