// Decode products with 8-bit activations (opt-in: SLUICE_CUDA_Q8=1, see
// decode_ops.cu UseQ8): the input vector of a decode mat-vec is quantized
// once per block to int8, and a chunk of 32 weights meets it in integer dot
// products of four bytes (dp4a) instead of 32 float decodes and FMAs. The
// weight readers (quant_blocks_device.h) load the same raw chunks as the
// float path; what differs is the arithmetic (ncu on the H200 counted ~17
// instructions per weight on the float path, at 0.38 issued per cycle per
// scheduler). Measured there: bench35 decodes 9-12% faster with it; the
// isolated per-op times did not move, so instruction count is not what
// bounds those kernels.
//
// Device code (and host code under host_emulation.h, for the CPU tests).
// Types: Q4_K, Q5_K, Q6_K, Q8_0; the others keep the float path.
#ifndef SLUICE_KERNELS_CUDA_DECODE_Q8_H_
#define SLUICE_KERNELS_CUDA_DECODE_Q8_H_

#include <cstdint>

#include "kernels/cuda/quant_blocks_device.h"

namespace sluice::cuda::internal {

// The quantized vector (in shared memory): q[n] int8, one scale per group
// of 1 << shift elements (d[n >> shift]), and sums per 16 elements (s16[n /
// 16]) for the K-quants' minimum terms.
struct Q8Vector {
  const int8_t* q;
  const float* d;
  const float* s16;
  int shift;
};

// Groups of 256 as llama.cpp's Q8_K, which its CPU backend uses for the
// activations of Q4_K, Q5_K and Q6_K products (so that rounding follows the
// reference's): the group's scale comes from its first element of largest
// magnitude, sign included (iscale = -127 / max, d = 1 / iscale, q =
// min(127, round(iscale x))), and s16 holds d times the sum of the 16
// quantized values. Done in three steps (per 16 elements: its extreme; per
// group: the first largest of its 16; per 16: the values and their sum), so
// that a block can spread them over its threads; QuantizeGroupQ8K runs them
// in order for one group.
constexpr int kQ8KShift = 8;

// The first element of largest magnitude among x[16 c .. 16 c + 16).
template <class At>
__device__ __forceinline__ float ChunkExtremeQ8K(At at, int64_t c) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 16; ++i) {
    const float v = at(16 * c + i);
    if (fabsf(v) > amax) {
      amax = fabsf(v);
      max = v;
    }
  }
  return max;
}

// The group's scale from its 16 chunk extremes (ext[0..16)): iscale, 0 for
// an all-zero group.
__device__ __forceinline__ float GroupIscaleQ8K(const float* ext) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 16; ++i) {
    if (fabsf(ext[i]) > amax) {
      amax = fabsf(ext[i]);
      max = ext[i];
    }
  }
  return amax > 0.0f ? -127.0f / max : 0.0f;
}

// Chunk c's 16 values into q (at q[16 c]) and returns their sum.
template <class At>
__device__ __forceinline__ int QuantizeChunkQ8K(At at, int64_t c, float iscale, int8_t* q) {
  int sum = 0;
  for (int i = 0; i < 16; ++i) {
    const int v = iscale != 0.0f ? __float2int_rn(iscale * at(16 * c + i)) : 0;
    const int8_t b = static_cast<int8_t>(v < 127 ? v : 127);
    q[16 * c + i] = b;
    sum += b;
  }
  return sum;
}

// One 256-group g, serially (tests; the kernels spread the same steps).
template <class At>
__device__ __forceinline__ void QuantizeGroupQ8K(At at, int g, int8_t* q, float* d, float* s16) {
  float ext[16];
  for (int i = 0; i < 16; ++i) ext[i] = ChunkExtremeQ8K(at, 16 * g + i);
  const float iscale = GroupIscaleQ8K(ext);
  const float scale = iscale != 0.0f ? 1.0f / iscale : 0.0f;
  d[g] = scale;
  for (int i = 0; i < 16; ++i) {
    s16[16 * g + i] = scale * static_cast<float>(QuantizeChunkQ8K(at, 16 * g + i, iscale, q));
  }
}

