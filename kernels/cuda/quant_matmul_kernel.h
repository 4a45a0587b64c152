// The grouped mat-mul kernel and the bit-exact element dequantizer, as a
// header so that two compilers see the same code: nvcc through
// quant_matmul.cu, and g++ through quant_matmul_emulation_test.cc, which runs
// the kernel on the CPU (kernels/cuda/host_emulation.h stands in for the CUDA
// built-ins) so that its indexing is tested where no GPU is present.
//
// Layout: a thread block is 4 warps; within a warp, groups of L lanes (L =
// 32, 16 or 8, chosen so that short rows keep every lane busy) own kRows
// consecutive output rows and split each row's chunks between them. A lane
// loads a chunk of all kRows rows, decodes it once in registers and
// multiplies it with the NE activation rows of the block's entry tile, so
// each weight byte is read once per tile of NE entries and each activation
// load is reused kRows times. Partial sums meet in a warp-shuffle butterfly.
//
// Grid: x = entry tiles (NE entries each), y = row blocks, z = groups; x
// varies fastest so the tiles that re-read one block of weights run close
// together and find it in L2. Blocks whose tile lies past their group's end
// (empty or short groups) exit at once.
//
// 8-bit activations (kQ8, the quantized weight types with a Q8Dot): each
// block first rounds its tile's activation rows into shared memory as
// llama.cpp's CPU backend rounds them (decode_q8.h: Q8_K for the K-quants,
// Q8_0 for Q8_0 and Q1_0), then a chunk meets them in dp4a products instead
// of 32 decodes and FMAs. The decode program's products read the same
// format, so a sequence decoded in a batch sees the arithmetic it sees
// alone (up to summation order). Every row block of a tile rounds the same
// rows again: the rows are read from L2 once per block, where the float path
// reads them once per lane group. Where the caller rounded x's rows already
// (RoundRowsQ8Kernel into x_q8, once for every product that reads them), a
// block reads its entries' rounded rows in place instead: no shared memory,
// no barrier, and ~4x fewer activation bytes than the floats.
#ifndef SLUICE_KERNELS_CUDA_QUANT_MATMUL_KERNEL_H_
#define SLUICE_KERNELS_CUDA_QUANT_MATMUL_KERNEL_H_

#include <cstdint>

#include "kernels/cuda/decode_q8.h"
#include "kernels/cuda/norm_device.h"
#include "kernels/cuda/quant_blocks_device.h"
#include "kernels/cuda/quant_matmul_impl.h"

namespace sluice::cuda::internal {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 4;       // rows per lane group
constexpr int kEntryTile = 8;  // entries per block when groups exceed one

// GGUF ids of the types the kernels handle.
enum TypeId : int {
  kF32 = 0, kF16 = 1, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kBF16 = 30, kQ1_0 = 41,
};

__device__ __forceinline__ float4 LoadX4(const float* p) {
  if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) return __ldg(reinterpret_cast<const float4*>(p));
  return make_float4(__ldg(p), __ldg(p + 1), __ldg(p + 2), __ldg(p + 3));
}

__device__ __forceinline__ float Dot4(float4 w, float4 x, float acc) {
  acc = fmaf(w.x, x.x, acc);
  acc = fmaf(w.y, x.y, acc);
  acc = fmaf(w.z, x.z, acc);
  return fmaf(w.w, x.w, acc);
}

// Bytes of one activation row rounded to the 8-bit format T's products read.
template <class T>
__host__ __device__ inline int64_t Q8RowBytes(int64_t cols) {
  return kReadsQ8K<T> ? Q8KBytes(cols) : Q8ZBytes(cols);
}

// The launch's dynamic shared memory (16-byte aligned).
__device__ __forceinline__ uint8_t* DynamicShared() {
#if defined(__CUDACC__)
  extern __shared__ __align__(16) uint8_t dynamic_shared[];
  return dynamic_shared;
#else
  return emulation::DynamicShared();
#endif
}

