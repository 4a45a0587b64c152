// Compiled with -mavx2 -mf16c (no FMA: products and sums round separately,
// as in the portable code). Elsewhere than x86-64 these are never called
// (the CPUID check fails) and are not built.
#include "kernels/cpu/half_acc.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace sluice::kernels::internal {
namespace {

constexpr float kHalfLimit = 65520.0f;

inline __m256 Half(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// Rounds acc when every value fits (peak: the lanes' maxima of |acc|).
bool Finish(float* acc, int64_t n, __m256 peak8, float peak) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, peak8);
  for (float l : lanes) peak = std::max(peak, l);
  if (!(peak < kHalfLimit)) return false;
  RoundToHalfF16c(acc, n);
  return true;
}

}  // namespace

void RoundToHalfF16c(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, Half(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) x[i] = RoundToHalfScalar(x[i]);
}

bool ScaleHalfAccF16c(float* acc, int64_t n, float s) {
  const __m256 vs = _mm256_set1_ps(s), abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 peak8 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 t = _mm256_mul_ps(_mm256_loadu_ps(acc + i), vs);
    _mm256_storeu_ps(acc + i, t);
    peak8 = _mm256_max_ps(peak8, _mm256_and_ps(t, abs_mask));
  }
  float peak = 0;
  for (; i < n; ++i) {
    acc[i] = acc[i] * s;
    peak = std::max(peak, std::fabs(acc[i]));
  }
  return Finish(acc, n, peak8, peak);
}

bool MadHalfAccF16c(float* acc, const float* x, int64_t n, float a) {
  const __m256 va = _mm256_set1_ps(a), abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 peak8 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 prod = _mm256_mul_ps(_mm256_loadu_ps(x + i), va);
    const __m256 t = _mm256_add_ps(_mm256_loadu_ps(acc + i), prod);
    _mm256_storeu_ps(acc + i, t);
    peak8 = _mm256_max_ps(peak8, _mm256_and_ps(t, abs_mask));
  }
  float peak = 0;
  for (; i < n; ++i) {
    const float prod = x[i] * a;
    acc[i] = acc[i] + prod;
    peak = std::max(peak, std::fabs(acc[i]));
  }
  return Finish(acc, n, peak8, peak);
}

}  // namespace sluice::kernels::internal
#endif  // defined(__x86_64__)
