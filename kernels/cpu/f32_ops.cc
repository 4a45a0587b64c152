#include "kernels/cpu/f32_ops.h"

namespace sluice::kernels {
namespace internal {
namespace {

float Combine(const float (&p)[8], float tail) {
  return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7])) + tail;
}

}  // namespace

float DotLanesScalar(const float* a, const float* b, int64_t n) {
  float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) p[l] += a[i + l] * b[i + l];
  }
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return Combine(p, tail);
}

void AxpyF32Scalar(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

float ScaleDotLanesScalar(float s, float* row, const float* k, int64_t n) {
  for (int64_t i = 0; i < n; ++i) row[i] *= s;
  return DotLanesScalar(row, k, n);
}

float AxpyDotLanesScalar(float a, const float* k, float* row, const float* q, int64_t n) {
  AxpyF32Scalar(a, k, row, n);
  return DotLanesScalar(row, q, n);
}

namespace {

bool HasAvx2() {
#if defined(__x86_64__)
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return avx2;
#else
  return false;
#endif
}

}  // namespace
}  // namespace internal

float DotLanes(const float* a, const float* b, int64_t n) {
  return internal::HasAvx2() ? internal::DotLanesAvx2(a, b, n)
                             : internal::DotLanesScalar(a, b, n);
}

void AxpyF32(float a, const float* x, float* y, int64_t n) {
  if (internal::HasAvx2()) {
    internal::AxpyF32Avx2(a, x, y, n);
  } else {
    internal::AxpyF32Scalar(a, x, y, n);
  }
}

float ScaleDotLanes(float s, float* row, const float* k, int64_t n) {
  return internal::HasAvx2() ? internal::ScaleDotLanesAvx2(s, row, k, n)
                             : internal::ScaleDotLanesScalar(s, row, k, n);
}

float AxpyDotLanes(float a, const float* k, float* row, const float* q, int64_t n) {
  return internal::HasAvx2() ? internal::AxpyDotLanesAvx2(a, k, row, q, n)
                             : internal::AxpyDotLanesScalar(a, k, row, q, n);
}

void DotRowsLanes(const float* a, const float* rows, int64_t stride, int64_t n_rows,
                  int64_t n, float* out) {
  if (internal::HasAvx2()) {
    internal::DotRowsLanesAvx2(a, rows, stride, n_rows, n, out);
    return;
  }
  for (int64_t j = 0; j < n_rows; ++j) {
    out[j] = internal::DotLanesScalar(a, rows + j * stride, n);
  }
}

void AxpyRowsF32(const float* w, const float* rows, int64_t stride, int64_t n_rows,
                 int64_t n, float* out) {
  if (internal::HasAvx2()) {
    internal::AxpyRowsF32Avx2(w, rows, stride, n_rows, n, out);
    return;
  }
  for (int64_t j = 0; j < n_rows; ++j) {
    internal::AxpyF32Scalar(w[j], rows + j * stride, out, n);
  }
}

void DeltaRuleStep(float* s, int64_t n, const float* q, const float* k, const float* v,
                   float decay, float beta, float* o) {
  if (internal::HasAvx2()) {
    internal::DeltaRuleStepAvx2(s, n, q, k, v, decay, beta, o);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float* row = s + i * n;
    const float delta = (v[i] - internal::ScaleDotLanesScalar(decay, row, k, n)) * beta;
    o[i] = internal::AxpyDotLanesScalar(delta, k, row, q, n);
  }
}

}  // namespace sluice::kernels
