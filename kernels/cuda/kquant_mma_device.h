// Q4_K / Q5_K / Q6_K products against rows rounded to Q8_K on the integer
// tensor cores, summing in integers across each 256-element super-block as
// the CPU backend's vec_dot for these types does (issue 19;
// docs/CUDA_KERNELS.md, "Integer sums across a super-block"). Sub-block j
// (32 elements, 6-bit scale sc_j and min m_j) of a Q4_K / Q5_K block (d,
// dmin) meets the rounded row (q_x, scale dx per 256) as
//   I_j = sum q_w q_x          (one mma.m16n8k32 s8 for 16 rows x 8 entries)
//   M_j = m_j * sum q_x        (one more, A holding m_j in every byte)
//   block = (d dx) * float(sum_j sc_j I_j) - (dmin dx) * float(sum_j M_j)
// and sub-block j of a Q6_K block (16 elements q_w - 32, signed 8-bit scale
// sc_j) as I_j on mma.m16n8k16 and block = (d dx) * float(sum_j sc_j I_j),
// with the integer sums exact, so a row's sum is the float sum of its
// blocks in order. These bits differ from Q8Dot's (decode_q8.h), which
// rounds every chunk to float: a sequence decoded in such a batch is held
// to the parity gates, not to its own bits alone.
//
// Device code that g++ also compiles through host_emulation.h (include that
// first there), which computes mma.sync from the 32 lanes' registers.
#ifndef SLUICE_KERNELS_CUDA_KQUANT_MMA_DEVICE_H_
#define SLUICE_KERNELS_CUDA_KQUANT_MMA_DEVICE_H_

#include <cstdint>

#include "kernels/cuda/decode_q8.h"
#include "kernels/cuda/mma_fragments.h"
#include "kernels/cuda/quant_blocks_device.h"
#include "kernels/cuda/quant_matmul_impl.h"

