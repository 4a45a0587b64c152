// AVX2 activation conversions (matvec_internal.h), bit for bit the scalar
// ones of quantize_act.cc. Compiled with -mavx2 -mfma -mf16c; no sum here
// can be fused (each value is one product, rounded). Reached only after a
// CPUID check.
#include <cmath>
#include <cstring>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matvec_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sluice::kernels::internal {

#if defined(__x86_64__)

// ggml's AVX quantize_row_q8_0, bit for bit the scalar QuantizeBlock32 of
// quantize_act.cc: the maximum is order independent, x * (127 / amax) is one
// rounded product, _mm256_round_ps rounds half to even like nearbyint, and
// the saturating packs clamp like RoundToI8 (|x * id| <= 127 anyway).
void QuantizeRowQ8_0Avx2(const float* x, int64_t cols, void* out) {
  auto* b = static_cast<BlockQ8_0*>(out);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = 0; i < cols / 32; ++i, x += 32) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float max_scalar = _mm_cvtss_f32(m);
    const float d = max_scalar / 127.f;
    const float id = max_scalar != 0.f ? 127.f / max_scalar : 0.f;
    b[i].d = F32ToFp16(d);
    const __m256 mul = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], mul),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    const __m256i q01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i q23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q01, q23), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), bytes);
  }
}

// ggml's quantize_row_q8_K (the reference code, which x86 uses too), bit
// for bit ToQ8_K of quantize_act.cc: the largest magnitude is order
// independent, the first element reaching it gives the signed maximum,
// each value is one rounded product rounded half to even and clamped to
// 127, and d = 1 / iscale.
void QuantizeRowQ8_KAvx2(const float* x, int64_t cols, void* out) {
  auto* b = static_cast<BlockQ8_K*>(out);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 top = _mm256_set1_ps(127.f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = 0; i < cols / kQK; ++i, x += kQK) {
    __m256 amax8 = _mm256_setzero_ps();
    for (int j = 0; j < kQK; j += 8) {
      amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float amax = _mm_cvtss_f32(m);
    if (amax == 0.f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    int first = 0;
    while (std::fabs(x[first]) != amax) ++first;
    const float iscale = -127.f / x[first];
    const __m256 mul = _mm256_set1_ps(iscale);
    for (int j = 0; j < kQK; j += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 v = _mm256_round_ps(_mm256_mul_ps(mul, _mm256_loadu_ps(x + j + 8 * k)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[k] = _mm256_cvtps_epi32(_mm256_min_ps(v, top));
      }
      const __m256i bytes = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
          order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + j), bytes);
    }
    for (int g = 0; g < kQK / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b[i].qs[16 * g + j];
      b[i].bsums[g] = static_cast<int16_t>(sum);
    }
    b[i].d = 1.f / iscale;
  }
}

#else  // not x86-64: never called.

void QuantizeRowQ8_0Avx2(const float*, int64_t, void*) {}
void QuantizeRowQ8_KAvx2(const float*, int64_t, void*) {}

#endif  // defined(__x86_64__)

}  // namespace sluice::kernels::internal
