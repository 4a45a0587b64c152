// AVX2 multi-row and multi-token kernels (matvec_internal.h's VecDot4Fn,
// VecDot4x2Fn, VecDot8Fn). Every output is summed exactly as the type's
// one-row kernel in vec_dot_avx2.cc sums it (same integer sums, scales,
// accumulation order and final reduction), so results do not depend on
// which kernel computed a row. Compiled with -mavx2 -mfma -mf16c; reached
// only after a CPUID check. Tile loops carry unroll pragmas: without them
// GCC at -O2 kept some accumulator arrays in memory.
#include <cstring>
#include <type_traits>

#include "kernels/cpu/avx2_inline.h"
#include "kernels/cpu/blocks.h"
#include "kernels/cpu/matvec_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sluice::kernels::internal {

#if defined(__x86_64__)
namespace {

using avx2::BroadcastLaneMask;
using avx2::DotI8I8;
using avx2::H;
using avx2::HSum;
using avx2::KBlockScales;
using avx2::KHighBits;
using avx2::Load256;
using avx2::LoadKBlockScales;
using avx2::Q6KHalfScales;
using avx2::Q6KLows;
using avx2::Q6KOffset;
using avx2::Q6KQuarter;
using avx2::Q6KScalePicks;
using avx2::SpreadMask;
using avx2::UnpackKPair;

// kRows rows against kTok activation rows (a + t * act_bytes):
// out[t * out_stride + k].
template <int kRows, int kTok>
void F32Tile(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
             float* out, int64_t out_stride) {
  const float* x[kRows];
#pragma GCC unroll 8
  for (int k = 0; k < kRows; ++k) {
    x[k] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(w) + k * row_bytes);
  }
  const float* y[kTok];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) {
    y[t] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(a) + t * act_bytes);
  }
  __m256 acc[kTok][kRows];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) {
#pragma GCC unroll 8
    for (int k = 0; k < kRows; ++k) acc[t][k] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 yv[kTok];
#pragma GCC unroll 2
    for (int t = 0; t < kTok; ++t) yv[t] = _mm256_loadu_ps(y[t] + i);
#pragma GCC unroll 8
    for (int k = 0; k < kRows; ++k) {
      const __m256 xv = _mm256_loadu_ps(x[k] + i);
#pragma GCC unroll 2
      for (int t = 0; t < kTok; ++t) acc[t][k] = _mm256_fmadd_ps(xv, yv[t], acc[t][k]);
    }
  }
  for (int t = 0; t < kTok; ++t) {
    for (int k = 0; k < kRows; ++k) {
      float sum = HSum(acc[t][k]);
      for (int64_t j = i; j < n; ++j) sum += x[k][j] * y[t][j];
      out[t * out_stride + k] = sum;
    }
  }
}

void DotF32x4(const void* w, int64_t row_bytes, const void* a, int64_t n, float* out) {
  F32Tile<4, 1>(w, row_bytes, a, 0, n, out, 0);
}

// Eight rows: eight independent chains for decode.
void DotF32x8(const void* w, int64_t row_bytes, const void* a, int64_t n, float* out) {
  F32Tile<8, 1>(w, row_bytes, a, 0, n, out, 0);
}

void DotF32x4x2(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
                float* out, int64_t out_stride) {
  F32Tile<4, 2>(w, row_bytes, a, act_bytes, n, out, out_stride);
}

// The fp16 scales of block i of four Q8_0 rows, as f32 (exact).
__m128 RowScales4(const BlockQ8_0* const (&x)[4], int64_t i) {
  return _mm_cvtph_ps(_mm_setr_epi16(
      static_cast<int16_t>(x[0][i].d), static_cast<int16_t>(x[1][i].d),
      static_cast<int16_t>(x[2][i].d), static_cast<int16_t>(x[3][i].d), 0, 0, 0, 0));
}

// out[k] = lane k of d4 in all eight lanes.
void SpreadScales(__m128 d4, __m256 (&out)[4]) {
  const __m256 d8 = _mm256_insertf128_ps(_mm256_castps128_ps256(d4), d4, 1);
  out[0] = _mm256_permute_ps(d8, 0x00);
  out[1] = _mm256_permute_ps(d8, 0x55);
  out[2] = _mm256_permute_ps(d8, 0xAA);
  out[3] = _mm256_permute_ps(d8, 0xFF);
}

