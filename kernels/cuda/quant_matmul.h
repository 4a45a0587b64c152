// Products of GGUF weight matrices (read in place in their ggml block
// layout, on the device) with F32 activations, on the GPU.
//
// Plain C++: callers never include CUDA headers. A stream is passed as the
// opaque `CUstream_st*` that cudaStream_t points to (nullptr: the legacy
// default stream). Every pointer argument named d_* is device memory (or
// memory the device can address: an alias of registered host memory).
//
// Weight layout: a matrix of `rows` rows of `cols` elements of `type`; row r
// starts at w + r * RowBytes(type, cols), blocks in ggml order (the layouts
// are docs/QUANT_FORMATS.md and kernels/cpu/blocks.h). Activations are F32;
// products accumulate in F32, and round the activations to 8 bits as ggml's
// CPU backend does only when asked (q8_activations below). Batches of non-F32 weights (UsesTensorCores) round the decoded
// weights and the activations to BF16 (each product off by < 2^-7 of itself);
// F32 weights are always multiplied in F32 (no TF32 or BF16 shortcut).
//
// Alignment: a weight row must start at an even address (every layout keeps
// its fp16 fields at even offsets); loads widen to 4, 8 or 16 bytes where the
// address allows, so Q4_K/Q5_K/F16/BF16/F32 rows in cudaMalloc'd or
// GGUF-aligned memory take 16-byte loads. Activations need only 4-byte
// alignment (float4 loads where x + offset is 16-byte aligned).
//
// Nothing is checked on the device: d_group_begin must be non-decreasing,
// d_group_weight and d_x_row must index valid matrices and rows.
//
// Implemented (docs/CUDA_KERNELS.md): F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K,
// Q1_0. Every product runs the grouped kernel (F32 accumulation, weights
// decoded in registers, read once per tile of 8 entries); there is no
// cuBLASLt path yet.
//
// Thread-safety: functions only enqueue work on the given stream.
#ifndef SLUICE_KERNELS_CUDA_QUANT_MATMUL_H_
#define SLUICE_KERNELS_CUDA_QUANT_MATMUL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "format/ggml_type.h"

struct CUstream_st;

