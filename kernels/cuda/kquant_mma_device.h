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
#include <type_traits>

#include "kernels/cuda/decode_q8.h"
#include "kernels/cuda/mma_fragments.h"
#include "kernels/cuda/quant_blocks_device.h"
#include "kernels/cuda/quant_matmul_impl.h"

namespace sluice::cuda::internal {

// The weight types the kernel takes (ggml type ids).
inline constexpr int kKQuantMmaQ4K = 12, kKQuantMmaQ5K = 13, kKQuantMmaQ6K = 14,
                     kKQuantMmaQ1_0 = 41;

// Whether the kernel takes weights of ggml type `type`.
SLUICE_GROUPED_HD inline bool KQuantMmaTypeSupported(int type) {
  return type == kKQuantMmaQ4K || type == kKQuantMmaQ5K || type == kKQuantMmaQ6K ||
         type == kKQuantMmaQ1_0;
}

// The columns of a weight block the kernel steps over: a super-block of
// 256, or Q1_0's block of 128 (its rows rounded to Q8_0-like groups of 32,
// decode_q8.h's Q8Z, the others' to Q8_K).
SLUICE_GROUPED_HD inline int64_t KQuantMmaUnitCols(int type) {
  return type == kKQuantMmaQ1_0 ? 128 : 256;
}

// One lane's view of NT m16 x n8 tiles side by side (entries 8 n ..
// 8 n + 8 of tile n): rows g and g + 8 of the tile (their weight rows; a
// missing row may repeat another, its sums unused), entry g of each n8
// tile's 8-bit row and the scales of its entries 2t and 2t + 1, with g =
// lane / 4, t = lane % 4. A missing entry repeats another's row (its sums
// are never stored), so every load is of real bytes and none waits on a
// branch.
template <int NT>
struct KQuantMmaLane {
  const uint8_t* w[2];
  const int8_t* xq[NT];
  const float* xd[NT][2];
};

// 4 little-endian bytes at p, p kAlign-aligned modulo 4 as the caller
// knows for the whole warp: 4, one load; 2, two aligned loads shifted
// into place (Q6_K's and Q1_0's odd blocks; it reads up to 2 bytes past
// the word, as every such reader here); 0, either, by p (a file whose
// tensors are only 2-byte aligned). Known alignments keep the loads free of
// branches, so a lane issues all of a block's loads before it waits on
// one. Not the readers' LoadWords: with them ptxas gave the two-tile
// kernels 13-25 more registers (sm_90a, 2026-12-07).
// Aligned loads: on the CPU (host_emulation.h) a load the GPU could not
// make aborts, so the emulation test proves each fast path's alignment.
template <class T>
__device__ __forceinline__ T Aligned(const void* p) {
#if !defined(__CUDACC__)
  if (reinterpret_cast<uintptr_t>(p) % sizeof(T) != 0) __builtin_trap();
#endif
  return *reinterpret_cast<const T*>(p);
}

template <int kAlign>
__device__ __forceinline__ uint32_t Word(const uint8_t* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if constexpr (kAlign == 4) return Aligned<uint32_t>(p);
  if (kAlign == 0 && (a & 3) == 0) return *reinterpret_cast<const uint32_t*>(p);
  const uint32_t* q = reinterpret_cast<const uint32_t*>(a & ~static_cast<uintptr_t>(3));
  return __funnelshift_r(q[0], q[1], kAlign == 2 ? 16u : static_cast<uint32_t>(8 * (a & 3)));
}

// 8 bytes at p as two words: one vector load where kAlign is 16 (p then
// 8-byte aligned), else Word<0>'s.
template <int kAlign>
__device__ __forceinline__ uint2 Words2(const uint8_t* p) {
  if constexpr (kAlign == 16) return Aligned<uint2>(p);
  return uint2{Word<0>(p), Word<0>(p + 4)};
}

// A rounded row's 8 bytes at p (rows of 8-byte multiples from an aligned
// buffer: decode_q8.h).
__device__ __forceinline__ uint2 XWords(const int8_t* p) { return Aligned<uint2>(p); }

// A lane's weight words of one Q4_K / Q5_K block, both rows: each row's
// header (d, dmin, the 6-bit scales and mins as three words), its quants
// and Q5_K's high bits.
struct KBlockWords {
  uint4 head[2];
  uint2 qs[2][4], qh[2];
};
template <bool kQ5, int kAlign>
__device__ __forceinline__ void LoadKBlockWords(const uint8_t* const (&w)[2], int b, int t,
                                                KBlockWords& k) {
  using W = KWeights<kQ5>;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const uint8_t* blk = w[r] + static_cast<int64_t>(b) * W::kBlockBytes;
    if constexpr (kAlign == 16) {
      k.head[r] = Aligned<uint4>(blk);
    } else {
      k.head[r] = uint4{Word<0>(blk), Word<0>(blk + 4), Word<0>(blk + 8), Word<0>(blk + 12)};
    }
#pragma unroll
    for (int p = 0; p < 4; ++p) k.qs[r][p] = Words2<kAlign>(blk + W::kQsOffset + 32 * p + 8 * t);
    if constexpr (kQ5) {
      k.qh[r] = Words2<kAlign>(blk + 16 + 8 * t);
    } else {
      k.qh[r] = uint2{0u, 0u};
    }
  }
}

