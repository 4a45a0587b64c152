// Weight quantizers: f32 rows to ggml blocks (Q4_K, Q5_K, Q6_K, Q1_0).
//
// These write benchmark and test models (tools/mkmodel); they are not
// llama-quantize. Each is a straightforward, non-searching quantizer: one
// scale (and min) per sub-block from the sub-block's range, the super-block
// scales in fp16 chosen so the 6/8-bit sub-block scales cover the largest
// sub-block, then round to nearest. The blocks are valid ggml blocks: the
// dequantizers in dequant.h (bit-exact with llama.cpp) decode them to within
// the bounds kernels/cpu/quantize_test.cc asserts on Gaussian data
// (worst-row relative RMS error 0.083 for Q4_K, 0.040 for Q5_K, 0.021 for
// Q6_K, 0.619 for Q1_0, whose floor for Gaussian data is sqrt(1 - 2/pi)).
// Q1_0 stores signs only: element = +d if x >= 0 else -d, d = fp16(mean|x|)
// over the 128-element block (the d that minimises the squared error for
// those signs).
//
// Thread-safety: pure functions; call concurrently on disjoint outputs.
#ifndef SLUICE_KERNELS_CPU_QUANTIZE_H_
#define SLUICE_KERNELS_CPU_QUANTIZE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "format/ggml_type.h"

namespace sluice::kernels {

// True for the types QuantizeRow writes.
bool IsQuantizable(GgmlType type);

// Quantizes x[0..n) to RowBytes(type, n) bytes at dst.
// Errors: InvalidArgument "<type>: n=<n> is not a multiple of the block
// size <b>"; Unimplemented "<type>: quantization not supported" for a type
// IsQuantizable rejects. Non-finite input gives unspecified (but valid-size)
// blocks.
absl::Status QuantizeRow(GgmlType type, const float* x, int64_t n, void* dst);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_CPU_QUANTIZE_H_