// Four Q8_0 rows against one activation row. Each row's arithmetic is
// exactly DotQ8_0's (same integer sums, scales, accumulation order and final
// reduction), so a row gives the same bits whichever kernel computes it; the
// gain is one loop and one activation load for four rows.
void DotQ8_0x4(const void* w, int64_t row_bytes, const void* a, int64_t n, float* out) {
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const auto* wb = static_cast<const uint8_t*>(w);
  const BlockQ8_0* x[4];
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) x[k] = reinterpret_cast<const BlockQ8_0*>(wb + k * row_bytes);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t i = 0; i < n / 32; ++i) {
    const __m256i av = Load256(y[i].qs);
    const float dy = H(y[i].d);
    __m256 dk[4];
    SpreadScales(_mm_mul_ps(RowScales4(x, i), _mm_set1_ps(dy)), dk);
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i p = DotI8I8(Load256(x[k][i].qs), av);
      acc[k] = _mm256_fmadd_ps(dk[k], _mm256_cvtepi32_ps(p), acc[k]);
    }
  }
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) out[k] = HSum(acc[k]);
}

// Four Q8_0 rows against two activation rows (prefill): y[t * y_stride + k]
// for row k and token t. Each output's arithmetic is DotQ8_0's; a weight
// block is loaded and made absolute once for both tokens.
void DotQ8_0x4x2(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes,
                 int64_t n, float* y, int64_t y_stride) {
  const auto* a0 = static_cast<const BlockQ8_0*>(a);
  const auto* a1 = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a) + act_bytes);
  const auto* wb = static_cast<const uint8_t*>(w);
  const BlockQ8_0* x[4];
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) x[k] = reinterpret_cast<const BlockQ8_0*>(wb + k * row_bytes);
  __m256 acc0[4], acc1[4];
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) acc0[k] = acc1[k] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < n / 32; ++i) {
    const __m256i v0 = Load256(a0[i].qs), v1 = Load256(a1[i].qs);
    const __m128 dw = RowScales4(x, i);
    __m256 d0[4], d1[4];
    SpreadScales(_mm_mul_ps(dw, _mm_set1_ps(H(a0[i].d))), d0);
    SpreadScales(_mm_mul_ps(dw, _mm_set1_ps(H(a1[i].d))), d1);
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i wv = Load256(x[k][i].qs);
      const __m256i wa = _mm256_sign_epi8(wv, wv);
      const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(v0, wv)), ones);
      const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(v1, wv)), ones);
      acc0[k] = _mm256_fmadd_ps(d0[k], _mm256_cvtepi32_ps(p0), acc0[k]);
      acc1[k] = _mm256_fmadd_ps(d1[k], _mm256_cvtepi32_ps(p1), acc1[k]);
    }
  }
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    y[k] = HSum(acc0[k]);
    y[y_stride + k] = HSum(acc1[k]);
  }
}

// kRows Q1_0 rows against kTok activation rows (act + t * act_bytes):
// out[t * out_stride + k]. Each output is computed exactly as DotQ1_0 does;
// the sign masks of a weight block are built once for all tokens, the
// shuffle constants once per call.
template <int kRows, int kTok>
void Q1_0Tile(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
              float* out, int64_t out_stride) {
  const __m256i spread[4] = {SpreadMask(0), SpreadMask(1), SpreadMask(2), SpreadMask(3)};
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  const int8_t* av[kTok];
  const float* ds[kTok];
  #pragma GCC unroll 4
  for (int t = 0; t < kTok; ++t) {
    const auto* at = static_cast<const uint8_t*>(a) + t * act_bytes;
    av[t] = ActQ8_0Values(at, n);
    ds[t] = reinterpret_cast<const float*>(ActQ8_0Scales(at, n));
  }
  __m256 acc[kTok][kRows];
  #pragma GCC unroll 4
  for (int t = 0; t < kTok; ++t) {
    #pragma GCC unroll 4
    for (int k = 0; k < kRows; ++k) acc[t][k] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < n / 128; ++i) {
    #pragma GCC unroll 4
    for (int k = 0; k < kRows; ++k) {
      const auto* x = reinterpret_cast<const BlockQ1_0*>(static_cast<const uint8_t*>(w) +
                                                         k * row_bytes) + i;
      const __m256i bits =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x->qs)));
      __m256i m[4];
      #pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        m[j] = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(bits, spread[j]), select),
                                 select);
      }
      const float neg_d = -H(x->d);
      #pragma GCC unroll 4
      for (int t = 0; t < kTok; ++t) {
        const int8_t* ab = av[t] + 128 * i;
        __m256i p[4];
        #pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m256i r = _mm256_sub_epi8(_mm256_xor_si256(Load256(ab + 32 * j), m[j]), m[j]);
          p[j] = _mm256_maddubs_epi16(ones8, r);
        }
        // The same lanes as DotQ1_0's hadd tree (per half: the sums of
        // sub-blocks 0..3 over that half), reduced in int16 first: a sum of
        // 16 values |a| <= 127 fits.
        const __m256i h = _mm256_madd_epi16(
            _mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3])),
            ones16);
        const __m128 d4 = _mm_mul_ps(_mm_loadu_ps(ds[t] + 4 * i), _mm_set1_ps(neg_d));
        acc[t][k] = _mm256_fmadd_ps(_mm256_set_m128(d4, d4), _mm256_cvtepi32_ps(h), acc[t][k]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int t = 0; t < kTok; ++t) {
    #pragma GCC unroll 4
    for (int k = 0; k < kRows; ++k) out[t * out_stride + k] = HSum(acc[t][k]);
  }
}