// The ne activation rows of the tile at e0, rounded into q8 (row e at
// e * Q8RowBytes<T>(cols)) by every thread of the block, then a barrier.
template <class T>
__device__ __forceinline__ void RoundTileQ8(const RawGroupedMatMul& a, int64_t e0, int ne,
                                            uint8_t* q8) {
  auto at = [&](int r, int64_t c) {
    const int64_t entry = e0 + r;
    const int64_t xr = a.x_row != nullptr ? __ldg(a.x_row + entry) : entry;
    return __ldg(a.x + xr * a.x_stride + c);
  };
  QuantizeBlockQ8(at, ne, a.cols, kReadsQ8K<T> ? q8 : nullptr, kReadsQ8K<T> ? nullptr : q8);
  __syncthreads();
}

// x's rows [blockIdx.x * kRoundRows, + kRoundRows) (of n_rows) rounded to
// the 8-bit format T's products read, row r at out + r * Q8RowBytes<T>(cols):
// the bytes RoundTileQ8 gives them.
constexpr int kRoundRows = 2;
constexpr int kRoundMaxThreads = 1024;  // any multiple of 32 up to this
template <class T>
__global__ void __launch_bounds__(kRoundMaxThreads)
    RoundRowsQ8Kernel(const float* x, int64_t n_rows, int64_t cols, int64_t x_stride,
                      uint8_t* out) {
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRoundRows;
  const int rows = static_cast<int>(n_rows - r0 < kRoundRows ? n_rows - r0 : kRoundRows);
  auto at = [&](int r, int64_t c) { return __ldg(x + (r0 + r) * x_stride + c); };
  uint8_t* const base = out + r0 * Q8RowBytes<T>(cols);
  QuantizeBlockQ8(at, rows, cols, kReadsQ8K<T> ? base : nullptr, kReadsQ8K<T> ? nullptr : base);
}

// kR: rows per lane group (kRows, or 1 where the launch spreads its rows,
// GroupedGeometry::rows_per_lane). A row's sum is the same either way: the
// same lane index takes the same chunks in the same order.
// Rows [blockIdx.x * kRoundRows, + kRoundRows) of g (n_rows of cols)
// replaced by SiLU(g) * u (ops.h SwiGlu's bits: the same expression) and
// rounded into out as RoundRowsQ8Kernel rounds them (the same bytes): the
// SwiGLU and the rounding of its output in one launch.
template <class T>
__global__ void __launch_bounds__(kRoundMaxThreads)
    SwiGluRoundQ8Kernel(float* g, const float* u, int64_t n_rows, int64_t cols, uint8_t* out) {
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRoundRows;
  const int rows = static_cast<int>(n_rows - r0 < kRoundRows ? n_rows - r0 : kRoundRows);
  // QuantizeBlockQ8 asks for each element once.
  auto at = [&](int r, int64_t c) {
    const int64_t i = (r0 + r) * cols + c;
    const float v = SiluF(g[i]) * u[i];
    g[i] = v;
    return v;
  };
  uint8_t* const base = out + r0 * Q8RowBytes<T>(cols);
  QuantizeBlockQ8(at, rows, cols, kReadsQ8K<T> ? base : nullptr, kReadsQ8K<T> ? nullptr : base);
}

// Row blockIdx.x of x (add's row added in place first unless null)
// RMS-normed into xn by AddRmsNormRow (ops.h AddRmsNorm's bits: the same
// threads a block, the same sum order) and the normed row rounded into out
// to the 8-bit format T's products read (RoundRowsQ8Kernel's bytes): the
// norm and the rounding of its output in one launch.
constexpr int kNormThreads = 256;  // ops.cu's kThreads: the norm's sum order
template <class T, int kPer>
__global__ void __launch_bounds__(kNormThreads)
    NormRoundQ8Kernel(float* x, const float* add, int64_t n, const float* w, float eps,
                      float* xn, uint8_t* out) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  float* const yr = xn + r * n;
  AddRmsNormRow<kPer>(x + r * n, add != nullptr ? add + r * n : nullptr, n, w, eps, yr, scratch);
  __syncthreads();  // the row just written, read back (plain loads, not __ldg)
  auto at = [&](int, int64_t c) { return yr[c]; };
  uint8_t* const base = out + r * Q8RowBytes<T>(n);
  QuantizeBlockQ8(at, 1, n, kReadsQ8K<T> ? base : nullptr, kReadsQ8K<T> ? nullptr : base);
}

