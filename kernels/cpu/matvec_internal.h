// Building blocks of MatMul (internal to kernels/cpu; tests and benchmarks
// use them to pin an instruction set).
//
// A weight row is multiplied with an activation row that has first been
// converted to the weight type's partner format (ActFormat). A VecDot kernel
// takes one weight row and one converted activation row.
#ifndef SLUICE_KERNELS_CPU_MATVEC_INTERNAL_H_
#define SLUICE_KERNELS_CPU_MATVEC_INTERNAL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "base/thread_pool.h"
#include "format/ggml_type.h"

namespace sluice::kernels::internal {

enum class Isa { kScalar, kAvx2, kAvx512 };

// The best instruction set this CPU supports (and this build has code for):
// kAvx512 needs AVX-512 F, BW, VL and VNNI (plus AVX2, FMA, F16C); kAvx2 needs
// AVX2, FMA and F16C.
Isa DetectIsa();
// True if kernels for `isa` may run on this CPU.
bool IsaSupported(Isa isa);
const char* IsaName(Isa isa);

// What an activation row is converted to before the dot products:
//   kF32  - unchanged f32;
//   kF16R / kBf16R - f32 values rounded to fp16 / bf16 (stored as f32,
//          which is exact) so kernels need not convert x per weight row;
//   kQ8_0 / kQ8_1 / kQ8_K - ggml's 8-bit activation blocks. A kQ8_0 row is
//          followed by the same data laid out for wide vectors: the cols
//          int8 values contiguous, then one f32 scale per block (unaligned).
enum class ActFormat { kF32, kF16R, kBf16R, kQ8_0, kQ8_1, kQ8_K };

// The wide-vector copy inside a kQ8_0 activation row of `cols` elements.
inline const int8_t* ActQ8_0Values(const void* act, int64_t cols) {
  return static_cast<const int8_t*>(act) + cols / 32 * 34;
}
inline const uint8_t* ActQ8_0Scales(const void* act, int64_t cols) {
  return reinterpret_cast<const uint8_t*>(ActQ8_0Values(act, cols) + cols);
}

// The partner format of weight type `wtype` (as in ggml's vec_dot_type).
// Precondition: IsMatMulSupported(wtype).
ActFormat ActFormatFor(GgmlType wtype);

// Bytes of one converted activation row of `cols` elements. Precondition:
// cols is a multiple of the format's block (32, or 256 for kQ8_K).
int64_t ActRowBytes(ActFormat format, int64_t cols);
int ActBlock(ActFormat format);

// Converts x[0..cols) into `out` (ActRowBytes(format, cols) bytes), exactly
// as ggml's x86 CPU backend does (quantize_row_q8_0 / q8_1 AVX path,
// quantize_row_q8_K reference path, fp16 / bf16 round to nearest even).
void ConvertActivation(ActFormat format, const float* x, int64_t cols, void* out);

// y = <weight row, converted activation row> over `cols` elements.
using VecDotFn = float (*)(const void* w, const void* act, int64_t cols);

// A dedicated kernel for `wtype` on `isa`, or nullptr: then MatMul decodes
// the weight row to f32 (DequantizeRow) and dots it with the activation row
// decoded back to f32, which gives the same activation rounding.
VecDotFn FindVecDot(GgmlType wtype, Isa isa);

// Four weight rows (row r at w + r * row_bytes) against one activation row:
// out[r] is bit for bit what the type's VecDotFn gives for row r.
using VecDot4Fn = void (*)(const void* w, int64_t row_bytes, const void* act,
                           int64_t cols, float* out);

// The four-row kernel for wtype on isa, or nullptr (use the VecDotFn).
VecDot4Fn FindVecDot4(GgmlType wtype, Isa isa);

// Four weight rows against two activation rows (act, act + act_bytes):
// y[t * y_stride + r] for token t, row r, each bit for bit the VecDotFn's.
using VecDot4x2Fn = void (*)(const void* w, int64_t row_bytes, const void* act,
                             int64_t act_bytes, int64_t cols, float* y, int64_t y_stride);

// The four-row, two-token kernel for wtype on isa, or nullptr. Only
// offered where FindVecDot4 offers one.
VecDot4x2Fn FindVecDot4x2(GgmlType wtype, Isa isa);

// Eight weight rows against one activation row (VecDot4Fn's contract with
// eight outputs), or nullptr; offered only where FindVecDot4 offers one.
using VecDot8Fn = VecDot4Fn;
VecDot8Fn FindVecDot8(GgmlType wtype, Isa isa);


// Plain f32 dot product used by the generic path (and by F32 weights).
float DotF32Scalar(const float* a, const float* b, int64_t n);
float DotF32Avx2(const float* a, const float* b, int64_t n);

// MatMul with a fixed instruction set; `isa` must be supported by the CPU.
absl::Status MatMulWithIsa(Isa isa, GgmlType wtype, const void* w, int64_t rows,
                           int64_t cols, const float* x, int64_t n_tok, float* y,
                           ThreadPool* pool);

// Per-ISA kernel tables (vec_dot_scalar.cc, vec_dot_avx2.cc,
// vec_dot_avx512.cc); nullptr where that ISA has no kernel for the type.
// FindVecDot falls back from AVX-512 to AVX2 to scalar kernels.
VecDotFn FindVecDotScalar(GgmlType wtype);
VecDotFn FindVecDotAvx2(GgmlType wtype);
VecDotFn FindVecDotAvx512(GgmlType wtype);
VecDot4Fn FindVecDot4Avx2(GgmlType wtype);
VecDot4x2Fn FindVecDot4x2Avx2(GgmlType wtype);
VecDot8Fn FindVecDot8Avx2(GgmlType wtype);

// Q8_0 activation blocks of x (cols a multiple of 32) written to out as
// BlockQ8_0s, identical to the scalar conversion. AVX2 only.
void QuantizeRowQ8_0Avx2(const float* x, int64_t cols, void* out);
// Q8_K activation blocks (cols a multiple of 256), identical to the scalar
// conversion. AVX2 only.
void QuantizeRowQ8_KAvx2(const float* x, int64_t cols, void* out);


}  // namespace sluice::kernels::internal

#endif  // SLUICE_KERNELS_CPU_MATVEC_INTERNAL_H_