namespace sluice::cuda::internal {

// The weight types the kernel takes (ggml type ids).
inline constexpr int kKQuantMmaQ4K = 12, kKQuantMmaQ5K = 13, kKQuantMmaQ6K = 14,
                     kKQuantMmaQ1_0 = 41;

// The columns of a weight block the kernel steps over: a super-block of
// 256, or Q1_0's block of 128 (its rows rounded to Q8_0-like groups of 32,
// decode_q8.h's Q8Z, the others' to Q8_K).
SLUICE_GROUPED_HD inline int64_t KQuantMmaUnitCols(int type) {
  return type == kKQuantMmaQ1_0 ? 128 : 256;
}

// One lane's view of NT m16 x n8 tiles side by side (entries 8 n ..
// 8 n + 8 of tile n): rows g and g + 8 of the tile (their weight rows; a
// missing row may repeat another, its sums unused), entry g of each n8
// tile's 8-bit row (null: no such entry, zeros) and the scales of its
// entries 2t and 2t + 1 (null: zero), with g = lane / 4, t = lane % 4.
template <int NT>
struct KQuantMmaLane {
  const uint8_t* w[2];
  const int8_t* xq[NT];
  const float* xd[NT][2];
};

// 4 little-endian bytes at p: one load where p is 4-byte aligned (rows in
// cudaMalloc'd or GGUF-aligned memory), else two aligned ones shifted into
// place (a file whose tensors are only 2-byte aligned). Not the readers'
// LoadWords<1> / <4>: with them ptxas gave the two-tile kernels 13-25 more
// registers (sm_90a, 2026-12-07).
__device__ __forceinline__ uint32_t Word(const uint8_t* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if ((a & 3) == 0) return *reinterpret_cast<const uint32_t*>(p);
  const uint32_t* q = reinterpret_cast<const uint32_t*>(a & ~static_cast<uintptr_t>(3));
  return __funnelshift_r(q[0], q[1], static_cast<uint32_t>(8 * (a & 3)));
}

// acc[n][i] (n8 tile n's D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1], as
// MmaS8 lays them out) += the blocks b0, b0 + step, ... < b1 of the lane's
// rows against tile n's entries, in that order. Every lane of the warp
// calls it with the same blocks. Each (row, entry) sum is the same at any
// NT: the tiles share only the weights' words and scales.
template <bool kQ5, int NT>
__device__ __forceinline__ void KQuantMmaSums(const KQuantMmaLane<NT>& l, int b0, int b1,
                                              int step, float (&acc)[NT][4]) {
  using W = KWeights<kQ5>;
  const int lane = threadIdx.x & 31, t = lane & 3;
#pragma unroll 1
  for (int b = b0; b < b1; b += step) {
    // Each row's block: d, dmin and the 6-bit scales and mins of its 8
    // sub-blocks, as four words of bytes (sub-blocks 0..3, then 4..7).
    float d[2], dmin[2];
    uint32_t sc[2][2], mn[2][2], qh[2][2] = {{0, 0}, {0, 0}};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint8_t* blk = l.w[r] + static_cast<int64_t>(b) * W::kBlockBytes;
      const uint32_t h0 = Word(blk), s0 = Word(blk + 4), s1 = Word(blk + 8), s2 = Word(blk + 12);
      d[r] = HalfBits(h0);
      dmin[r] = HalfBits(h0 >> 16);
      sc[r][0] = s0 & 0x3F3F3F3Fu;
      mn[r][0] = s1 & 0x3F3F3F3Fu;
      sc[r][1] = (s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u);
      mn[r][1] = ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u);
      if constexpr (kQ5) {
        qh[r][0] = Word(blk + 16 + 4 * t);
        qh[r][1] = Word(blk + 32 + 4 * t);
      }
    }
    int32_t si[NT][4], mi[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) si[n][i] = mi[n][i] = 0;
    }
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      // Words t and t + 4 of the 32 bytes of sub-blocks 2p (low nibbles)
      // and 2p + 1 (high nibbles), for both rows.
      uint32_t q[2][2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint8_t* qs =
            l.w[r] + static_cast<int64_t>(b) * W::kBlockBytes + W::kQsOffset + 32 * p;
        q[r][0] = Word(qs + 4 * t);
        q[r][1] = Word(qs + 16 + 4 * t);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * p + h;
        uint32_t a[4];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            uint32_t v = (q[r][k] >> (4 * h)) & 0x0F0F0F0Fu;
            if constexpr (kQ5) v |= ((qh[r][k] >> j) & 0x01010101u) << 4;
            a[2 * k + r] = v;  // a[0], a[2]: row g; a[1], a[3]: row g + 8
          }
        }
        // The rows' scale of sub-block j (zero-extended byte j % 4 of its
        // word) and their min in every byte.
        const uint32_t sel = static_cast<uint32_t>(j & 3);
        const int32_t s_g = static_cast<int32_t>(__byte_perm(sc[0][j >> 2], 0, 0x4440u | sel));
        const int32_t s_g8 = static_cast<int32_t>(__byte_perm(sc[1][j >> 2], 0, 0x4440u | sel));
        const uint32_t m_g = __byte_perm(mn[0][j >> 2], 0, sel * 0x1111u);
        const uint32_t m_g8 = __byte_perm(mn[1][j >> 2], 0, sel * 0x1111u);
        const uint32_t am[4] = {m_g, m_g8, m_g, m_g8};
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          uint32_t bx[2] = {0, 0};
          if (l.xq[n] != nullptr) {
            const int8_t* xb = l.xq[n] + static_cast<int64_t>(b) * 256 + 32 * j + 4 * t;
            bx[0] = Word(reinterpret_cast<const uint8_t*>(xb));
            bx[1] = Word(reinterpret_cast<const uint8_t*>(xb + 16));
          }
          int32_t dot[4] = {0, 0, 0, 0};
          MmaS8(dot, a, bx);
          si[n][0] += s_g * dot[0];
          si[n][1] += s_g * dot[1];
          si[n][2] += s_g8 * dot[2];
          si[n][3] += s_g8 * dot[3];
          MmaS8(mi[n], am, bx);
        }
      }
    }
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const float dx[2] = {l.xd[n][0] != nullptr ? l.xd[n][0][b] : 0.0f,
                           l.xd[n][1] != nullptr ? l.xd[n][1][b] : 0.0f};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i >> 1, e = i & 1;
        acc[n][i] += (d[r] * dx[e]) * static_cast<float>(si[n][i]) -
                     (dmin[r] * dx[e]) * static_cast<float>(mi[n][i]);
      }
    }
  }
}

