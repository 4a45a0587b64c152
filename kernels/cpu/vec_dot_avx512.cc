// AVX-512 (F + BW + VL + VNNI) dot-product kernels for the types that
// dominate the target models: F32, Q8_0 and Q1_0. Other types run their
// AVX2 kernels on AVX-512 machines. This file alone is compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni; it is entered only after
// DetectIsa() saw those features.
#include <cstring>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/matvec_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sluice::kernels::internal {

#if defined(__x86_64__)
namespace {

inline float H(uint16_t h) { return _cvtsh_ss(h); }

__m512i Load512(const void* p) { return _mm512_loadu_si512(p); }

// Two fp16 scales as 16 floats: 8 x a then 8 x b.
__m512 TwoScales(uint16_t a, uint16_t b) {
  return _mm512_cvtph_ps(
      _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(b)), _mm_set1_epi16(static_cast<int16_t>(a))));
}

float DotF32(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const float*>(w);
  const auto* y = static_cast<const float*>(a);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), acc1);
  }
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += x[i] * y[i];
  return sum;
}

// Two Q8_0 blocks (64 elements) per step against the contiguous copy of
// the activation; one scale pair per step.
float DotQ8_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const int8_t* av = ActQ8_0Values(a, n);
  const uint8_t* ds = ActQ8_0Scales(a, n);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  __m512 acc = _mm512_setzero_ps();
  const int64_t nb = n / 32;
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m512i wx = _mm512_inserti64x4(
        _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i + 1].qs)), 1);
    const __m512i ay = Load512(av + 32 * i);
    // |w| times a with w's sign moved onto a (w = -128 stays 128 unsigned).
    const __mmask64 neg = _mm512_movepi8_mask(wx);
    const __m512i sa = _mm512_mask_sub_epi8(ay, neg, zero, ay);
    const __m512i isum = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(wx), sa);
    const __m512 da = _mm512_permutexvar_ps(
        pair, _mm512_castpd_ps(_mm512_zextpd128_pd512(
                  _mm_load_sd(reinterpret_cast<const double*>(ds + 4 * i)))));
    const __m512 d = _mm512_mul_ps(TwoScales(x[i].d, x[i + 1].d), da);
    acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc);
  }
  float sum = _mm512_reduce_add_ps(acc);
  for (; i < nb; ++i) {
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += x[i].qs[j] * av[32 * i + j];
    float da;
    std::memcpy(&da, ds + 4 * i, 4);
    sum += static_cast<float>(isum) * (H(x[i].d) * da);
  }
  return sum;
}

// A 128-element Q1_0 block = four Q8_0 activation blocks, read from the
// contiguous copy of the activation: two 64-byte steps, the weight bits used
// directly as the byte mask that negates `a` (clear bit = weight -d), VNNI
// sums of 4, and one scale vector per step.
float DotQ1_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ1_0*>(w);
  const int8_t* av = ActQ8_0Values(a, n);
  const uint8_t* ds = ActQ8_0Scales(a, n);
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i zero = _mm512_setzero_si512();
  // Lanes 0-7 take scale 0, lanes 8-15 scale 1 (and 2, 3 for the second).
  const __m512i first = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(2));
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / 128; ++i) {
    uint64_t bits[2];
    std::memcpy(bits, x[i].qs, 16);
    const __m512i a0 = Load512(av + 128 * i);
    const __m512i a1 = Load512(av + 128 * i + 64);
    const __m512i r0 = _mm512_mask_sub_epi8(a0, static_cast<__mmask64>(~bits[0]), zero, a0);
    const __m512i r1 = _mm512_mask_sub_epi8(a1, static_cast<__mmask64>(~bits[1]), zero, a1);
    const __m128 d4 = _mm_mul_ps(_mm_loadu_ps(reinterpret_cast<const float*>(ds + 16 * i)),
                                 _mm_set1_ps(H(x[i].d)));
    const __m512 d16 = _mm512_zextps128_ps512(d4);
    acc0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(first, d16),
                           _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, ones, r0)), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(second, d16),
                           _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, ones, r1)), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

}  // namespace

VecDotFn FindVecDotAvx512(GgmlType wtype) {
  switch (wtype) {
    case GgmlType::kF32: return DotF32;
    case GgmlType::kQ8_0: return DotQ8_0;
    case GgmlType::kQ1_0: return DotQ1_0;
    default: return nullptr;
  }
}

#else  // not x86-64: no kernels at this level

VecDotFn FindVecDotAvx512(GgmlType) { return nullptr; }

#endif  // defined(__x86_64__)

}  // namespace sluice::kernels::internal
