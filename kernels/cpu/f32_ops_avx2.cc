// AVX2 versions of f32_ops.h. Compiled with -mavx2 but without -mfma, so
// the compiler cannot fuse a product into a sum: each lane rounds exactly
// as the portable code does, and one 8-float vector holds the eight
// partial sums of the lane order.
#include "kernels/cpu/f32_ops.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sluice::kernels::internal {

#if defined(__x86_64__)
namespace {

// ((p0 + p4) + (p1 + p5)) + ((p2 + p6) + (p3 + p7)) + tail.
float Combine(__m256 p, float tail) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1));
  const __m128 h = _mm_hadd_ps(s, s);  // (s0 + s1), (s2 + s3)
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h))) + tail;
}

}  // namespace

float DotLanesAvx2(const float* a, const float* b, int64_t n) {
  __m256 p = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    p = _mm256_add_ps(p, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return Combine(p, tail);
}

void AxpyF32Avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i),
                                          _mm256_mul_ps(av, _mm256_loadu_ps(x + i))));
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

float ScaleDotLanesAvx2(float s, float* row, const float* k, int64_t n) {
  const __m256 sv = _mm256_set1_ps(s);
  __m256 p = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(row + i), sv);
    _mm256_storeu_ps(row + i, r);
    p = _mm256_add_ps(p, _mm256_mul_ps(r, _mm256_loadu_ps(k + i)));
  }
  float tail = 0;
  for (; i < n; ++i) {
    row[i] *= s;
    tail += row[i] * k[i];
  }
  return Combine(p, tail);
}

float AxpyDotLanesAvx2(float a, const float* k, float* row, const float* q, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  __m256 p = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 r = _mm256_add_ps(_mm256_loadu_ps(row + i),
                                   _mm256_mul_ps(av, _mm256_loadu_ps(k + i)));
    _mm256_storeu_ps(row + i, r);
    p = _mm256_add_ps(p, _mm256_mul_ps(r, _mm256_loadu_ps(q + i)));
  }
  float tail = 0;
  for (; i < n; ++i) {
    row[i] += a * k[i];
    tail += row[i] * q[i];
  }
  return Combine(p, tail);
}

#else  // not x86-64: never called (no AVX2); the portable code stands in.

float DotLanesAvx2(const float* a, const float* b, int64_t n) { return DotLanesScalar(a, b, n); }
void AxpyF32Avx2(float a, const float* x, float* y, int64_t n) { AxpyF32Scalar(a, x, y, n); }
float ScaleDotLanesAvx2(float s, float* row, const float* k, int64_t n) {
  return ScaleDotLanesScalar(s, row, k, n);
}
float AxpyDotLanesAvx2(float a, const float* k, float* row, const float* q, int64_t n) {
  return AxpyDotLanesScalar(a, k, row, q, n);
}

#endif  // defined(__x86_64__)

// The row loops are built from the primitives above on every target.
void DotRowsLanesAvx2(const float* a, const float* rows, int64_t stride, int64_t n_rows,
                      int64_t n, float* out) {
  for (int64_t j = 0; j < n_rows; ++j) out[j] = DotLanesAvx2(a, rows + j * stride, n);
}

void AxpyRowsF32Avx2(const float* w, const float* rows, int64_t stride, int64_t n_rows,
                     int64_t n, float* out) {
  for (int64_t j = 0; j < n_rows; ++j) AxpyF32Avx2(w[j], rows + j * stride, out, n);
}

void DeltaRuleStepAvx2(float* s, int64_t n, const float* q, const float* k, const float* v,
                       float decay, float beta, float* o) {
  for (int64_t i = 0; i < n; ++i) {
    float* row = s + i * n;
    const float delta = (v[i] - ScaleDotLanesAvx2(decay, row, k, n)) * beta;
    o[i] = AxpyDotLanesAvx2(delta, k, row, q, n);
  }
}

}  // namespace sluice::kernels::internal
