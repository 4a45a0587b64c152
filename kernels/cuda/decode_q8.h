// Decode products with 8-bit activations (on by default; SLUICE_CUDA_Q8=0
// turns them off, see decode_ops.cu UseQ8): a decode block quantizes its
// input vector to int8 as llama.cpp's CPU backend quantizes the activations
// of the same weight types (the goldens' reference), and a chunk of 32
// weights meets it in integer dot products of four bytes (dp4a) instead of
// 32 float decodes and FMAs. The weight readers (quant_blocks_device.h) load
// the same raw chunks as the float path; what differs is the arithmetic.
// On the H200 (2026-12-02, docs/STATUS.md) a bench35 DeltaNet input
// projection read from a prepared 8-bit vector took 13.7 us against 21.5 us
// on the float path (~17 instructions per weight there).
//
// Two formats, as the CPU backend's vec_dot types:
//   Q8_K (Q4_K, Q5_K, Q6_K): groups of 256, scale from the group's first
//        element of largest magnitude, sign included (iscale = -127 / max,
//        q = min(127, round(iscale x)), d = 1 / iscale), and per 16 elements
//        d times the sum of their q (the K-quants' minimum terms);
//   Q8_0 (Q8_0, Q1_0): groups of 32, d = max|x| / 127 rounded to fp16,
//        q = round(x * 127 / max|x|), and per group the sum of its q.
// Rounding is to nearest even, as the CPU's vector code.
//
// Device code (and host code under host_emulation.h, for the CPU tests).
// Types without a Q8Dot keep the float path.
#ifndef SLUICE_KERNELS_CUDA_DECODE_Q8_H_
#define SLUICE_KERNELS_CUDA_DECODE_Q8_H_

#include <cstdint>

#include "kernels/cuda/quant_blocks_device.h"

namespace sluice::cuda::internal {

// A quantized vector: q[n] int8, one scale per group (d: 256 elements for
// Q8_K, 32 for Q8_0), and the sums s: Q8_K d * sum(q) per 16 elements, Q8_0
// sum(q) per group. q null: none.
struct Q8Vector {
  const int8_t* q;
  const float* d;
  const float* s;
};

constexpr int kQ8KShift = 8;
constexpr int kQ8ZShift = 5;

// Where the vectors a product may read start: Q8_K for the K-quants, Q8_0
// for Q8_0 and Q1_0 (either null when no matrix of the launch needs it),
// of n elements. Kept as two addresses (the views are made where used): a
// decode block holds it across its row blocks, in registers it needs.
struct Q8Input {
  const uint8_t* k;
  const uint8_t* z;
  int64_t n;
};

// Bytes of an n-element vector of either format (q, then d, then s; the
// scales padded to a multiple of 4), a multiple of 16 when n is a multiple
// of 256 (Q8_K) or 32 (Q8_0).
__host__ __device__ inline int64_t Q8KScales(int64_t n) { return (n / 256 + 3) / 4 * 4; }
__host__ __device__ inline int64_t Q8ZGroups(int64_t n) { return (n / 32 + 3) / 4 * 4; }
__host__ __device__ inline int64_t Q8KBytes(int64_t n) { return n + Q8KScales(n) * 4 + n / 16 * 4; }
__host__ __device__ inline int64_t Q8ZBytes(int64_t n) { return n + Q8ZGroups(n) * 8; }

// The scales and sums of a vector of either format at base.
__device__ __forceinline__ float* Q8KSums(uint8_t* base, int64_t n) {
  return reinterpret_cast<float*>(base + n) + Q8KScales(n);
}
__device__ __forceinline__ float* Q8ZSums(uint8_t* base, int64_t n) {
  return reinterpret_cast<float*>(base + n) + Q8ZGroups(n);
}

__device__ __forceinline__ Q8Vector Q8KAt(const uint8_t* base, int64_t n) {
  return {reinterpret_cast<const int8_t*>(base), reinterpret_cast<const float*>(base + n),
          Q8KSums(const_cast<uint8_t*>(base), n)};
}
__device__ __forceinline__ Q8Vector Q8ZAt(const uint8_t* base, int64_t n) {
  return {reinterpret_cast<const int8_t*>(base), reinterpret_cast<const float*>(base + n),
          Q8ZSums(const_cast<uint8_t*>(base), n)};
}

// ---- one group at a time (the reference the tests compare with) ----------

template <class At>
__device__ __forceinline__ void QuantizeGroupQ8K(At at, int g, int8_t* q, float* d, float* s16) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 256; ++i) {
    const float v = at(256 * g + i);
    if (fabsf(v) > amax) {
      amax = fabsf(v);
      max = v;
    }
  }
  const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
  for (int c = 0; c < 16; ++c) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) {
      const int e = 256 * g + 16 * c + i;
      const int v = iscale != 0.0f ? __float2int_rn(iscale * at(e)) : 0;
      q[e] = static_cast<int8_t>(v < 127 ? v : 127);
      sum += q[e];
    }
    s16[16 * g + c] = (iscale != 0.0f ? 1.0f / iscale : 0.0f) * static_cast<float>(sum);
  }
  d[g] = iscale != 0.0f ? 1.0f / iscale : 0.0f;
}

