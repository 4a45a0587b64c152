// Dequantization of ggml tensor blocks to f32, and scalar fp16/bf16 helpers.
//
// Every function here reproduces, bit for bit, what ggml's `to_float` of the
// same type produces (checked against llama.cpp goldens in dequant_test.cc).
// The block layouts are documented in docs/QUANT_FORMATS.md.
//
// kernels/ knows nothing of files: callers pass raw block bytes.
//
// Thread-safety: all functions are pure (no shared mutable state) and may be
// called concurrently.
#ifndef SLUICE_KERNELS_CPU_DEQUANT_H_
#define SLUICE_KERNELS_CPU_DEQUANT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "format/ggml_type.h"

namespace sluice::kernels {

// IEEE binary16 -> binary32. Exact (every half is representable), including
// subnormals, infinities and NaN (payload kept).
float Fp16ToF32(uint16_t h);

// binary32 -> binary16, round to nearest, ties to even (what F16C's
// vcvtps2ph with imm 0 and ggml's scalar fallback do). Overflow gives +-inf;
// NaN stays NaN.
uint16_t F32ToFp16(float f);

// bfloat16 -> binary32 (exact: a shift).
float Bf16ToF32(uint16_t b);

// binary32 -> bfloat16, round to nearest, ties to even; NaN becomes a quiet
// NaN with the same sign (as ggml_compute_fp32_to_bf16 does).
uint16_t F32ToBf16(float f);

// The lower-case ggml name of `type` ("q4_k"), for messages.
std::string TypeName(GgmlType type);

// True if DequantizeRow can decode `type`: F32, F16, BF16 and every
// quantized type (the activation formats Q8_1 and Q8_K included); false for
// I8/I16/I32/I64/F64.
bool IsDequantizable(GgmlType type);

// Bytes occupied by `n` consecutive elements of `type`.
// InvalidArgument (naming type and n) if n < 0 or n is not a multiple of
// the type's block size (from format/ggml_type.h).
absl::StatusOr<int64_t> RowBytes(GgmlType type, int64_t n);

// Decodes `n` consecutive elements of `type` starting at `src` into
// dst[0..n).
//
// Preconditions: `src` points at RowBytes(type, n) readable bytes (no
// alignment required), `dst` at n writable floats; they do not overlap.
// Errors:
//   InvalidArgument "<type>: n=<n> is not a multiple of the block size <b>"
//     (also for n < 0);
//   Unimplemented "<type>: dequantization not supported" for integer and
//     f64 types.
// n == 0 is OK and writes nothing.
//
// Works on a whole row or any block-aligned slice of one, so a token
// embedding lookup is DequantizeRow(type, base + id * row_bytes, dim, out).
absl::Status DequantizeRow(GgmlType type, const void* src, int64_t n,
                           float* dst);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_CPU_DEQUANT_H_