// Groups of 32 (shift 5; the Q8_0 products'): group g (x[32 g ..]) as
// x[i] ~ d * q[i], q in -127..127 (d = max |x| / 127; 0 for an all-zero
// group), and its two 16-element sums of x. `at(i)` reads element i of the
// source.
template <class At>
__device__ __forceinline__ void QuantizeGroupQ8(At at, int g, int8_t* q, float* d, float* s16) {
  float amax = 0.0f, s0 = 0.0f, s1 = 0.0f;
#pragma unroll 8
  for (int i = 0; i < 32; ++i) {
    const float v = at(32 * g + i);
    amax = fmaxf(amax, fabsf(v));
    if (i < 16) {
      s0 += v;
    } else {
      s1 += v;
    }
  }
  const float scale = amax / 127.0f;
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
#pragma unroll 8
  for (int i = 0; i < 32; ++i) {
    q[32 * g + i] = static_cast<int8_t>(__float2int_rn(at(32 * g + i) * inv));
  }
  d[g] = scale;
  s16[2 * g] = s0;
  s16[2 * g + 1] = s1;
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
  __device__ static void Load(const Q8Vector& v, int64_t c, X& x) {
    const int k = static_cast<int>(c & 7);
    const int64_t e = (c >> 3) * 256 + 64 * (k >> 1) + (k & 1) * 16;
    x.lo = LoadQ16(v.q + e);
    x.hi = LoadQ16(v.q + e + 32);
    x.d_lo = v.d[e >> v.shift];
    x.d_hi = v.d[(e + 32) >> v.shift];
    x.s_lo = v.s16[e >> 4];
    x.s_hi = v.s16[(e >> 4) + 2];
  }
  __device__ static float Dot(const typename KWeights<kQ5>::Raw& r, const X& x) {
    const uint32_t xl[4] = {x.lo.x, x.lo.y, x.lo.z, x.lo.w};
    const uint32_t xh[4] = {x.hi.x, x.hi.y, x.hi.z, x.hi.w};
    int lo = 0, hi = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      uint32_t ql = r.q[w] & 0x0F0F0F0Fu, qh = (r.q[w] >> 4) & 0x0F0F0F0Fu;
      if constexpr (kQ5) {
        ql |= ((r.h[w] >> r.sub0) & 0x01010101u) << 4;
        qh |= ((r.h[w] >> (r.sub0 + 1)) & 0x01010101u) << 4;
      }
      lo = __dp4a(static_cast<int>(ql), static_cast<int>(xl[w]), lo);
      hi = __dp4a(static_cast<int>(qh), static_cast<int>(xh[w]), hi);
    }
    return (r.d0 * x.d_lo) * static_cast<float>(lo) - r.m0 * x.s_lo +
           (r.d1 * x.d_hi) * static_cast<float>(hi) - r.m1 * x.s_hi;
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
      x.d[j] = v.d[(e + 32 * j) >> v.shift];
    }
  }
  __device__ static float Dot(const Q6KWeights::Raw& r, const X& x) {
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      int sum = 0;
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const uint32_t lo = (k & 1) ? r.lo_b[s] : r.lo_a[s];
        const uint32_t q = ((k < 2 ? lo : lo >> 4) & 0x0F0F0F0Fu) |
                           (((r.hi[s] >> (2 * k)) & 0x03030303u) << 4);
        const uint32_t signed_q = __vsub4(q, 0x20202020u);  // each byte q - 32
        sum = __dp4a(static_cast<int>(signed_q), static_cast<int>(s == 0 ? x.q[k].x : x.q[k].y),
                     sum);
      }
      acc += (r.ds[k] * x.d[k]) * static_cast<float>(sum);
    }
    return acc;
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
    x.d = v.d[(32 * c) >> v.shift];
  }
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

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_DECODE_Q8_H_