__device__ __forceinline__ float RoundToHalf(float v) { return __half2float(__float2half_rn(v)); }

template <class At>
__device__ __forceinline__ void QuantizeGroupQ8Z(At at, int g, int8_t* q, float* d, float* s) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = fmaxf(amax, fabsf(at(32 * g + i)));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  int sum = 0;
  for (int i = 0; i < 32; ++i) {
    q[32 * g + i] = static_cast<int8_t>(__float2int_rn(at(32 * g + i) * id));
    sum += q[32 * g + i];
  }
  d[g] = RoundToHalf(amax / 127.0f);
  s[g] = static_cast<float>(sum);
}

// ---- a block at a time ----------------------------------------------------

__device__ __forceinline__ uint32_t PackBytes(const int (&v)[16], int w) {
  return (static_cast<uint32_t>(v[4 * w] & 0xFF)) | (static_cast<uint32_t>(v[4 * w + 1] & 0xFF) << 8) |
         (static_cast<uint32_t>(v[4 * w + 2] & 0xFF) << 16) |
         (static_cast<uint32_t>(v[4 * w + 3] & 0xFF) << 24);
}

// The row of index i of `rows` rows of `per_row` items laid end to end,
// with 32-bit indices (rows * per_row stays far below 2^31): no division
// for one row or a power-of-two row, as every expert width here is.
struct RowIndex {
  int rows, per_row, shift;  // shift: log2(per_row), or -1
  __device__ __forceinline__ RowIndex(int rows_, int per_row_)
      : rows(rows_), per_row(per_row_), shift(-1) {
    if ((per_row & (per_row - 1)) == 0) {
#if defined(__CUDA_ARCH__)
      shift = __ffs(per_row) - 1;
#else
      shift = __builtin_ctz(static_cast<unsigned>(per_row));
#endif
    }
  }
  __device__ __forceinline__ int Row(int i) const {
    return rows == 1 ? 0 : (shift >= 0 ? i >> shift : i / per_row);
  }
};