// Blocks b0, b0 + step, ... < b1 in turn: load(b, words), then sum(b,
// words). kAhead: block b + step's words are loaded before block b's sums
// (the last block loads its own again, so no load waits on a branch), two
// blocks' weight loads in flight a warp instead of one. The same sums.
template <bool kAhead, class Words, class Load, class Sum>
__device__ __forceinline__ void BlocksInTurn(int b0, int b1, int step, Load load, Sum sum) {
  if constexpr (kAhead) {
    Words next;
    if (b0 < b1) load(b0, next);
#pragma unroll 1
    for (int b = b0; b < b1; b += step) {
      const Words k = next;
      load(b + step < b1 ? b + step : b, next);
      sum(b, k);
    }
  } else {
#pragma unroll 1
    for (int b = b0; b < b1; b += step) {
      Words k;
      load(b, k);
      sum(b, k);
    }
  }
}

// acc[n][i] (n8 tile n's D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1], as
// MmaS8 lays them out) += the blocks b0, b0 + step, ... < b1 of the lane's
// rows against tile n's entries, in that order. Every lane of the warp
// calls it with the same blocks. Each (row, entry) sum is the same at any
// NT: the tiles share only the weights' words and scales. The k order
// inside a sub-block is the mma's to choose (integer sums): lane t holds
// elements 8t..8t+7 of each, the weights' and the row's, one 8-byte load
// each. kAlign 16: both rows' blocks 16-byte aligned (the header one
// load), else 0.
// Every load of a block comes first: its weight words (kAhead:
// BlocksInTurn's), then each tile's row bytes and scale.
template <bool kQ5, int NT, int kAlign, bool kAhead = false>
__device__ __forceinline__ void KQuantMmaSums(const KQuantMmaLane<NT>& l, int b0, int b1,
                                              int step, float (&acc)[NT][4]) {
  const int t = threadIdx.x & 3;
  auto load = [&](int b, KBlockWords& k) { LoadKBlockWords<kQ5, kAlign>(l.w, b, t, k); };
  BlocksInTurn<kAhead, KBlockWords>(b0, b1, step, load, [&](int b, const KBlockWords& k) {
    const uint4(&head)[2] = k.head;
    const uint2(&qs)[2][4] = k.qs;
    const uint2(&qh)[2] = k.qh;
    uint2 xw[NT][8];
    float dx[NT][2];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        xw[n][j] = XWords(l.xq[n] + static_cast<int64_t>(b) * 256 + 32 * j + 8 * t);
      }
      dx[n][0] = l.xd[n][0][b];
      dx[n][1] = l.xd[n][1][b];
    }
    float d[2], dmin[2];
    uint32_t sc[2][2], mn[2][2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint32_t s0 = head[r].y, s1 = head[r].z, s2 = head[r].w;
      d[r] = HalfBits(head[r].x);
      dmin[r] = HalfBits(head[r].x >> 16);
      sc[r][0] = s0 & 0x3F3F3F3Fu;
      mn[r][0] = s1 & 0x3F3F3F3Fu;
      sc[r][1] = (s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u);
      mn[r][1] = ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u);
    }
    int32_t si[NT][4], mi[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) si[n][i] = mi[n][i] = 0;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      // Sub-block j: nibble j % 2 of quant run j / 2 (and Q5_K's bit j).
      const int p = j >> 1, h = j & 1;
      uint32_t a[4];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        uint32_t lo = (qs[r][p].x >> (4 * h)) & 0x0F0F0F0Fu;
        uint32_t hi = (qs[r][p].y >> (4 * h)) & 0x0F0F0F0Fu;
        if constexpr (kQ5) {
          lo |= ((qh[r].x >> j) & 0x01010101u) << 4;
          hi |= ((qh[r].y >> j) & 0x01010101u) << 4;
        }
        a[r] = lo;      // a[0]: row g, a[1]: row g + 8 (elements 8t..8t+3)
        a[2 + r] = hi;  // a[2], a[3]: elements 8t+4..8t+7
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
        const uint32_t bx[2] = {xw[n][j].x, xw[n][j].y};
        int32_t dot[4] = {0, 0, 0, 0};
        MmaS8(dot, a, bx);
        si[n][0] += s_g * dot[0];
        si[n][1] += s_g * dot[1];
        si[n][2] += s_g8 * dot[2];
        si[n][3] += s_g8 * dot[3];
        MmaS8(mi[n], am, bx);
      }
    }
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i >> 1, e = i & 1;
        acc[n][i] += (d[r] * dx[n][e]) * static_cast<float>(si[n][i]) -
                     (dmin[r] * dx[n][e]) * static_cast<float>(mi[n][i]);
      }
    }
  });
}