void DotQ1_0x4(const void* w, int64_t row_bytes, const void* a, int64_t n, float* out) {
  Q1_0Tile<4, 1>(w, row_bytes, a, 0, n, out, 0);
}

void DotQ1_0x4x2(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
                 float* out, int64_t out_stride) {
  Q1_0Tile<4, 2>(w, row_bytes, a, act_bytes, n, out, out_stride);
}

// One Q4_K / Q5_K row against kTok activation rows (a + t * act_bytes):
// out[t * out_stride]. The weight nibbles, high bits and scales of a block
// are unpacked once for all tokens; each output is computed exactly as
// DotQxK computes it.
template <bool kFiveBit, int kTok>
void QxKRowTile(const void* w, const void* a, int64_t act_bytes, int64_t n, float* out,
                int64_t out_stride) {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
  const auto* x = static_cast<const Block*>(w);
  const BlockQ8_K* y[kTok];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) {
    y[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a) + t * act_bytes);
  }
  __m256 acc[kTok], acc_min[kTok];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const KBlockScales ks = LoadKBlockScales(x[i].scales);
    const __m256i hbits = KHighBits<kFiveBit>(x[i]);
    __m256i isum[kTok];
#pragma GCC unroll 2
    for (int t = 0; t < kTok; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      __m256i lo, hi;
      UnpackKPair<kFiveBit>(x[i].qs, hbits, p, &lo, &hi);
      const __m256i slo = _mm256_shuffle_epi8(ks.scales, BroadcastLaneMask(2 * p));
      const __m256i shi = _mm256_shuffle_epi8(ks.scales, BroadcastLaneMask(2 * p + 1));
#pragma GCC unroll 2
      for (int t = 0; t < kTok; ++t) {
        const __m256i plo = _mm256_maddubs_epi16(lo, Load256(y[t][i].qs + 64 * p));
        const __m256i phi = _mm256_maddubs_epi16(hi, Load256(y[t][i].qs + 64 * p + 32));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(plo, slo));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(phi, shi));
      }
    }
    const float dw = H(x[i].d), dmin = H(x[i].dmin);
#pragma GCC unroll 2
    for (int t = 0; t < kTok; ++t) {
      const __m256i msum = _mm256_madd_epi16(Load256(y[t][i].bsums), ks.mins_pairs);
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * y[t][i].d), _mm256_cvtepi32_ps(isum[t]),
                               acc[t]);
      acc_min[t] = _mm256_fmadd_ps(_mm256_set1_ps(dmin * y[t][i].d), _mm256_cvtepi32_ps(msum),
                                   acc_min[t]);
    }
  }
  for (int t = 0; t < kTok; ++t) out[t * out_stride] = HSum(acc[t]) - HSum(acc_min[t]);
}