namespace sluice::cuda {

// Whether the device kernels handle `type` (at least F32, F16, BF16, Q8_0,
// Q4_K, Q5_K, Q6_K, Q1_0).
bool MatMulSupported(GgmlType type);

// Bytes of one row of `cols` elements of `type`.
// Precondition: cols is a multiple of the type's block size.
uint64_t RowBytes(GgmlType type, int64_t cols);

// A grouped product in one launch: group g multiplies one weight matrix by
// the activation rows of its entries.
//
//   for g in [0, n_groups), e in [group_begin[g], group_begin[g+1]):
//     W = d_weights[d_group_weight ? d_group_weight[g] : g]
//     y[e * y_stride + r] = sum_c W[r][c] * x[xr * x_stride + c],
//         r in [0, rows), xr = d_x_row ? d_x_row[e] : e
//
// Uses: the dense projection of a batch (one group, entries = tokens); the
// routed experts of one layer (groups = experts, entries = the tokens routed
// to each, d_weights = the layer's per-expert pointer table, which may point
// into device slots or resident weights). All device arrays stay on the
// device, so a launch can be captured in a CUDA graph and replayed after the
// pointer table changed. max_entries_per_group bounds every group's size
// (it sizes the launch; groups may be smaller or empty).
struct GroupedMatMul {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int n_groups = 0;
  int max_entries_per_group = 0;
  const void* const* d_weights = nullptr;  // [n_weights]
  const int32_t* d_group_weight = nullptr;  // [n_groups] or nullptr
  const int32_t* d_group_begin = nullptr;   // [n_groups + 1]; nullptr: one
                                            // entry per group (e = g)
  // With d_group_begin null and n_groups 1: that group's entries [0, this)
  // (a dense product of several rows through a table); 0: one entry.
  int64_t one_group_entries = 0;
  const int32_t* d_x_row = nullptr;         // [entries] or nullptr
  const float* d_x = nullptr;
  int64_t x_stride = 0;  // floats between activation rows (>= cols)
  float* d_y = nullptr;
  int64_t y_stride = 0;  // floats between output rows (>= rows)
  // Whether this product may take the tensor-core kernel (UsesTensorCores);
  // false keeps it on the FP32 kernel whatever its size.
  bool tensor_cores = true;
  // Whether the FP32 kernel (when this product takes it) rounds each
  // activation row to 8 bits first, as llama.cpp's CPU backend and the decode
  // program do (Q8_K for Q4_K/Q5_K/Q6_K, Q8_0 for Q8_0/Q1_0; decode_q8.h),
  // and multiplies in integer dot products. Ignored for the other types and
  // for rows whose rounded tile would not fit the kernel's shared memory
  // (over ~2,300 columns for Q8_K at 8 entries a tile; see
  // internal::Q8KernelSupports); those keep F32 activations.
  bool q8_activations = false;
  // With q8_activations: the rows of d_x already rounded by RoundActivationsQ8
  // for this product's type and cols (row xr at d_x_q8 + xr *
  // Q8ActivationRowBytes(type, cols)), so that several products of one input
  // round it once; the kernel reads them in place. Null: each block rounds
  // its own tile. Ignored where the product keeps F32 activations.
  const uint8_t* d_x_q8 = nullptr;
  // A pair of products over the same entries, e.g. the experts' gate and
  // up: group g's second matrix is d_weights[w + pair_offset] (w the index
  // of its first, d_group_weight[g] or g), of the same type and shape,
  // summed into d_y_up as the first into d_y. One launch where the
  // streamed entries kernel takes both (PairedEntriesEnabled), else two,
  // with the same sums either way. 0: no pair.
  int pair_offset = 0;
  float* d_y_up = nullptr;
};

// Bytes of one row of `cols` activations rounded for 8-bit products with
// weights of `type` (Q8_K for Q4_K/Q5_K/Q6_K, Q8_0 for Q8_0/Q1_0, cols a
// multiple of the format's group), and which of the two formats that is
// (products of the same format may share rounded rows); 0 / kNone where
// products of `type` keep F32 activations (decode_ops.h's DecodeQ8MaxBytes
// bounds either format's rows).
enum class Q8Format { kNone = 0, kQ8K = 1, kQ8Z = 2 };
Q8Format Q8ActivationFormat(GgmlType type, int64_t cols);
int64_t Q8ActivationRowBytes(GgmlType type, int64_t cols);

// Rounds n_rows rows of d_x (x_stride floats apart) into d_out as the 8-bit
// products with weights of `type` read them (bit for bit what a block rounds
// itself). InvalidArgument where Q8ActivationFormat(type, cols) is kNone.
absl::Status RoundActivationsQ8(GgmlType type, const float* d_x, int64_t n_rows, int64_t cols,
                                int64_t x_stride, uint8_t* d_out, CUstream_st* stream);

// x += add (rows of n; add may be null), xn = RMSNorm(x; eps) * w, as
// ops.h AddRmsNorm computes them (the same bits), and xn's n_tok rows
// rounded for products with weights of `type` into d_out, as
// RoundActivationsQ8 rounds them (the same bytes): one launch for both.
// InvalidArgument where `type` has no 8-bit products for rows of n.
absl::Status AddRmsNormRoundQ8(GgmlType type, float* d_x, const float* d_add, int64_t n_tok,
                               int64_t n, const float* d_w, float eps, float* d_xn,
                               uint8_t* d_out, CUstream_st* stream);
// g = SiLU(g) * u over n_rows rows of cols, as ops.h SwiGlu computes it
// (the same bits), and those rows rounded for products with weights of
// `type` into d_out, as RoundActivationsQ8 rounds them (the same bytes): one
// launch for both. InvalidArgument where `type` has no 8-bit products for
// rows of cols.
absl::Status SwiGluRoundQ8(GgmlType type, float* d_g, const float* d_u, int64_t n_rows,
                           int64_t cols, uint8_t* d_out, CUstream_st* stream);
// Whether a pass rounds a norm's or a SwiGLU's output in its own launch
// (AddRmsNormRoundQ8, SwiGluRoundQ8): off unless SLUICE_CUDA_FUSE_ROUNDING
// is "1" when first asked (no faster on Kimi-K2, run 14); SetFuseRoundingEnabled
// for tests.
bool FuseRoundingEnabled();
void SetFuseRoundingEnabled(bool enabled);

// Whether products asked for 8-bit activations get them: true unless the
// environment variable SLUICE_CUDA_Q8 is "0" when first asked (the switch
// the decode program's products read too).
bool Q8ActivationsEnabled();

// Whether a one-row launch (one entry per group, its rows rounded by the
// caller: a batch pass's one-token products) streams the weights through
// shared memory where that is faster (quant_matmul_impl.h's
// StreamGroupedQ8, in decode_ops.cu), with the grouped kernel's bits:
// unless the environment variable SLUICE_CUDA_STREAM_GROUPED is "0" when
// first asked, or SetStreamGroupedEnabled said otherwise.
bool StreamGroupedEnabled();
void SetStreamGroupedEnabled(bool enabled);
// Launches that took the streamed kernel in this process so far.
uint64_t StreamedOneRowLaunches();
// The same for launches whose groups hold several entries, rounded by the
// caller (a decode batch's products: one group of B rows for a dense
// matrix, the experts' groups of the rows routed to each): each tile of
// weight rows is staged once and summed against every entry of its group,
// with the grouped kernel's bits. Unless the environment variable
// SLUICE_CUDA_STREAM_ENTRIES is "0" when first asked, or
// SetStreamEntriesEnabled said otherwise.
// A dense product (one group of several rows) streams only where that
// measured faster (up to 4 rows, Q6_K, matrices under 4,096 rows or rows
// under 4,096 columns), unless
// SLUICE_CUDA_STREAM_DENSE_ALL is "1" when first asked or
// SetStreamDenseEntriesAll(true) said so (measurements).
bool StreamEntriesEnabled();
void SetStreamEntriesEnabled(bool enabled);
void SetStreamDenseEntriesAll(bool all);
uint64_t StreamedEntryLaunches();

// Whether a pair (GroupedMatMul::pair_offset) streamed with several entries
// a group takes one launch (on unless SLUICE_CUDA_PAIR_ENTRIES is "0" when
// first asked) rather than two, where both matrices' tiles fit the stages;
// the same sums. Paired launches counted.
bool PairedEntriesEnabled();
void SetPairedEntriesEnabled(bool enabled);
uint64_t PairedEntryLaunches();

// Whether products of several entries a group with Q4_K, Q5_K, Q6_K or Q1_0
// weights and rows rounded once (d_x_q8) take the integer tensor cores,
// summing each super-block in integers (kquant_mma_device.h): on unless
// SLUICE_CUDA_INT8_MMA is "0" when first asked or SetInt8MmaEnabled(false)
// said so; SLUICE_CUDA_INT8_MMA_TYPES ("q4_k,q6_k") narrows the types.
// Their bits then differ from the decode program's: a sequence in
// such a batch is held to the parity gates. A pair (pair_offset, through a
// table) is one such launch where pairs are on (counted in both counters).
// Against the streamed kernel (H100, run 33): +22% to +48% aggregate
// decode on bench35 at 4 to 32 sequences, +54% / +64% on bench397 at 8 / 32.
bool Int8MmaEnabled();
void SetInt8MmaEnabled(bool enabled);
uint64_t Int8MmaLaunches();

// Whether the CUDA batch pass rounds each product input once
// (RoundActivationsQ8, GroupedMatMul::d_x_q8) rather than in every block:
// unless the environment variable SLUICE_CUDA_Q8_ROUND_ONCE is "0" when
// first asked. On by default since the H100 measured batched decode 20%
// faster at 8 sequences and 30% at 32 with the parity cases unchanged
// (2026-12-06, docs/STATUS.md).
bool Q8RoundOnceEnabled();

// Batches whose largest group has at least this many entries take the
// tensor-core kernel; smaller ones (decode: one entry per group) the FP32
// kernel, unchanged. Why 16: the FP32 kernel reads each weight once per tile
// of 8 entries and does all its work on FP32 FMAs, so up to 2 tiles it costs
// about what the tensor-core kernel spends decoding each weight into shared
// memory once and rounding the activations (its MMAs are nearly free), while
// keeping products exact to F32; from 16 entries the FP32 kernel's FMAs grow
// linearly and the tensor-core kernel's cost barely moves. Not yet tuned on
// the H200 (bench/cuda_matmul_bench prints both kernels per shape).
inline constexpr int kTensorCoreMinEntries = 16;

// Whether the tensor-core kernel is allowed: true unless the environment
// variable SLUICE_CUDA_TENSOR_CORES is "0" when first asked (A/B runs and
// parity comparisons), or SetTensorCoresEnabled said otherwise.
bool TensorCoresEnabled();
// Overrides the environment for this process (tests and benchmarks).
void SetTensorCoresEnabled(bool enabled);

// Whether a product of `type` rows of `cols` elements whose largest group has
// `max_entries` entries takes the tensor-core kernel: enabled, at least
// kTensorCoreMinEntries entries, not F32, and rows of whole 32-element
// chunks (F16/BF16 rows with a tail stay on the FP32 kernel).
bool UsesTensorCores(GgmlType type, int64_t cols, int64_t max_entries);

// Enqueues the product. InvalidArgument for an unsupported type, a cols that
// is not a multiple of the block size, non-positive sizes or strides below
// cols / rows; errors from the launch are Internal with the CUDA message.
absl::Status LaunchGroupedMatMul(const GroupedMatMul& args,
                                 CUstream_st* stream);

// y[t][r] = sum_c W[r][c] x[t][c] for t < n_tok (a dense projection; row
// strides cols and rows): one group of n_tok entries, on the tensor-core
// kernel when tensor_cores and UsesTensorCores(type, cols, n_tok), else the
// FP32 kernel (with 8-bit activations as GroupedMatMul::q8_activations says).
absl::Status MatMul(GgmlType type, const void* d_w, int64_t rows,
                    int64_t cols, const float* d_x, int64_t n_tok, float* d_y,
                    CUstream_st* stream, bool tensor_cores = true,
                    bool q8_activations = false, const uint8_t* d_x_q8 = nullptr);

// dst[i][c] = W[d_ids[i]][c] for i < n (embedding lookup, dequantized).
absl::Status DequantRows(GgmlType type, const void* d_w, int64_t cols,
                         const int32_t* d_ids, int64_t n, float* d_dst,
                         CUstream_st* stream);

}  // namespace sluice::cuda

#endif  // SLUICE_KERNELS_CUDA_QUANT_MATMUL_H_