// Q6_K's 6-bit values q (four to a word) as the signed bytes q - 32: q ^ 32
// is right where q >= 32; below, bits 6 and 7 must be set too, and there
// bit 5 of q ^ 32 is set (times 6 puts it in both, no carry between bytes).
__device__ __forceinline__ uint32_t CenteredQ6(uint32_t q) {
  const uint32_t r = q ^ 0x20202020u;
  return r | ((r & 0x20202020u) * 6u);
}

// One Q6_K block b's sums (Q6KMma), its words read as kAlign says.
template <int NT, int kAlign>
__device__ __forceinline__ void Q6KBlock(const KQuantMmaLane<NT>& l, int b, float (&acc)[NT][4]) {
  constexpr int kBlockBytes = 210;
  const int t = threadIdx.x & 3;
  const uint8_t* blk[2] = {l.w[0] + static_cast<int64_t>(b) * kBlockBytes,
                           l.w[1] + static_cast<int64_t>(b) * kBlockBytes};
  // Every load of the block first: per row d, the 16 scales, and the ql
  // and qh words of lane t's k-runs; then each tile's row words and scale.
  float d[2];
  uint32_t sc[2][4], ql[2][2][2][2], qh[2][2][2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    d[r] = HalfBits(Aligned<uint16_t>(blk[r] + 208));
#pragma unroll
    for (int i = 0; i < 4; ++i) sc[r][i] = Word<kAlign>(blk[r] + 192 + 4 * i);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        qh[r][half][hh] = Word<kAlign>(blk[r] + 128 + 32 * half + 16 * hh + 4 * t);
#pragma unroll
        for (int s2 = 0; s2 < 2; ++s2) {
          ql[r][half][s2][hh] = Word<kAlign>(blk[r] + 64 * half + 32 * s2 + 16 * hh + 4 * t);
        }
      }
    }
  }
  uint32_t xw[NT][16];
  float dx[NT][2];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      xw[n][j] = Aligned<uint32_t>(l.xq[n] + static_cast<int64_t>(b) * 256 + 16 * j + 4 * t);
    }
    dx[n][0] = l.xd[n][0][b];
    dx[n][1] = l.xd[n][1][b];
  }
  int32_t si[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) si[n][i] = 0;
  }
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    // Sub-block j = 8 half + 2 s + hh: nibble s / 2 of ql run (half, s % 2,
    // hh), bits 2 s.. of qh run (half, hh).
    const int half = j >> 3, s = (j >> 1) & 3, hh = j & 1;
    uint32_t a[2];
    int32_t scale[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      a[r] = CenteredQ6(((ql[r][half][s & 1][hh] >> (4 * (s >> 1))) & 0x0F0F0F0Fu) |
                        (((qh[r][half][hh] >> (2 * s)) & 0x03030303u) << 4));
      scale[r] = static_cast<int32_t>(sc[r][j >> 2] << (24 - 8 * (j & 3))) >> 24;
    }
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      int32_t dot[4] = {0, 0, 0, 0};
      MmaS8K16(dot, a[0], a[1], xw[n][j]);
      si[n][0] += scale[0] * dot[0];
      si[n][1] += scale[0] * dot[1];
      si[n][2] += scale[1] * dot[2];
      si[n][3] += scale[1] * dot[3];
    }
  }
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc[n][i] += (d[i >> 1] * dx[n][i & 1]) * static_cast<float>(si[n][i]);
    }
  }
}