template <class T, int NE, bool kQ8 = false, int kR = kRows>
__global__ void __launch_bounds__(kThreads)
    GroupedKernel(const RawGroupedMatMul a, int lanes_per_row) {
  static_assert(!kQ8 || kHasQ8Dot<T>, "8-bit activations need a Q8Dot for the weights");
  const int g = blockIdx.z;
  int64_t begin, end;
  GroupEntries(a, g, begin, end);
  const int64_t e0 = begin + static_cast<int64_t>(blockIdx.x) * NE;
  if (e0 >= end) return;
  const int ne = static_cast<int>(end - e0 < NE ? end - e0 : NE);
  const bool rounded = kQ8 && a.x_q8 != nullptr;  // x's rows rounded by the caller
  uint8_t* const q8 = kQ8 && !rounded ? DynamicShared() : nullptr;
  if constexpr (kQ8) {
    if (!rounded) RoundTileQ8<T>(a, e0, ne, q8);  // before any warp leaves
  }

  const int L = lanes_per_row;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t warp_row0 =
      (static_cast<int64_t>(blockIdx.y) * kWarps + warp) * (32 / L) * kR;
  if (warp_row0 >= a.rows) return;  // whole warp: no shuffle partner is lost
  const int sub = lane & (L - 1);
  const int64_t row0 = warp_row0 + (lane / L) * kR;

  const uint8_t* w = static_cast<const uint8_t*>(
      a.single_weight != nullptr ? a.single_weight
                                 : a.weights[a.group_weight != nullptr ? a.group_weight[g] : g]);
  const uint8_t* rp[kR];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    // Rows past the end re-read the last row (never stored) so no lane
    // leaves the shuffles below.
    const int64_t row = row0 + r < a.rows ? row0 + r : a.rows - 1;
    rp[r] = w + row * a.row_bytes;
  }
  const float* xp[NE];
  const uint8_t* qp[NE];  // kQ8: each entry's rounded row
#pragma unroll
  for (int e = 0; e < NE; ++e) {
    const int in_tile = e < ne ? e : ne - 1;
    const int64_t entry = e0 + in_tile;
    const int64_t xr = a.x_row != nullptr ? a.x_row[entry] : entry;
    xp[e] = a.x + xr * a.x_stride;
    if constexpr (kQ8) {
      const int64_t q8_bytes = Q8RowBytes<T>(a.cols);
      qp[e] = rounded ? a.x_q8 + xr * q8_bytes : q8 + in_tile * q8_bytes;
    }
  }

  float acc[kR][NE];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
