// AVX2 + FMA + F16C dot-product kernels. This file alone is compiled with
// -mavx2 -mfma -mf16c; callers reach it only after DetectIsa() saw those
// features, so nothing here runs on an older CPU.
//
// Integer parts are exact (as in the scalar kernels); float accumulation
// runs in 8 lanes and is reduced at the end, so results differ from the
// scalar kernels only by float summation order.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/avx2_inline.h"
#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matvec_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sluice::kernels::internal {

#if defined(__x86_64__)
namespace {

using avx2::BroadcastLaneMask;
using avx2::DotI8I8;
using avx2::DotU8I8;
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

// F32 weights: one 8-lane accumulator per (row, token); the multi-row
// kernels keep several rows' chains in flight instead, and every kernel sums
// each output identically.
float DotF32(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const float*>(w);
  const auto* y = static_cast<const float*>(a);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
  }
  float sum = HSum(acc);
  for (; i < n; ++i) sum += x[i] * y[i];
  return sum;
}

template <bool kBf16>
float DotHalf(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* af = static_cast<const float*>(a);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  auto load = [&](int64_t k) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 2 * k));
    if constexpr (kBf16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  };
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load(i), _mm256_loadu_ps(af + i), acc0);
    acc1 = _mm256_fmadd_ps(load(i + 8), _mm256_loadu_ps(af + i + 8), acc1);
  }
  float sum = HSum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, wb + 2 * i, 2);
    sum += (kBf16 ? Bf16ToF32(h) : Fp16ToF32(h)) * af[i];
  }
  return sum;
}

float DotQ8_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 32; ++i) {
    const __m256i p = DotI8I8(Load256(x[i].qs), Load256(y[i].qs));
    const __m256 d = _mm256_set1_ps(H(x[i].d) * H(y[i].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
  }
  return HSum(acc);
}

// Sum over 32 elements of -(+-a) as 8 int32 lanes. `bits` holds the whole
// 16-byte bit field of a Q1_0 block in both halves; `spread` picks the 4
// bytes of this sub-block (one per 8 elements). (a ^ m) - m negates a where
// m = 0xFF (bit set), so the sign is folded into the block scale instead.
__m256i NegSignedSum(__m256i bits, __m256i spread, const int8_t* a) {
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i m =
      _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(bits, spread), select), select);
  const __m256i r = _mm256_sub_epi8(_mm256_xor_si256(Load256(a), m), m);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), r), _mm256_set1_epi16(1));
}

// A 128-element Q1_0 block spans four Q8_0 activation blocks, read from
// the contiguous copy of the activation. The four integer sums are reduced
// together (hadd) so one multiply-add with the vector of the four f32
// activation scales handles the whole block.
float DotQ1_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ1_0*>(w);
  const int8_t* av = ActQ8_0Values(a, n);
  const auto* ds = reinterpret_cast<const float*>(ActQ8_0Scales(a, n));
  const __m256i spread[4] = {SpreadMask(0), SpreadMask(1), SpreadMask(2), SpreadMask(3)};
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 128; ++i) {
    const int8_t* ab = av + 128 * i;
    const __m256i bits = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].qs)));
    const __m256i p0 = NegSignedSum(bits, spread[0], ab);
    const __m256i p1 = NegSignedSum(bits, spread[1], ab + 32);
    const __m256i p2 = NegSignedSum(bits, spread[2], ab + 64);
    const __m256i p3 = NegSignedSum(bits, spread[3], ab + 96);
    // Per 128-bit half: [sum p0, sum p1, sum p2, sum p3] of that half.
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    const __m128 d4 = _mm_mul_ps(_mm_loadu_ps(ds + 4 * i), _mm_set1_ps(-H(x[i].d)));
    acc = _mm256_fmadd_ps(_mm256_set_m128(d4, d4), _mm256_cvtepi32_ps(h), acc);
  }
  return HSum(acc);
}

// 32 nibbles (16 bytes, low nibbles = elements 0..15, high = 16..31) mapped
// through a 16-entry signed table.
__m256i NibblesThrough(const uint8_t* qs, __m256i table) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_shuffle_epi8(table, _mm256_and_si256(both, _mm256_set1_epi8(0x0F)));
}

__m256i Table16(const int8_t (&levels)[16]) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(levels));
  return _mm256_set_m128i(t, t);
}

// Q4_0, IQ4_NL and MXFP4 against Q8_0: a nibble looked up in a table of
// levels (|level| <= 127), one scale per 32.
template <typename Block, float (*kScale)(const Block&)>
float DotNibbleTable(const void* w, const void* a, int64_t n, const int8_t (&levels)[16]) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const __m256i table = Table16(levels);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 32; ++i) {
    const __m256i p = DotI8I8(NibblesThrough(x[i].qs, table), Load256(y[i].qs));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(kScale(x[i]) * H(y[i].d)), _mm256_cvtepi32_ps(p), acc);
  }
  return HSum(acc);
}