// Blocks b0, b0 + step, ... < b1 of a type whose blocks are 2 bytes off 4
// (Q6_K's 210, Q1_0's 18) through Block::Sums<kAlign>: with both rows 4-byte
// aligned (kRowsAligned) even blocks are read with Block::kEvenAlign and
// odd ones with the other (4 or 2); else each word finds its own way (0).
// kAhead (where Block::kLoadsAhead): as BlocksInTurn's, through
// Block::Load and Block::SumsOf.
template <class Block, bool kRowsAligned, int NT, bool kAhead = false>
__device__ __forceinline__ void SumsByParity(const KQuantMmaLane<NT>& l, int b0, int b1,
                                             int step, float (&acc)[NT][4]) {
  // f(std::integral_constant<int, kAlign>) with block b's alignment.
  auto by_parity = [](int b, auto f) {
    if constexpr (!kRowsAligned) {
      f(std::integral_constant<int, 0>{});
    } else if ((b & 1) == 0) {
      f(std::integral_constant<int, Block::kEvenAlign>{});
    } else {
      f(std::integral_constant<int, 6 - Block::kEvenAlign>{});
    }
  };
  if constexpr (kAhead && Block::kLoadsAhead) {
    using Words = typename Block::Words;
    auto load = [&](int b, Words& w) {
      by_parity(b, [&](auto align) { Block::template Load<decltype(align)::value>(l, b, w); });
    };
    BlocksInTurn<true, Words>(b0, b1, step, load, [&](int b, const Words& k) {
      Block::template SumsOf<NT>(l, b, k, acc);
    });
  } else {
#pragma unroll 1
    for (int b = b0; b < b1; b += step) {
      by_parity(b, [&](auto align) { Block::template Sums<NT, decltype(align)::value>(l, b, acc); });
    }
  }
}

// As KQuantMmaSums, for Q6_K weights (210-byte blocks: ql[128], qh[64],
// scales[16], d). Element 128 n + 32 s + l of a block (s < 4, l < 32) is
// nibble s / 2 of ql[64 n + 32 (s % 2) + l] with bits 2 s.. of qh[32 n + l]
// above it, minus 32; sub-block 8 n + 2 s + l / 16 scales it. Lane t's
// k-run 4t..4t+3 of a sub-block is 4 consecutive l, so one word of ql and
// one of qh. Even blocks of aligned rows are aligned (210 b).
struct Q6KMma {
  static constexpr int kEvenAlign = 4;
  static constexpr bool kLoadsAhead = false;  // 34 words a lane: too many
  struct Words {};
  template <int NT, int kAlign>
  __device__ static void Sums(const KQuantMmaLane<NT>& l, int b, float (&acc)[NT][4]) {
    Q6KBlock<NT, kAlign>(l, b, acc);
  }
};