// Q6_K's 6-bit values q (four to a word) as the signed bytes q - 32: q ^ 32
// is right where q >= 32; below, bits 6 and 7 must be set too, and there
// bit 5 of q ^ 32 is set (times 6 puts it in both, no carry between bytes).
__device__ __forceinline__ uint32_t CenteredQ6(uint32_t q) {
  const uint32_t r = q ^ 0x20202020u;
  return r | ((r & 0x20202020u) * 6u);
}

// As KQuantMmaSums, for Q6_K weights (210-byte blocks: ql[128], qh[64],
// scales[16], d). Element 128 n + 32 s + l of a block (s < 4, l < 32) is
// nibble s / 2 of ql[64 n + 32 (s % 2) + l] with bits 2 s.. of qh[32 n + l]
// above it, minus 32; sub-block 8 n + 2 s + l / 16 scales it. Lane t's
// k-run 4t..4t+3 of a sub-block is 4 consecutive l, so one word of ql and
// one of qh.
template <int NT>
__device__ __forceinline__ void Q6KMmaSums(const KQuantMmaLane<NT>& l, int b0, int b1,
                                           int step, float (&acc)[NT][4]) {
  constexpr int kBlockBytes = 210;
  const int lane = threadIdx.x & 31, t = lane & 3;
#pragma unroll 1
  for (int b = b0; b < b1; b += step) {
    const uint8_t* blk[2] = {l.w[0] + static_cast<int64_t>(b) * kBlockBytes,
                             l.w[1] + static_cast<int64_t>(b) * kBlockBytes};
    float d[2];
    uint32_t sc[2][4];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      d[r] = HalfBits(Word(blk[r] + 206) >> 16);  // bytes 208..209, not past the block
#pragma unroll
      for (int i = 0; i < 4; ++i) sc[r][i] = Word(blk[r] + 192 + 4 * i);
    }
    int32_t si[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) si[n][i] = 0;
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t qh[2][2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) qh[r][hh] = Word(blk[r] + 128 + 32 * half + 16 * hh + 4 * t);
      }
#pragma unroll
      for (int s2 = 0; s2 < 2; ++s2) {
        uint32_t ql[2][2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            ql[r][hh] = Word(blk[r] + 64 * half + 32 * s2 + 16 * hh + 4 * t);
          }
        }
#pragma unroll
        for (int nib = 0; nib < 2; ++nib) {
          const int s = s2 + 2 * nib;
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int j = 8 * half + 2 * s + hh;
            uint32_t a[2];
            int32_t scale[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              a[r] = CenteredQ6(((ql[r][hh] >> (4 * nib)) & 0x0F0F0F0Fu) |
                                (((qh[r][hh] >> (2 * s)) & 0x03030303u) << 4));
              scale[r] = static_cast<int32_t>(sc[r][j >> 2] << (24 - 8 * (j & 3))) >> 24;
            }
#pragma unroll
            for (int n = 0; n < NT; ++n) {
              const int8_t* xb = l.xq[n] + static_cast<int64_t>(b) * 256 + 16 * j + 4 * t;
              const uint32_t bx =
                  l.xq[n] != nullptr ? Word(reinterpret_cast<const uint8_t*>(xb)) : 0u;
              int32_t dot[4] = {0, 0, 0, 0};
              MmaS8K16(dot, a[0], a[1], bx);
              si[n][0] += scale[0] * dot[0];
              si[n][1] += scale[0] * dot[1];
              si[n][2] += scale[1] * dot[2];
              si[n][3] += scale[1] * dot[3];
            }
          }
        }
      }
    }
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const float dx[2] = {l.xd[n][0] != nullptr ? l.xd[n][0][b] : 0.0f,
                           l.xd[n][1] != nullptr ? l.xd[n][1][b] : 0.0f};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[n][i] += (d[i >> 1] * dx[i & 1]) * static_cast<float>(si[n][i]);
      }
    }
  }
}

// Q1_0's sign bits (the low 4 of v) as 4 signed bytes, +1 for a set bit
// and -1 for a clear one: the multiply moves bit i to bit 8 i (no two
// shifted copies overlap), and 0xFF ^ 0xFE is 1.
__device__ __forceinline__ uint32_t SignBytes(uint32_t v) {
  const uint32_t ones = ((v & 0xFu) * 0x00204081u) & 0x01010101u;
  return 0xFFFFFFFFu ^ (ones * 0xFEu);
}

