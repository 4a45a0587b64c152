// Small f32 vector operations of the forward pass (attention scores and
// values, the delta-net state update), with AVX2 versions chosen at run
// time that give the same bits as the portable ones: products and sums are
// separate roundings (never fused), and the sums keep the order below.
//
// "Lane order": a dot product of n elements accumulates element i into
// partial sum i % 8 over the first n - n % 8 elements, combines the partial
// sums as ((p0 + p4) + (p1 + p5)) + ((p2 + p6) + (p3 + p7)), then adds the
// serial sum of the remaining n % 8 products.
//
// Thread-safety: all functions are reentrant. Arrays must not overlap
// unless stated.
#ifndef SLUICE_KERNELS_CPU_F32_OPS_H_
#define SLUICE_KERNELS_CPU_F32_OPS_H_

#include <cstdint>

namespace sluice::kernels {

// sum_i a[i] * b[i] in lane order.
float DotLanes(const float* a, const float* b, int64_t n);

// y[i] += a * x[i].
void AxpyF32(float a, const float* x, float* y, int64_t n);

// row[i] *= s, then returns DotLanes(row, k, n).
float ScaleDotLanes(float s, float* row, const float* k, int64_t n);

// row[i] += a * k[i], then returns DotLanes(row, q, n).
float AxpyDotLanes(float a, const float* k, float* row, const float* q, int64_t n);

// out[j] = DotLanes(a, rows + j * stride, n) for j < n_rows.
void DotRowsLanes(const float* a, const float* rows, int64_t stride, int64_t n_rows,
                  int64_t n, float* out);

// out[i] += w[j] * rows[j * stride + i] for j = 0, 1, ... n_rows - 1 in turn
// (AxpyF32 row after row).
void AxpyRowsF32(const float* w, const float* rows, int64_t stride, int64_t n_rows,
                 int64_t n, float* out);

// One delta-rule step on an n x n state (row i at s + i * n): for each
// row i in turn, row *= decay; delta = (v[i] - ScaleDot) * beta, the dot
// taken with k; row += delta * k; o[i] = the dot of the new row with q
// (ScaleDotLanes then AxpyDotLanes on every row).
void DeltaRuleStep(float* s, int64_t n, const float* q, const float* k, const float* v,
                   float decay, float beta, float* o);

namespace internal {

// The portable versions, for tests.
float DotLanesScalar(const float* a, const float* b, int64_t n);
void AxpyF32Scalar(float a, const float* x, float* y, int64_t n);
float ScaleDotLanesScalar(float s, float* row, const float* k, int64_t n);
float AxpyDotLanesScalar(float a, const float* k, float* row, const float* q, int64_t n);

// The AVX2 versions; call only where the CPU has AVX2.
float DotLanesAvx2(const float* a, const float* b, int64_t n);
void AxpyF32Avx2(float a, const float* x, float* y, int64_t n);
float ScaleDotLanesAvx2(float s, float* row, const float* k, int64_t n);
float AxpyDotLanesAvx2(float a, const float* k, float* row, const float* q, int64_t n);
void DotRowsLanesAvx2(const float* a, const float* rows, int64_t stride, int64_t n_rows,
                      int64_t n, float* out);
void AxpyRowsF32Avx2(const float* w, const float* rows, int64_t stride, int64_t n_rows,
                     int64_t n, float* out);
void DeltaRuleStepAvx2(float* s, int64_t n, const float* q, const float* k, const float* v,
                       float decay, float beta, float* o);

}  // namespace internal
}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_CPU_F32_OPS_H_
