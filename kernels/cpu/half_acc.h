// A value accumulator kept in half precision, as ggml's CPU flash attention
// keeps its V sum for half-precision values (model/mla.cc computes
// deepseek2's attention this way to match the llama.cpp goldens).
//
// Each update computes in f32 (multiply, then add: nothing fused) and rounds
// every result to the nearest half value, ties to even, kept as a float:
// bit for bit a conversion to _Float16 and back. An update whose results do
// not all fit in half precision (|t| >= 65520, which ggml would turn into
// infinity) stores them unrounded and returns false; the caller then goes
// on in f32. F16C and AVX2 where the CPU has them (after a CPUID check), the
// same bits from portable code elsewhere.
#ifndef SLUICE_KERNELS_CPU_HALF_ACC_H_
#define SLUICE_KERNELS_CPU_HALF_ACC_H_

#include <cstdint>

namespace sluice::kernels {

// x[i] = half(x[i]).
void RoundToHalf(float* x, int64_t n);

// acc[i] = half(acc[i] * s). False (acc[i] = acc[i] * s) on overflow.
bool ScaleHalfAcc(float* acc, int64_t n, float s);

// acc[i] = half(acc[i] + x[i] * a). False (unrounded) on overflow.
bool MadHalfAcc(float* acc, const float* x, int64_t n, float a);

namespace internal {
// The F16C/AVX2 versions (half_acc_f16c.cc) and the portable ones.
void RoundToHalfF16c(float* x, int64_t n);
bool ScaleHalfAccF16c(float* acc, int64_t n, float s);
bool MadHalfAccF16c(float* acc, const float* x, int64_t n, float a);
float RoundToHalfScalar(float x);
}  // namespace internal

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_CPU_HALF_ACC_H_