constexpr int8_t kQ4_0Levels[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

float HalfScale(const BlockQ4_0& b) { return H(b.d); }
float Iq4NlScale(const BlockIq4Nl& b) { return H(b.d); }
// 2^(e-128): the block scale halved for the doubled FP4 levels (e >= 2;
// e < 2 are subnormal scales, built from bits as in the dequantizer).
float Mxfp4Scale(const BlockMxfp4& b) {
  const uint32_t bits = b.e < 2 ? (0x00200000u << b.e) : (static_cast<uint32_t>(b.e) - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float DotQ4_0(const void* w, const void* a, int64_t n) {
  return DotNibbleTable<BlockQ4_0, HalfScale>(w, a, n, kQ4_0Levels);
}
float DotIq4Nl(const void* w, const void* a, int64_t n) {
  return DotNibbleTable<BlockIq4Nl, Iq4NlScale>(w, a, n, kIq4NlLevels);
}
float DotMxfp4(const void* w, const void* a, int64_t n) {
  return DotNibbleTable<BlockMxfp4, Mxfp4Scale>(w, a, n, kFp4Levels);
}

// Q4_K / Q5_K: per super-block, 8 sub-blocks of 32 with 6-bit scale/min.
// The min term sum_s min[s] * (activation sum of sub-block s) comes from
// the Q8_K block sums in one multiply-add.
template <bool kFiveBit>
float DotQxK(const void* w, const void* a, int64_t n) {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  __m256i lane_masks[8];
  for (int s = 0; s < 8; ++s) lane_masks[s] = BroadcastLaneMask(s);
  __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const KBlockScales ks = LoadKBlockScales(x[i].scales);
    const __m256i msum = _mm256_madd_epi16(Load256(y[i].bsums), ks.mins_pairs);
    const __m256i hbits = KHighBits<kFiveBit>(x[i]);
    __m256i isum = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      __m256i lo, hi;
      UnpackKPair<kFiveBit>(x[i].qs, hbits, p, &lo, &hi);
      const __m256i plo = _mm256_maddubs_epi16(lo, Load256(y[i].qs + 64 * p));
      const __m256i phi = _mm256_maddubs_epi16(hi, Load256(y[i].qs + 64 * p + 32));
      const __m256i slo = _mm256_shuffle_epi8(ks.scales, lane_masks[2 * p]);
      const __m256i shi = _mm256_shuffle_epi8(ks.scales, lane_masks[2 * p + 1]);
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(plo, slo));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(phi, shi));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(H(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
    acc_min = _mm256_fmadd_ps(_mm256_set1_ps(H(x[i].dmin) * y[i].d), _mm256_cvtepi32_ps(msum),
                              acc_min);
  }
  return HSum(acc) - HSum(acc_min);
}

// Q6_K: q + 32 is unsigned for maddubs; the 32 * a it adds is taken off
// once per block through the Q8_K block sums.
float DotQ6_K(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  __m256i pick[4];
  Q6KScalePicks(pick);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
    const __m256i sc_all = _mm256_cvtepi8_epi16(sc8);  // scale g in lane g
    __m256i isum = Q6KOffset(y[i].bsums, sc_all);
    for (int h = 0; h < 2; ++h) {
      const __m256i sc = Q6KHalfScales(sc_all, h);
      const __m256i qh = Load256(x[i].qh + 32 * h);
      __m256i lows[4];
      Q6KLows(x[i].ql + 64 * h, lows);
      for (int k = 0; k < 4; ++k) {
        const __m256i qu = Q6KQuarter(lows[k], qh, k);
        const __m256i p = _mm256_maddubs_epi16(qu, Load256(y[i].qs + 128 * h + 32 * k));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc, pick[k])));
      }
    }
    const float d = H(x[i].d) * y[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
  }
  return HSum(acc);
}

}  // namespace

float DotF32Avx2(const float* a, const float* b, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k),
                               acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
  }
  float sum = HSum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

VecDotFn FindVecDotAvx2(GgmlType wtype) {
  switch (wtype) {
    case GgmlType::kF32: return DotF32;
    case GgmlType::kF16: return DotHalf<false>;
    case GgmlType::kBF16: return DotHalf<true>;
    case GgmlType::kQ8_0: return DotQ8_0;
    case GgmlType::kQ1_0: return DotQ1_0;
    case GgmlType::kQ4_0: return DotQ4_0;
    case GgmlType::kIQ4_NL: return DotIq4Nl;
    case GgmlType::kMXFP4: return DotMxfp4;
    case GgmlType::kQ4_K: return DotQxK<false>;
    case GgmlType::kQ5_K: return DotQxK<true>;
    case GgmlType::kQ6_K: return DotQ6_K;
    default: return nullptr;
  }
}

#else  // not x86-64: no kernels at this level

VecDotFn FindVecDotAvx2(GgmlType) { return nullptr; }
float DotF32Avx2(const float* a, const float* b, int64_t n) { return DotF32Scalar(a, b, n); }

#endif  // defined(__x86_64__)

}  // namespace sluice::kernels::internal