// Q1_0's sign bits (the low 4 of v) as 4 signed bytes, +1 for a set bit
// and -1 for a clear one: the multiply moves bit i to bit 8 i (no two
// shifted copies overlap), and 0xFF ^ 0xFE is 1.
__device__ __forceinline__ uint32_t SignBytes(uint32_t v) {
  const uint32_t ones = ((v & 0xFu) * 0x00204081u) & 0x01010101u;
  return 0xFFFFFFFFu ^ (ones * 0xFEu);
}

// A lane's weight words of one Q1_0 block (Q1Mma), both rows: the scales
// and the sign words (2 bytes past the block's start, read as kAlign says).
struct Q1Words {
  float d[2];
  uint32_t bits[2][4];
};
template <int NT, int kAlign>
__device__ __forceinline__ void LoadQ1Words(const KQuantMmaLane<NT>& l, int b, Q1Words& q) {
  constexpr int kBlockBytes = 18;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const uint8_t* blk = l.w[r] + static_cast<int64_t>(b) * kBlockBytes;
    q.d[r] = HalfBits(Aligned<uint16_t>(blk));
#pragma unroll
    for (int c = 0; c < 4; ++c) q.bits[r][c] = Word<kAlign>(blk + 2 + 4 * c);
  }
}

// Block b's sums from its weight words q.
template <int NT>
__device__ __forceinline__ void Q1Sums(const KQuantMmaLane<NT>& l, int b, const Q1Words& q,
                                       float (&acc)[NT][4]) {
  const int t = threadIdx.x & 3;
  const float(&d)[2] = q.d;
  const uint32_t(&bits)[2][4] = q.bits;
  uint2 xw[NT][4];
  float dx[NT][2][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      xw[n][c] = XWords(l.xq[n] + 32 * static_cast<int64_t>(4 * b + c) + 8 * t);
      dx[n][0][c] = l.xd[n][0][4 * b + c];
      dx[n][1][c] = l.xd[n][1][4 * b + c];
    }
  }
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    // Lane t's elements 8t..8t+3 (a[0] row g, a[1] row g + 8) and
    // 8t+4..8t+7 (a[2], a[3]) of chunk c.
    const uint32_t a[4] = {SignBytes(bits[0][c] >> (8 * t)), SignBytes(bits[1][c] >> (8 * t)),
                           SignBytes(bits[0][c] >> (8 * t + 4)),
                           SignBytes(bits[1][c] >> (8 * t + 4))};
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const uint32_t bx[2] = {xw[n][c].x, xw[n][c].y};
      int32_t dot[4] = {0, 0, 0, 0};
      MmaS8(dot, a, bx);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[n][i] += (d[i >> 1] * dx[n][i & 1][c]) * static_cast<float>(dot[i]);
      }
    }
  }
}