// As KQuantMmaSums, for Q1_0 weights (18-byte blocks of 128: an f16 scale
// d, then 128 sign bits, bit j of word c giving element 32 c + j) against
// rows rounded to groups of 32 (Q8Z: q_x, then a float scale dx a group):
// per 32-element chunk c one mma.m16n8k32 gives I_c = sum s_w q_x, and
// acc += (d dx_c) float(I_c), chunk by chunk in order.
template <int NT>
__device__ __forceinline__ void Q1MmaSums(const KQuantMmaLane<NT>& l, int b0, int b1, int step,
                                          float (&acc)[NT][4]) {
  constexpr int kBlockBytes = 18;
  const int lane = threadIdx.x & 31, t = lane & 3;
#pragma unroll 1
  for (int b = b0; b < b1; b += step) {
    float d[2];
    uint32_t bits[2][4];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint8_t* blk = l.w[r] + static_cast<int64_t>(b) * kBlockBytes;
      d[r] = HalfBits(Word(blk));
#pragma unroll
      for (int c = 0; c < 4; ++c) bits[r][c] = Word(blk + 2 + 4 * c);
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      // a[0], a[2]: row g's k-runs 4t.. and 16 + 4t..; a[1], a[3]: row g + 8's.
      const uint32_t a[4] = {SignBytes(bits[0][c] >> (4 * t)), SignBytes(bits[1][c] >> (4 * t)),
                             SignBytes(bits[0][c] >> (16 + 4 * t)),
                             SignBytes(bits[1][c] >> (16 + 4 * t))};
      const int chunk = 4 * b + c;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        uint32_t bx[2] = {0, 0};
        if (l.xq[n] != nullptr) {
          const int8_t* xb = l.xq[n] + 32 * static_cast<int64_t>(chunk) + 4 * t;
          bx[0] = Word(reinterpret_cast<const uint8_t*>(xb));
          bx[1] = Word(reinterpret_cast<const uint8_t*>(xb + 16));
        }
        int32_t dot[4] = {0, 0, 0, 0};
        MmaS8(dot, a, bx);
        const float dx[2] = {l.xd[n][0] != nullptr ? l.xd[n][0][chunk] : 0.0f,
                             l.xd[n][1] != nullptr ? l.xd[n][1][chunk] : 0.0f};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[n][i] += (d[i >> 1] * dx[i & 1]) * static_cast<float>(dot[i]);
        }
      }
    }
  }
}

// The launch's shape: a block of kKQuantMmaWarps warps covers
// KQuantMmaBlockRows(type, cols) rows of group z against 8 NT of its
// entries (block y: entries [8 NT y, 8 NT y + 8 NT); NT = 2, a warp holding
// two n8 tiles that share each weight word and scale, where the launch's
// largest group has 16 entries or more, KQuantMmaTiles). Rows of fewer
// blocks (KQuantMmaUnitCols) than warps would leave warps idle, so the
// warps split a row's blocks KQuantMmaSplit(type, cols) ways (4, 2 or 1)
// and the block takes 4 / split tiles of 16 rows: warp w sums tile w /
// split, blocks w % split, + split, ...; the tile's first warp adds the
// others' sums in warp order. The split depends on the type and cols
// alone and each (row, entry) sum is the same at any NT, so a product has
// the same bits at any grid and batch.
inline constexpr int kKQuantMmaWarps = 4;
inline constexpr int kKQuantMmaRows = 16;
inline constexpr int kKQuantMmaEntries = 8;  // one n8 tile

SLUICE_GROUPED_HD inline int KQuantMmaSplit(int type, int64_t cols) {
  const int64_t blocks = cols / KQuantMmaUnitCols(type);
  return blocks >= 4 ? 4 : (blocks >= 2 ? 2 : 1);
}
SLUICE_GROUPED_HD inline int64_t KQuantMmaBlockRows(int type, int64_t cols) {
  return kKQuantMmaRows * (kKQuantMmaWarps / KQuantMmaSplit(type, cols));
}
SLUICE_GROUPED_HD inline int KQuantMmaTiles(int64_t max_entries_per_group) {
  return max_entries_per_group >= 2 * kKQuantMmaEntries ? 2 : 1;
}

// The grid's x: the row blocks, twice over for a pair (a.up_offset: block
// 2 i the first matrix's row block i, 2 i + 1 the second's).
SLUICE_GROUPED_HD inline int64_t KQuantMmaRowBlocks(const RawGroupedMatMul& a) {
  const int64_t rows = KQuantMmaBlockRows(a.type, a.cols);
  return (a.rows + rows - 1) / rows * (a.up_offset != 0 ? 2 : 1);
}