// Quantizes `rows` vectors of n elements (element e of row r is at(r, e))
// into Q8_K at kq and / or Q8_0 at zq (either may be null; row r at
// kq + r * Q8KBytes(n), zq + r * Q8ZBytes(n)), giving the bytes of the
// one-group functions above, over `threads` threads (whole warps) of index
// `tid`: chunk c of 16 elements (over the rows' concatenation) belongs to
// thread c % threads, so a group's chunks sit in adjacent lanes of one warp
// and meet by shuffles, without a barrier (the caller synchronizes after:
// a warp alone, tid its lane, only with __syncwarp). QuantizeBlockQ8: every
// thread of the block.
// Preconditions: threads % 32 == 0; n % 256 == 0 with kq, n % 32 == 0.
template <class At>
__device__ void QuantizeQ8(At at, int rows, int64_t n, uint8_t* kq, uint8_t* zq, int tid,
                           int threads) {
  const RowIndex index(rows, static_cast<int>(n / 16));
  const int per_row = index.per_row, total = rows * per_row;
  const int rounded = (total + 31) / 32 * 32;
  const int lane = tid & 31;
  for (int c = tid; c < rounded; c += threads) {
    const bool active = c < total;
    const int row = active ? index.Row(c) : 0;
    const int cc = active ? c - row * per_row : 0;
    float v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = active ? at(row, 16 * cc + i) : 0.0f;
    if (kq != nullptr) {
      // The first element of largest magnitude over the 16 lanes of the
      // group (lower lanes hold earlier elements).
      float amax = 0.0f, max = 0.0f;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        if (fabsf(v[i]) > amax) {
          amax = fabsf(v[i]);
          max = v[i];
        }
      }
      for (int off = 1; off < 16; off <<= 1) {
        const float oa = __shfl_xor_sync(0xffffffffu, amax, off);
        const float om = __shfl_xor_sync(0xffffffffu, max, off);
        if (oa > amax || (oa == amax && (lane & off) != 0)) {
          amax = oa;
          max = om;
        }
      }
      const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
      const float d = iscale != 0.0f ? 1.0f / iscale : 0.0f;
      int q[16], sum = 0;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int t = iscale != 0.0f ? __float2int_rn(iscale * v[i]) : 0;
        q[i] = t < 127 ? t : 127;
        sum += q[i];
      }
      if (active) {
        uint8_t* base = kq + row * Q8KBytes(n);
        *reinterpret_cast<uint4*>(base + 16 * cc) =
            make_uint4(PackBytes(q, 0), PackBytes(q, 1), PackBytes(q, 2), PackBytes(q, 3));
        Q8KSums(base, n)[cc] = d * static_cast<float>(sum);
        if ((cc & 15) == 0) reinterpret_cast<float*>(base + n)[cc >> 4] = d;
      }
    }
    if (zq != nullptr) {
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(v[i]));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
      int q[16], sum = 0;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        q[i] = __float2int_rn(v[i] * id);
        sum += q[i];
      }
      const float total_sum =
          static_cast<float>(sum) + __shfl_xor_sync(0xffffffffu, static_cast<float>(sum), 1);
      if (active) {
        uint8_t* base = zq + row * Q8ZBytes(n);
        *reinterpret_cast<uint4*>(base + 16 * cc) =
            make_uint4(PackBytes(q, 0), PackBytes(q, 1), PackBytes(q, 2), PackBytes(q, 3));
        if ((cc & 1) == 0) {
          reinterpret_cast<float*>(base + n)[cc >> 1] = RoundToHalf(amax / 127.0f);
          Q8ZSums(base, n)[cc >> 1] = total_sum;
        }
      }
    }
  }
}

template <class At>
__device__ void QuantizeBlockQ8(At at, int rows, int64_t n, uint8_t* kq, uint8_t* zq) {
  QuantizeQ8(at, rows, n, kq, zq, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
}

__device__ __forceinline__ uint4 LoadQ16(const int8_t* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ uint2 LoadQ8(const int8_t* p) {
  return *reinterpret_cast<const uint2*>(p);
}

template <class T>
struct Q8Dot;  // defined for the types below only

template <class T>
inline constexpr bool kHasQ8Dot = false;

// Whether Q8Dot<T> reads the Q8_K vector (else the Q8_0 one).
template <class T>
inline constexpr bool kReadsQ8K = true;

// The vector of Q8Input that products of T read (q null: none).
template <class T>
__device__ __forceinline__ Q8Vector Q8For(const Q8Input& in) {
  const uint8_t* base = kReadsQ8K<T> ? in.k : in.z;
  if (base == nullptr) return {nullptr, nullptr, nullptr};
  return kReadsQ8K<T> ? Q8KAt(base, in.n) : Q8ZAt(base, in.n);
}

// Q4_K / Q5_K: chunk c is elements e = 256 (c / 8) + 64 p + l0 + [0, 16)
// (low nibbles of the 16 loaded qs bytes; sub-block 2p, scale d0, min m0)
// and e + 32 (high nibbles; sub-block 2p + 1, d1, m1), p = (c % 8) / 2,
// l0 = 16 (c % 2) (KWeights::Col).
template <bool kQ5>
struct Q8Dot<KWeights<kQ5>> {
  struct X {
    uint4 lo, hi;
    float d_lo, d_hi, s_lo, s_hi;
  };
  __device__ static void Load(const Q8Vector& v, int64_t chunk, X& x) {
    const int c = static_cast<int>(chunk);
    const int k = c & 7;
    const int e = (c >> 3) * 256 + 64 * (k >> 1) + (k & 1) * 16;
    x.lo = LoadQ16(v.q + e);
    x.hi = LoadQ16(v.q + e + 32);
    x.d_lo = v.d[e >> kQ8KShift];
    x.d_hi = v.d[(e + 32) >> kQ8KShift];
    x.s_lo = v.s[e >> 4];
    x.s_hi = v.s[(e >> 4) + 2];
  }
  // A raw chunk's integer lanes (low and high nibbles as bytes, Q5_K's fifth
  // bit in) and scales: decoded once where several vectors meet the chunk.
  struct W {
    uint32_t lo[4], hi[4];
    float d0, m0, d1, m1;
  };
  __device__ static void Decode(const typename KWeights<kQ5>::Raw& r, W& w) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t ql = r.q[i] & 0x0F0F0F0Fu, qh = (r.q[i] >> 4) & 0x0F0F0F0Fu;
      if constexpr (kQ5) {
        ql |= ((r.h[i] >> r.sub0) & 0x01010101u) << 4;
        qh |= ((r.h[i] >> (r.sub0 + 1)) & 0x01010101u) << 4;
      }
      w.lo[i] = ql;
      w.hi[i] = qh;
    }
    w.d0 = r.d0;
    w.m0 = r.m0;
    w.d1 = r.d1;
    w.m1 = r.m1;
  }
  __device__ static float Dot(const W& w, const X& x) {
    const uint32_t xl[4] = {x.lo.x, x.lo.y, x.lo.z, x.lo.w};
    const uint32_t xh[4] = {x.hi.x, x.hi.y, x.hi.z, x.hi.w};
    int lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      lo = __dp4a(static_cast<int>(w.lo[i]), static_cast<int>(xl[i]), lo);
      hi = __dp4a(static_cast<int>(w.hi[i]), static_cast<int>(xh[i]), hi);
    }
    return (w.d0 * x.d_lo) * static_cast<float>(lo) - w.m0 * x.s_lo +
           (w.d1 * x.d_hi) * static_cast<float>(hi) - w.m1 * x.s_hi;
  }
  __device__ static float Dot(const typename KWeights<kQ5>::Raw& r, const X& x) {
    W w;
    Decode(r, w);
    return Dot(w, x);
  }
};
template <>
inline constexpr bool kHasQ8Dot<KWeights<false>> = true;
template <>
inline constexpr bool kHasQ8Dot<KWeights<true>> = true;