// As KQuantMmaSums, for Q1_0 weights (18-byte blocks of 128: an f16 scale
// d, then 128 sign bits, bit j of word c giving element 32 c + j) against
// rows rounded to groups of 32 (Q8Z: q_x, then a float scale dx a group):
// per 32-element chunk c one mma.m16n8k32 gives I_c = sum s_w q_x, and
// acc += (d dx_c) float(I_c), chunk by chunk in order. The sign words of
// even blocks of aligned rows are 2 off (18 b + 2).
struct Q1Mma {
  static constexpr int kEvenAlign = 2;
  static constexpr bool kLoadsAhead = true;
  using Words = Q1Words;
  template <int NT, int kAlign>
  __device__ static void Sums(const KQuantMmaLane<NT>& l, int b, float (&acc)[NT][4]) {
    Q1Words q;
    LoadQ1Words<NT, kAlign>(l, b, q);
    Q1Sums<NT>(l, b, q, acc);
  }
  template <int kAlign, int NT>
  __device__ static void Load(const KQuantMmaLane<NT>& l, int b, Q1Words& q) {
    LoadQ1Words<NT, kAlign>(l, b, q);
  }
  template <int NT>
  __device__ static void SumsOf(const KQuantMmaLane<NT>& l, int b, const Q1Words& q,
                                float (&acc)[NT][4]) {
    Q1Sums<NT>(l, b, q, acc);
  }
};

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
// multiple of that unit; a pair through a table of weights), NT n8 tiles a
// warp, in a launch of kLaunchNT tiles a block (blockIdx.y steps 8
// kLaunchNT entries; NT < kLaunchNT only where the block's entries fit NT
// tiles). `part` holds kKQuantMmaWarps * 32 * 4 * kLaunchNT floats of
// shared memory.
template <int kType, int NT, int kLaunchNT = NT, bool kAhead = false>
__device__ __forceinline__ void KQuantMmaBlock(const RawGroupedMatMul& a, float* part) {
  constexpr int kEntries = kKQuantMmaEntries * NT;
  const int gi = static_cast<int>(blockIdx.z);
  int64_t begin, end;
  GroupEntries(a, gi, begin, end);
  const int64_t e0 =
      begin + static_cast<int64_t>(blockIdx.y) * (kKQuantMmaEntries * kLaunchNT);
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
    // A missing entry reads the last one's row.
    auto entry = [&](int e) { return e < ne ? e : ne - 1; };
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      l.xq[n] = reinterpret_cast<const int8_t*>(x_of(entry(kKQuantMmaEntries * n + g)));
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        l.xd[n][k] = reinterpret_cast<const float*>(
            x_of(entry(kKQuantMmaEntries * n + 2 * t + k)) + a.cols);
      }
    }
    // The matrix's alignment, the same for every lane of the block.
    const uintptr_t align = reinterpret_cast<uintptr_t>(w) | static_cast<uintptr_t>(rb);
    const int units = static_cast<int>(a.cols / KQuantMmaUnitCols(kType));
    if constexpr (kType == kKQuantMmaQ1_0 || kType == kKQuantMmaQ6K) {
      using Block = std::conditional_t<kType == kKQuantMmaQ1_0, Q1Mma, Q6KMma>;
      if ((align & 3) == 0) {
        SumsByParity<Block, true, NT, kAhead>(l, kpart, units, split, acc);
      } else {
        SumsByParity<Block, false, NT, kAhead>(l, kpart, units, split, acc);
      }
    } else if ((align & 15) == 0) {
      KQuantMmaSums<kType == kKQuantMmaQ5K, NT, 16, kAhead>(l, kpart, units, split, acc);
    } else {
      KQuantMmaSums<kType == kKQuantMmaQ5K, NT, 0, kAhead>(l, kpart, units, split, acc);
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

// A block of a two-tile launch (KQuantMmaTiles 2: the launch's largest
// group has 16 entries or more) whose own entries number 8 or fewer (most
// groups of a decode batch: 32 sequences over ~70 experts hold ~4 each)
// takes one tile: half the mma and row loads, the same sums (each (row,
// entry) sum is the same at any NT).
template <int kType, bool kAhead = false>
__device__ __forceinline__ void KQuantMmaShrinkingBlock(const RawGroupedMatMul& a, float* part) {
  int64_t begin, end;
  GroupEntries(a, static_cast<int>(blockIdx.z), begin, end);
  const int64_t e0 = begin + static_cast<int64_t>(blockIdx.y) * (2 * kKQuantMmaEntries);
  if (end - e0 <= kKQuantMmaEntries) {
    KQuantMmaBlock<kType, 1, 2, kAhead>(a, part);
  } else {
    KQuantMmaBlock<kType, 2, 2, kAhead>(a, part);
  }
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_KQUANT_MMA_DEVICE_H_