// One block of that launch over a (Q4_K, Q5_K, Q6_K or Q1_0 weights as
// kType, rows rounded at a.x_q8 as KQuantMmaUnitCols says; a.cols a
// multiple of that unit; a pair through a table of weights). `part` holds kKQuantMmaWarps * 32 * 4 * NT floats of
// shared memory.
template <int kType, int NT>
__device__ __forceinline__ void KQuantMmaBlock(const RawGroupedMatMul& a, float* part) {
  constexpr int kEntries = kKQuantMmaEntries * NT;
  const int gi = static_cast<int>(blockIdx.z);
  int64_t begin, end;
  GroupEntries(a, gi, begin, end);
  const int64_t e0 = begin + static_cast<int64_t>(blockIdx.y) * kEntries;
  if (e0 >= end) return;  // the whole block: before any barrier
  const int ne = static_cast<int>(end - e0 < kEntries ? end - e0 : kEntries);
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  const int split = KQuantMmaSplit(a.type, a.cols), kpart = warp % split;
  const bool second = a.up_offset != 0 && (blockIdx.x & 1) != 0;
  const int64_t row_block = a.up_offset != 0 ? blockIdx.x >> 1 : blockIdx.x;
  float* const y = second ? a.y_up : a.y;
  const int64_t r0 =
      row_block * KQuantMmaBlockRows(a.type, a.cols) + (warp / split) * kKQuantMmaRows;
  // A tile past the matrix's rows still takes part in the barrier.
  const int nr = static_cast<int>(a.rows - r0 < kKQuantMmaRows ? a.rows - r0 : kKQuantMmaRows);
  const int g = lane >> 2, t = lane & 3;
  float acc[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;
  }
  if (nr > 0) {
    const uint8_t* w = static_cast<const uint8_t*>(
        a.single_weight != nullptr
            ? a.single_weight
            : a.weights[(a.group_weight != nullptr ? a.group_weight[gi] : gi) +
                        (second ? a.up_offset : 0)]);
    const int64_t rb = static_cast<int64_t>(a.row_bytes),
                  xb = kType == kKQuantMmaQ1_0 ? Q8ZBytes(a.cols) : Q8KBytes(a.cols);
    auto x_of = [&](int e) {
      const int64_t entry = e0 + e;
      return a.x_q8 + (a.x_row != nullptr ? a.x_row[entry] : entry) * xb;
    };
    KQuantMmaLane<NT> l;
    l.w[0] = w + (r0 + (g < nr ? g : nr - 1)) * rb;
    l.w[1] = w + (r0 + (g + 8 < nr ? g + 8 : nr - 1)) * rb;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const int e_g = kKQuantMmaEntries * n + g;
      l.xq[n] = e_g < ne ? reinterpret_cast<const int8_t*>(x_of(e_g)) : nullptr;
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const int e = kKQuantMmaEntries * n + 2 * t + k;
        l.xd[n][k] = e < ne ? reinterpret_cast<const float*>(x_of(e) + a.cols) : nullptr;
      }
    }
    const int units = static_cast<int>(a.cols / KQuantMmaUnitCols(kType));
    if constexpr (kType == kKQuantMmaQ1_0) {
      Q1MmaSums<NT>(l, kpart, units, split, acc);
    } else if constexpr (kType == kKQuantMmaQ6K) {
      Q6KMmaSums<NT>(l, kpart, units, split, acc);
    } else {
      KQuantMmaSums<kType == kKQuantMmaQ5K, NT>(l, kpart, units, split, acc);
    }
  }
  if (split > 1) {
    if (kpart > 0) {
#pragma unroll
      for (int n = 0; n < NT; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) part[((warp * 32 + lane) * NT + n) * 4 + i] = acc[n][i];
      }
    }
    __syncthreads();
    if (kpart != 0) return;
  }
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = acc[n][i];
      for (int o = 1; o < split; ++o) v += part[(((warp + o) * 32 + lane) * NT + n) * 4 + i];
      const int row = AccRow(lane, i), e = kKQuantMmaEntries * n + AccCol(lane, i);
      if (row < nr && e < ne) y[(e0 + e) * a.y_stride + r0 + row] = v;
    }
  }
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_KQUANT_MMA_DEVICE_H_