// Q6_K: chunk c is half h = (c % 8) / 4, l0 = 8 (c % 4); for each k in 0..3
// the 8 elements 256 (c / 8) + 128 h + 32 k + l0 + [0, 8) with scale ds[k]
// (Q6KWeights::Col). The -32 offset is taken per byte before the product.
template <>
struct Q8Dot<Q6KWeights> {
  struct X {
    uint2 q[4];
    float d[4];
  };
  __device__ static void Load(const Q8Vector& v, int64_t c, X& x) {
    const int k = static_cast<int>(c & 7);
    const int64_t e = (c >> 3) * 256 + 128 * (k >> 2) + (k & 3) * 8;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      x.q[j] = LoadQ8(v.q + e + 32 * j);
      x.d[j] = v.d[(e + 32 * j) >> kQ8KShift];
    }
  }
  // A raw chunk's signed bytes (q - 32) and scales, decoded once where
  // several vectors meet the chunk.
  struct W {
    uint32_t q[4][2];
    float ds[4];
  };
  __device__ static void Decode(const Q6KWeights::Raw& r, W& w) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const uint32_t lo = (k & 1) ? r.lo_b[s] : r.lo_a[s];
        const uint32_t q = ((k < 2 ? lo : lo >> 4) & 0x0F0F0F0Fu) |
                           (((r.hi[s] >> (2 * k)) & 0x03030303u) << 4);
        w.q[k][s] = __vsub4(q, 0x20202020u);  // each byte q - 32
      }
      w.ds[k] = r.ds[k];
    }
  }
  __device__ static float Dot(const W& w, const X& x) {
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      int sum = __dp4a(static_cast<int>(w.q[k][0]), static_cast<int>(x.q[k].x), 0);
      sum = __dp4a(static_cast<int>(w.q[k][1]), static_cast<int>(x.q[k].y), sum);
      acc += (w.ds[k] * x.d[k]) * static_cast<float>(sum);
    }
    return acc;
  }
  __device__ static float Dot(const Q6KWeights::Raw& r, const X& x) {
    W w;
    Decode(r, w);
    return Dot(w, x);
  }
};
template <>
inline constexpr bool kHasQ8Dot<Q6KWeights> = true;

