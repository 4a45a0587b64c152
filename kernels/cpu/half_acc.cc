#include "kernels/cpu/half_acc.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sluice::kernels {
namespace internal {

float RoundToHalfScalar(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t sign = u & 0x80000000u;
  uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return x;  // inf, nan
  if (a >= 0x38800000u) {          // a normal half: keep 10 mantissa bits
    a += 0x0FFFu + ((a >> 13) & 1u);
    a &= ~0x1FFFu;
    if (a > 0x477FE000u) a = 0x7F800000u;  // above 65504
  } else {                         // a subnormal half: multiples of 2^-24
    float f;
    std::memcpy(&f, &a, 4);
    f = (f + 0.5f) - 0.5f;
    std::memcpy(&a, &f, 4);
  }
  u = sign | a;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

}  // namespace internal

namespace {

// Results below this round to a finite half (65504 and up to the tie).
constexpr float kHalfLimit = 65520.0f;

#if defined(__x86_64__)
bool HasF16c() {
  static const bool f16c = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("f16c") != 0;
  }();
  return f16c;
}
#endif

// Rounds acc when every value fits; the update's verdict.
bool Finish(float* acc, int64_t n, float peak) {
  if (!(peak < kHalfLimit)) return false;
  for (int64_t i = 0; i < n; ++i) acc[i] = internal::RoundToHalfScalar(acc[i]);
  return true;
}

}  // namespace

void RoundToHalf(float* x, int64_t n) {
#if defined(__x86_64__)
  if (HasF16c()) return internal::RoundToHalfF16c(x, n);
#endif
  for (int64_t i = 0; i < n; ++i) x[i] = internal::RoundToHalfScalar(x[i]);
}

bool ScaleHalfAcc(float* acc, int64_t n, float s) {
#if defined(__x86_64__)
  if (HasF16c()) return internal::ScaleHalfAccF16c(acc, n, s);
#endif
  float peak = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc[i] = acc[i] * s;
    peak = std::max(peak, std::fabs(acc[i]));
  }
  return Finish(acc, n, peak);
}

bool MadHalfAcc(float* acc, const float* x, int64_t n, float a) {
#if defined(__x86_64__)
  if (HasF16c()) return internal::MadHalfAccF16c(acc, x, n, a);
#endif
  float peak = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float prod = x[i] * a;
    acc[i] = acc[i] + prod;
    peak = std::max(peak, std::fabs(acc[i]));
  }
  return Finish(acc, n, peak);
}

}  // namespace sluice::kernels