#pragma unroll
    for (int e = 0; e < NE; ++e) acc[r][e] = 0.0f;
  }

  // Decode tiles load two chunks per lane before using either, so that a
  // short row (a few chunks per lane) waits for memory once, not per chunk.
  // One row per lane group: four chunks, as many loads in flight as two of
  // four rows.
  constexpr int kUnroll = NE == 1 ? (kR == 1 ? 4 : 2) : 1;
  const int64_t n_chunks = a.cols / T::kChunk;
  for (int64_t c0 = sub; c0 < n_chunks; c0 += kUnroll * L) {
    typename T::Raw raw[kUnroll][kR];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (c0 + u * L < n_chunks) {
#pragma unroll
        for (int r = 0; r < kR; ++r) T::Load(rp[r], c0 + u * L, raw[u][r]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * L;
      if (c >= n_chunks) break;
      if constexpr (kQ8) {
#pragma unroll
        for (int e = 0; e < NE; ++e) {
          if (e < ne) {
            const uint8_t* row = qp[e];
            typename Q8Dot<T>::X xv;
            Q8Dot<T>::Load(kReadsQ8K<T> ? Q8KAt(row, a.cols) : Q8ZAt(row, a.cols), c, xv);
#pragma unroll
            for (int r = 0; r < kR; ++r) acc[r][e] += Q8Dot<T>::Dot(raw[u][r], xv);
          }
        }
      } else {
#pragma unroll
        for (int gi = 0; gi < T::kChunk / 4; ++gi) {
          const int64_t col = T::Col(c, gi);
          float4 wv[kR];
#pragma unroll
          for (int r = 0; r < kR; ++r) wv[r] = T::Decode(raw[u][r], gi);
#pragma unroll
          for (int e = 0; e < NE; ++e) {
            if (e < ne) {
              const float4 xv = LoadX4(xp[e] + col);
#pragma unroll
              for (int r = 0; r < kR; ++r) acc[r][e] = Dot4(wv[r], xv, acc[r][e]);
            }
          }
        }
      }
    }
  }
  if constexpr (T::kPlain && !kQ8) {
    // Plain rows need not be whole chunks: the last cols % kChunk columns.
    for (int64_t c = n_chunks * T::kChunk + sub; c < a.cols; c += L) {
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const float wr = T::Elem(rp[r], c);
#pragma unroll
        for (int e = 0; e < NE; ++e) {
          if (e < ne) acc[r][e] = fmaf(wr, __ldg(xp[e] + c), acc[r][e]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kR; ++r) {
#pragma unroll
    for (int e = 0; e < NE; ++e) {
      float v = acc[r][e];
      for (int off = L >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
      // Every lane of the group now holds the sum; spread the stores.
      if ((r * NE + e) % L == sub && row0 + r < a.rows && e < ne) {
        a.y[(e0 + e) * a.y_stride + row0 + r] = v;
      }
    }
  }
}

template <class T>
struct WeightsTag {
  using type = T;
};

// fn(WeightsTag<W>{}) for the weights class W of type id `type` (the one
// switch over the types the kernels handle); `none` for any other type.
template <class R, class Fn>
R VisitWeights(int type, R none, Fn&& fn) {
  switch (type) {
    case kF32: return fn(WeightsTag<F32Weights>{});
    case kF16: return fn(WeightsTag<HalfWeights<false>>{});
    case kBF16: return fn(WeightsTag<HalfWeights<true>>{});
    case kQ8_0: return fn(WeightsTag<Q8_0Weights>{});
    case kQ1_0: return fn(WeightsTag<Q1_0Weights>{});
    case kQ4_K: return fn(WeightsTag<KWeights<false>>{});
    case kQ5_K: return fn(WeightsTag<KWeights<true>>{});
    case kQ6_K: return fn(WeightsTag<Q6KWeights>{});
    default: return none;
  }
}

inline int ChunkElems(int type) {
  return VisitWeights(type, 0, [](auto t) { return decltype(t)::type::kChunk; });
}

// Below this many blocks a launch of one tile of entries spreads its rows
// (spread_rows): about two waves of the H100's and H200's 132 SMs. A
// decode batch's F32 router (256 rows of 2,048, 8 entries) had 16 blocks
// and took 32 us a layer on the H100 (2026-12-07). With spread_entries a
// launch of several tiles of entries spreads too, and one still short of
// this many blocks spread takes one entry a block: the router spread took
// 24.8 us a layer at 8 entries in 64 blocks (ncu, H100, 2026-12-07).
constexpr int64_t kFewBlocks = 256;

inline GroupedGeometry ComputeGeometry(const RawGroupedMatMul& a) {
  GroupedGeometry geo;
  const int chunk = ChunkElems(a.type);
  const int64_t n_chunks = chunk == 0 ? 0 : (a.cols + chunk - 1) / chunk;
  geo.lanes_per_row = n_chunks >= 32 ? 32 : (n_chunks >= 16 ? 16 : 8);
  geo.rows_per_lane = kRows;
  geo.rows_per_block = static_cast<int64_t>(kWarps) * (32 / geo.lanes_per_row) * kRows;
  geo.row_blocks = (a.rows + geo.rows_per_block - 1) / geo.rows_per_block;
  geo.entries_per_tile = a.max_entries_per_group == 1 ? 1 : kEntryTile;
  geo.entry_tiles = (a.max_entries_per_group + geo.entries_per_tile - 1) / geo.entries_per_tile;
  const bool tiles_ok = a.max_entries_per_group <= kEntryTile || a.spread_entries;
  if (a.spread_rows && tiles_ok && geo.lanes_per_row == 32 &&
      (a.spread_all || geo.row_blocks * a.n_groups * geo.entry_tiles < kFewBlocks)) {
    geo.rows_per_lane = 1;
    geo.rows_per_block = kWarps;
    geo.row_blocks = (a.rows + geo.rows_per_block - 1) / geo.rows_per_block;
    if (a.spread_entries && geo.entries_per_tile > 1 &&
        geo.row_blocks * a.n_groups * geo.entry_tiles < kFewBlocks) {
      geo.entries_per_tile = 1;
      geo.entry_tiles = a.max_entries_per_group;
    }
  }
  return geo;
}

// ---- bit-exact dequantization (kernels/cpu/dequant.cc, operation by
// operation; __fmul_rn/__fsub_rn are never contracted into an FMA) ---------

__device__ inline float ExactHalf(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (exp == 0) {
    return __uint_as_float(__float_as_uint(__fmul_rn(static_cast<float>(mant), 0x1p-24f)) | sign);
  }
  if (exp == 31) return __uint_as_float(sign | 0x7F800000u | (mant << 13));
  return __uint_as_float(sign | ((exp + 112) << 23) | (mant << 13));
}

__device__ inline float DequantElement(int type, const uint8_t* row, int64_t j) {
  switch (type) {
    case kF32:
      return __uint_as_float(LoadU16(row + 4 * j) | (LoadU16(row + 4 * j + 2) << 16));
    case kF16: return ExactHalf(LoadU16(row + 2 * j));
    case kBF16: return __uint_as_float(LoadU16(row + 2 * j) << 16);
    case kQ8_0: {
      const uint8_t* b = row + (j / 32) * 34;
      const int q = static_cast<int8_t>(b[2 + j % 32]);
      return __fmul_rn(static_cast<float>(q), ExactHalf(LoadU16(b)));
    }
    case kQ1_0: {
      const uint8_t* b = row + (j / 128) * 18;
      const float d = ExactHalf(LoadU16(b));
      const int e = static_cast<int>(j % 128);
      return ((b[2 + e / 8] >> (e % 8)) & 1) ? d : -d;
    }
    case kQ4_K:
    case kQ5_K: {
      const bool q5 = type == kQ5_K;
      const uint8_t* b = row + (j / 256) * (q5 ? 176 : 144);
      const int e = static_cast<int>(j % 256), p = e / 64, half = (e / 32) & 1, l = e % 32;
      const int sub = 2 * p + half;
      const uint8_t* s = b + 4;
      int sc, m;
      if (sub < 4) {
        sc = s[sub] & 63;
        m = s[sub + 4] & 63;
      } else {
        sc = (s[sub + 4] & 0x0F) | ((s[sub - 4] >> 6) << 4);
        m = (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4);
      }
      const uint8_t qb = b[(q5 ? 48 : 16) + 32 * p + l];
      int v = half ? (qb >> 4) : (qb & 0xF);
      if (q5) v += ((b[16 + l] >> sub) & 1) << 4;
      const float d1 = __fmul_rn(ExactHalf(LoadU16(b)), static_cast<float>(sc));
      const float m1 = __fmul_rn(ExactHalf(LoadU16(b + 2)), static_cast<float>(m));
      return __fsub_rn(__fmul_rn(d1, static_cast<float>(v)), m1);
    }
    case kQ6_K: {
      const uint8_t* b = row + (j / 256) * 210;
      const int e = static_cast<int>(j % 256), h = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t lo = b[64 * h + l + 32 * (k & 1)];
      const int low = k < 2 ? (lo & 0xF) : (lo >> 4);
      const int q = (low | (((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
      const int sc = static_cast<int8_t>(b[192 + 8 * h + l / 16 + 2 * k]);
      const float d = ExactHalf(LoadU16(b + 208));
      return __fmul_rn(__fmul_rn(d, static_cast<float>(sc)), static_cast<float>(q));
    }
    default: return 0.0f;
  }
}

// blockIdx.x: output row i; blockIdx.y * blockDim.x + threadIdx.x: column.

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_QUANT_MATMUL_KERNEL_H_