// One Q6_K row against kTok activation rows: out[t * out_stride], each
// computed exactly as DotQ6_K computes it, the 6-bit values and scales of a
// block built once for all tokens.
template <int kTok>
void Q6KRowTile(const void* w, const void* a, int64_t act_bytes, int64_t n, float* out,
                int64_t out_stride) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* y[kTok];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) {
    y[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a) + t * act_bytes);
  }
  __m256i pick[4];
  Q6KScalePicks(pick);
  __m256 acc[kTok];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
    const __m256i sc_all = _mm256_cvtepi8_epi16(sc8);
    __m256i isum[kTok];
#pragma GCC unroll 2
    for (int t = 0; t < kTok; ++t) isum[t] = Q6KOffset(y[t][i].bsums, sc_all);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i sc = Q6KHalfScales(sc_all, h);
      const __m256i qh = Load256(x[i].qh + 32 * h);
      __m256i lows[4];
      Q6KLows(x[i].ql + 64 * h, lows);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i qu = Q6KQuarter(lows[k], qh, k);
        const __m256i s16 = _mm256_shuffle_epi8(sc, pick[k]);
#pragma GCC unroll 2
        for (int t = 0; t < kTok; ++t) {
          const __m256i p = _mm256_maddubs_epi16(qu, Load256(y[t][i].qs + 128 * h + 32 * k));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, s16));
        }
      }
    }
    const float dw = H(x[i].d);
#pragma GCC unroll 2
    for (int t = 0; t < kTok; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * y[t][i].d), _mm256_cvtepi32_ps(isum[t]),
                               acc[t]);
    }
  }
  for (int t = 0; t < kTok; ++t) out[t * out_stride] = HSum(acc[t]);
}

void DotQ6_Kx4x2(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
                 float* out, int64_t out_stride) {
  for (int k = 0; k < 4; ++k) {
    Q6KRowTile<2>(static_cast<const uint8_t*>(w) + k * row_bytes, a, act_bytes, n, out + k,
                  out_stride);
  }
}

// Four rows, one token: the one-row kernel per row (the work per block
// dominates; nothing worth sharing without a second token).
template <GgmlType kType>
void RowsOneByOne(const void* w, int64_t row_bytes, const void* a, int64_t n, float* out) {
  static const VecDotFn dot = FindVecDotAvx2(kType);
  for (int k = 0; k < 4; ++k) out[k] = dot(static_cast<const uint8_t*>(w) + k * row_bytes, a, n);
}

template <bool kFiveBit>
void DotQxKx4x2(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
                float* out, int64_t out_stride) {
  for (int k = 0; k < 4; ++k) {
    QxKRowTile<kFiveBit, 2>(static_cast<const uint8_t*>(w) + k * row_bytes, a, act_bytes, n,
                            out + k, out_stride);
  }
}

}  // namespace

VecDot4Fn FindVecDot4Avx2(GgmlType wtype) {
  switch (wtype) {
    case GgmlType::kF32: return DotF32x4;
    case GgmlType::kQ8_0: return DotQ8_0x4;
    case GgmlType::kQ1_0: return DotQ1_0x4;
    case GgmlType::kQ4_K: return RowsOneByOne<GgmlType::kQ4_K>;
    case GgmlType::kQ5_K: return RowsOneByOne<GgmlType::kQ5_K>;
    case GgmlType::kQ6_K: return RowsOneByOne<GgmlType::kQ6_K>;
    default: return nullptr;
  }
}

VecDot8Fn FindVecDot8Avx2(GgmlType wtype) {
  return wtype == GgmlType::kF32 ? DotF32x8 : nullptr;
}

VecDot4x2Fn FindVecDot4x2Avx2(GgmlType wtype) {
  switch (wtype) {
    case GgmlType::kF32: return DotF32x4x2;
    case GgmlType::kQ8_0: return DotQ8_0x4x2;
    case GgmlType::kQ1_0: return DotQ1_0x4x2;
    case GgmlType::kQ4_K: return DotQxKx4x2<false>;
    case GgmlType::kQ5_K: return DotQxKx4x2<true>;
    case GgmlType::kQ6_K: return DotQ6_Kx4x2;
    default: return nullptr;
  }
}

#else  // not x86-64: no kernels at this level

VecDot4Fn FindVecDot4Avx2(GgmlType) { return nullptr; }
VecDot4x2Fn FindVecDot4x2Avx2(GgmlType) { return nullptr; }
VecDot8Fn FindVecDot8Avx2(GgmlType) { return nullptr; }

#endif  // defined(__x86_64__)

}  // namespace sluice::kernels::internal
