// Matrix times activations for quantized weights: y = x * W^T.
//
// W is `rows` rows of `cols` elements of type `wtype`; row r starts at
// w + r * RowBytes(wtype, cols) (rows are contiguous, as in a GGUF tensor
// whose ne[0] == cols). x is n_tok rows of cols f32 values (row-major,
// [n_tok][cols]); y is [n_tok][rows] f32, y[t][r] = sum_c W[r][c] * x[t][c].
// Decode uses n_tok == 1; prefill passes the whole batch so every weight row
// is read once per call rather than once per token.
//
// Numerics follow ggml's CPU backend (llama.cpp's goldens were made by it):
//   F32 weights:  f32 dot product of x and W.
//   F16 / BF16:   x is first rounded to fp16 / bf16 (nearest-even), then
//                 products of exactly converted values are summed in f32.
//   quantized:    each activation row is quantized once per call to the
//                 weight type's partner format (Q8_0 for Q8_0, Q4_0, Q5_0,
//                 Q1_0, Q2_0, IQ4_NL, MXFP4, NVFP4; Q8_1 for Q4_1, Q5_1;
//                 Q8_K for the K-quants, IQ1/IQ2/IQ3, IQ4_XS, TQ1_0, TQ2_0)
//                 exactly as ggml's x86 quantize_row_* does, and blocks are
//                 combined as in ggml's vec_dot (integer sums per sub-block,
//                 scaled by the block scales). This reproduces ggml's
//                 activation rounding exactly; only float summation order
//                 differs (see docs/QUANT_FORMATS.md for the bounds).
//
// Thread-safety: MatMul and MatMulReference are reentrant; concurrent calls
// on different outputs are fine (calls sharing a ThreadPool are serialized
// by the pool). Inputs are read only.
#ifndef SLUICE_KERNELS_CPU_MATVEC_H_
#define SLUICE_KERNELS_CPU_MATVEC_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/thread_pool.h"
#include "format/ggml_type.h"

namespace sluice::kernels {

// True if MatMul / MatMulReference accept `wtype` as a weight type: F32,
// F16, BF16 and every quantized weight type (not the activation-only Q8_1 /
// Q8_K, not integer types, not F64).
bool IsMatMulSupported(GgmlType wtype);

// The optimized product: SIMD kernels chosen at run time from the CPU's
// features (AVX-512 F/BW/VL/VNNI, else AVX2+FMA+F16C, else portable
// scalar), rows split over `pool` (nullptr = run on the caller's thread
// only). Results do not depend on the number of threads (each y element is
// computed by one thread in a fixed order), and a batch gives exactly what
// n_tok single-token calls give.
// Dedicated kernels: F32, Q8_0, Q1_0 (AVX-512); F16, BF16, Q4_0, IQ4_NL,
// MXFP4, Q4_K, Q5_K, Q6_K (AVX2); Q4_1, Q5_1 (scalar); other types decode
// each weight row to f32 and dot it with the activation decoded from its
// 8-bit blocks (same rounding, slower). docs/QUANT_FORMATS.md has details.
// With AVX2 (and no AVX-512 kernel for the type), F32, Q8_0 and Q1_0 also
// run four (F32 decode: eight) rows per call, and F32, Q8_0, Q1_0, Q4_K,
// Q5_K and Q6_K take two tokens per weight block in batches; every output
// is summed exactly as the one-row kernel sums it.
//
// Preconditions: w holds rows * RowBytes(wtype, cols) bytes, x holds
// n_tok * cols floats, y holds n_tok * rows floats; y does not overlap w or
// x. No alignment is required.
// Errors (nothing is written to y on error):
//   InvalidArgument naming the type and the value if rows, cols or n_tok
//     is negative, or cols is not a multiple of the type's block size (for
//     Q8_K-paired types: of 256);
//   Unimplemented "<type>: matmul not supported" for unsupported types.
// rows == 0 or n_tok == 0 is OK and writes nothing; cols == 0 writes zeros.
absl::Status MatMul(GgmlType wtype, const void* w, int64_t rows, int64_t cols,
                    const float* x, int64_t n_tok, float* y, ThreadPool* pool);

namespace internal {
enum class ActFormat;
}

// Activations converted once into the form the kernels for one weight type
// read (the partner format above, or rounded f32), so products that share
// an input (gate and up, every chosen expert, q/k/v) pay the conversion
// once. Products whose weight type has the same partner format reuse it.
// Prepare and Gather reuse the buffer of an earlier call.
// Thread-safety: const methods may run concurrently; Prepare and Gather
// must not run concurrently with anything else on the object.
class PreparedActivations {
 public:
  // Converts n_tok rows of x ([n_tok][cols]) for weights of type wtype.
  // Errors: those of MatMul for (wtype, rows = 0, cols, n_tok).
  absl::Status Prepare(GgmlType wtype, const float* x, int64_t cols, int64_t n_tok);

  // Keeps rows `rows` of src, in that order (indices in [0, src.n_tok()));
  // src must be prepared and must not be this object.
  void Gather(const PreparedActivations& src, absl::Span<const int64_t> rows);

  // Whether MatMulPrepared accepts these for wtype weights of cols columns.
  bool CompatibleWith(GgmlType wtype, int64_t cols) const;

  int64_t n_tok() const { return n_tok_; }
  int64_t cols() const { return cols_; }
  int64_t row_bytes() const { return row_bytes_; }
  const uint8_t* data() const { return data_.data(); }
  internal::ActFormat format() const { return format_; }

 private:
  internal::ActFormat format_{};
  bool prepared_ = false;
  int64_t cols_ = 0;
  int64_t n_tok_ = 0;
  int64_t row_bytes_ = 0;
  std::vector<uint8_t> data_;
};

// MatMul on prepared activations: bit for bit MatMul(wtype, w, rows, cols,
// x, act.n_tok(), y, pool) for the x they came from (or the gathered rows).
// Errors: InvalidArgument "<type>: activations prepared for another format
// or width" if !act.CompatibleWith(wtype, cols); otherwise MatMul's.
absl::Status MatMulPrepared(GgmlType wtype, const void* w, int64_t rows, int64_t cols,
                            const PreparedActivations& act, float* y, ThreadPool* pool);

// The obviously correct reference: each weight row is dequantized with
// DequantizeRow and dotted with the unquantized x in double precision, then
// rounded to f32. Single-threaded; slow. Same contract and errors as MatMul.
// Differs from MatMul by the activation quantization MatMul applies (that
// is what llama.cpp does); tests bound the difference per type.
absl::Status MatMulReference(GgmlType wtype, const void* w, int64_t rows,
                             int64_t cols, const float* x, int64_t n_tok,
                             float* y);

// sum_i a[i] * b[i] in the order of ggml's x86 ggml_vec_dot_f32 on AVX2
// (four 8-lane FMA accumulators over 32-element steps, leftover 8-element
// chunks into the first, reduced as (s0 + s1) + (s2 + s3), then the scalar
// tail); a portable order without AVX2. For small F32 products whose exact
// bits matter downstream, such as the expert router, where MatMul's F32
// kernels sum in another order. Reentrant.
float DotF32GgmlOrder(const float* a, const float* b, int64_t n);

// Which implementation MatMul uses on this machine: "avx512", "avx2" or
// "scalar". For logs and benchmarks.
const char* MatMulIsa();

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_CPU_MATVEC_H_