// Q8_0: chunk c is block c (32 elements, scale d).
template <>
struct Q8Dot<Q8_0Weights> {
  struct X {
    uint4 a, b;
    float d;
  };
  __device__ static void Load(const Q8Vector& v, int64_t c, X& x) {
    x.a = LoadQ16(v.q + 32 * c);
    x.b = LoadQ16(v.q + 32 * c + 16);
    x.d = v.d[c];
  }
  // Nothing to decode: the raw chunk's bytes are the lanes.
  using W = Q8_0Weights::Raw;
  __device__ static void Decode(const Q8_0Weights::Raw& r, W& w) { w = r; }
  __device__ static float Dot(const Q8_0Weights::Raw& r, const X& x) {
    const uint32_t xs[8] = {x.a.x, x.a.y, x.a.z, x.a.w, x.b.x, x.b.y, x.b.z, x.b.w};
    int sum = 0;
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      sum = __dp4a(static_cast<int>(r.q[w]), static_cast<int>(xs[w]), sum);
    }
    return (r.d * x.d) * static_cast<float>(sum);
  }
};
template <>
inline constexpr bool kHasQ8Dot<Q8_0Weights> = true;
template <>
inline constexpr bool kReadsQ8K<Q8_0Weights> = false;

// Q1_0: chunk c is elements 32 c .. 32 c + 32 (one Q8_0 group), bit j of
// the chunk's word set for +d. The product is 2 * (sum of q where the bit
// is set) - (sum of all q). Load transposes the chunk's 32 bytes of q once
// (the vector's part is shared by every row a lane reads): word w of t
// holds elements w, w + 8, w + 16, w + 24, which are bits w, w + 8, w + 16,
// w + 24 of the chunk's word, so (bits >> w) & 0x01010101 is their four
// 0/1 bytes and one dp4a adds the four q. Three instructions a four
// weights against five when each nibble is spread to bytes (a shift, a
// mask, a multiply, a mask); `set` is an integer, so the bits are the same.
template <>
struct Q8Dot<Q1_0Weights> {
  struct X {
    uint32_t t[8];
    float d;
    float s;
  };
  // The 4 x 4 byte transpose of (a, b, c, e): word i of the result holds
  // byte i of a, b, c and e (in that order, low byte first).
  __device__ static void Transpose4(uint32_t a, uint32_t b, uint32_t c, uint32_t e,
                                    uint32_t* out) {
    const uint32_t ab_lo = __byte_perm(a, b, 0x5140);  // a0 b0 a1 b1
    const uint32_t ab_hi = __byte_perm(a, b, 0x7362);  // a2 b2 a3 b3
    const uint32_t ce_lo = __byte_perm(c, e, 0x5140);
    const uint32_t ce_hi = __byte_perm(c, e, 0x7362);
    out[0] = __byte_perm(ab_lo, ce_lo, 0x5410);  // a0 b0 c0 e0
    out[1] = __byte_perm(ab_lo, ce_lo, 0x7632);
    out[2] = __byte_perm(ab_hi, ce_hi, 0x5410);
    out[3] = __byte_perm(ab_hi, ce_hi, 0x7632);
  }
  __device__ static void Load(const Q8Vector& v, int64_t c, X& x) {
    const uint4 a = LoadQ16(v.q + 32 * c);
    const uint4 b = LoadQ16(v.q + 32 * c + 16);
    // Natural order: word k holds elements 4k .. 4k + 3. Elements w + 8i
    // (w < 4) are byte w of words 2i; (w >= 4) byte w - 4 of words 2i + 1.
    Transpose4(a.x, a.z, b.x, b.z, x.t);
    Transpose4(a.y, a.w, b.y, b.w, x.t + 4);
    x.d = v.d[c];
    x.s = v.s[c];
  }
  // A raw chunk's bits as eight words of 0/1 bytes (word w: bits w, w + 8,
  // w + 16, w + 24, as t's words) and its scale, decoded once where several
  // vectors meet the chunk.
  struct W {
    uint32_t ones[8];
    float d;
  };
  __device__ static void Decode(const Q1_0Weights::Raw& r, W& w) {
#pragma unroll
    for (int i = 0; i < 8; ++i) w.ones[i] = (r.bits[0] >> i) & 0x01010101u;
    w.d = r.d;
  }
  __device__ static float Dot(const W& w, const X& x) {
    int set = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      set = __dp4a(static_cast<int>(w.ones[i]), static_cast<int>(x.t[i]), set);
    }
    return (w.d * x.d) * (2.0f * static_cast<float>(set) - x.s);
  }
  __device__ static float Dot(const Q1_0Weights::Raw& r, const X& x) {
    W w;
    Decode(r, w);
    return Dot(w, x);
  }
};
template <>
inline constexpr bool kHasQ8Dot<Q1_0Weights> = true;
template <>
inline constexpr bool kReadsQ8K<Q1_0Weights> = false;

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_DECODE_Q8_H_
