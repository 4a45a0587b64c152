// Argument checks and Status for quant_matmul.cu: every precondition is
// checked here, on the host, before a launch, so a bad shape is an
// InvalidArgument naming the field rather than a kernel fault.
#include "kernels/cuda/quant_matmul.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/env_switch.h"
#include "base/status_macros.h"
#include "format/ggml_type.h"
#include "kernels/cuda/kquant_mma.h"
#include "kernels/cuda/quant_matmul_impl.h"

namespace sluice::cuda {
namespace {

constexpr int64_t kMaxGridYZ = 65535;  // CUDA's limit on gridDim.y and .z
constexpr int64_t kMaxGridX = 2147483647;

std::string Name(GgmlType type) {
  const std::string_view n = TraitsOf(type).name;
  return std::string(n.data(), n.size());
}

absl::Status LaunchError(int rc, const char* what) {
  if (rc == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", internal::ErrorName(rc), " (",
                                          internal::MatMulErrorString(rc), ")"));
}

absl::Status CheckTypeAndCols(GgmlType type, int64_t cols, const char* what) {
  if (!MatMulSupported(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": weight type ", Name(type), " is not supported on CUDA"));
  }
  const uint32_t block = TraitsOf(type).block_size;
  if (cols <= 0 || cols % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": cols=", cols, " is not a positive multiple of the ",
                                                   Name(type), " block size ", block));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(const char* what, const char* field, int64_t v) {
  if (v > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", field, "=", v, " must be positive"));
}

absl::Status CheckGeometry(const internal::RawGroupedMatMul& raw, const char* what) {
  const internal::GroupedGeometry geo = internal::GeometryFor(raw);
  if (geo.row_blocks > kMaxGridYZ) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": rows=", raw.rows, " needs ", geo.row_blocks,
                                                   " row blocks (CUDA allows ", kMaxGridYZ, ")"));
  }
  if (raw.n_groups > kMaxGridYZ) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": n_groups=", raw.n_groups, " exceeds ", kMaxGridYZ));
  }
  if (geo.entry_tiles > kMaxGridX) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": max_entries_per_group=", raw.max_entries_per_group, " is too large"));
  }
  return absl::OkStatus();
}

EnvSwitch tensor_cores_switch("SLUICE_CUDA_TENSOR_CORES", true);
// On since run 15 (H100): Kimi-K2's decode 601.6 -> 614.5 tok/s at depth
// 512 and 482.3 -> 494.6 at 16k, the same bits.
EnvSwitch stream_grouped_switch("SLUICE_CUDA_STREAM_GROUPED", true);
std::atomic<uint64_t> streamed_launches{0};

// Chunks a lane sums of each row, at least, for a one-entry launch to
// stream: with fewer a tile's rows are short work between its barriers.
// H100, run 15 (cuda_matmul_bench --kimi): 7 a lane (7,168 columns) took
// the routed Q4_K gate+up from 77.1 to 61.7 us and q_a, kv_a and the shared
// expert 10-30% faster; 2 a lane (the down products' 2,048) went from 48.8
// to 58.9 us, 1.5 (q_b's 1,536) no faster.
constexpr int kStreamMinChunksPerLane = 4;
// The same for launches whose groups hold several entries (a decode
// batch's products), where each staged chunk serves every entry.
constexpr int kStreamEntriesMinChunksPerLane = 1;

EnvSwitch stream_entries_switch("SLUICE_CUDA_STREAM_ENTRIES", true);
// Every dense product of several entries streamed, not only where
// DenseEntriesStream says (measurements).
EnvSwitch stream_dense_all_switch("SLUICE_CUDA_STREAM_DENSE_ALL", false);
std::atomic<uint64_t> streamed_entry_launches{0};
// On since 2026-12-07 (H100, 0b070fa, same call, two alternations):
// bench35 +4-6% at 4 and 8 sequences, 0-1% at 16 and 32; bench397 +2%.
EnvSwitch paired_entries_switch("SLUICE_CUDA_PAIR_ENTRIES", true);
std::atomic<uint64_t> paired_entry_launches{0};

// Whether a dense product (one group) of several rounded rows streams:
// up to 4 rows, Q6_K, matrices of fewer than 4,096 rows, or rows of fewer
// than 4,096 columns. H100, 2026-12-07 (0b070fa, same call): streaming
// every dense product gave bench397 (Q4_K 4,096 -> 16,384) 3.6% / 7.0% /
// 8.5% less at 8 / 16 / 32 sequences than this rule without the columns
// term, and cuda_matmul_bench --batch has that shape at 0.80-0.84x of the
// grouped kernel from 8 rows; bench35's 2,048 -> 8,192 Q4_K products,
// 0.92-0.95x there alone, gave the step 1-5% more streamed.
bool DenseEntriesStream(const internal::RawGroupedMatMul& raw) {
  return stream_dense_all_switch.on() || raw.single_group_entries <= 4 ||
         raw.type == static_cast<int>(GgmlType::kQ6_K) || raw.rows < 4096 || raw.cols < 4096;
}

// Launches raw streamed (internal::StreamGroupedQ8) where its rows were
// rounded by the caller and its switch is on: one entry a group
// (SLUICE_CUDA_STREAM_GROUPED) or several (SLUICE_CUDA_STREAM_ENTRIES);
// false: nothing launched.
bool StreamRounded(const internal::RawGroupedMatMul& raw, CUstream_st* stream) {
  const bool entries = internal::HasSeveralEntries(raw);
  if (raw.x_q8 == nullptr || !(entries ? stream_entries_switch : stream_grouped_switch).on() ||
      (entries && raw.group_begin == nullptr && !DenseEntriesStream(raw))) {
    return false;
  }
  if (!internal::StreamGroupedQ8(
          raw, internal::GeometryFor(raw).lanes_per_row,
          entries ? kStreamEntriesMinChunksPerLane : kStreamMinChunksPerLane, stream)) {
    return false;
  }
  (entries ? streamed_entry_launches : streamed_launches).fetch_add(1, std::memory_order_relaxed);
  return true;
}

EnvSwitch int8_mma_switch("SLUICE_CUDA_INT8_MMA", true);
std::atomic<uint64_t> int8_mma_launches{0};

// The weight types the integer tensor cores take while on:
// SLUICE_CUDA_INT8_MMA_TYPES names them ("q4_k,q6_k"; an A/B per type),
// unset or empty every one LaunchKQuantMma supports. An unknown name is
// said once on stderr and the variable ignored.
bool Int8MmaTypeOn(int type) {
  static const uint64_t types = [] {
    const char* env = std::getenv("SLUICE_CUDA_INT8_MMA_TYPES");
    if (env == nullptr || *env == '\0') return ~uint64_t{0};
    std::string unknown;
    const std::optional<uint64_t> set = GgmlTypeSet(env, &unknown);
    if (!set.has_value()) {
      std::fprintf(stderr, "SLUICE_CUDA_INT8_MMA_TYPES: no type '%s'; ignored\n",
                   unknown.c_str());
      return ~uint64_t{0};
    }
    return *set;
  }();
  return type >= 0 && type < 64 && ((types >> type) & 1) != 0;
}

// Whether raw takes the integer tensor cores: their switch is on for its
// type, its groups may hold several entries (a batch's products; a
// one-entry launch keeps the decode program's sums) and LaunchKQuantMma
// takes it.
bool TakesInt8Mma(const internal::RawGroupedMatMul& raw) {
  return int8_mma_switch.on() && Int8MmaTypeOn(raw.type) && internal::HasSeveralEntries(raw) &&
         internal::KQuantMmaTakes(raw);
}

// The integer kernel's variants (internal::KQuantMmaOptions): blocks of a
// two-tile launch that fit one tile take one (on: +2.6% / +6.8% on bench35
// / bench397 at 32 sequences, run 34); the next block's weights loaded
// first (off until measured).
EnvSwitch int8_mma_shrink_switch("SLUICE_CUDA_INT8_MMA_SHRINK", true);
EnvSwitch int8_mma_ahead_switch("SLUICE_CUDA_INT8_MMA_AHEAD", false);

// LaunchKQuantMma, counted; its error code.
int LaunchInt8Mma(const internal::RawGroupedMatMul& raw, CUstream_st* stream) {
  int8_mma_launches.fetch_add(1, std::memory_order_relaxed);
  internal::KQuantMmaOptions options;
  options.shrink = int8_mma_shrink_switch.on();
  options.ahead = int8_mma_ahead_switch.on();
  return internal::LaunchKQuantMma(raw, options, stream);
}

// The kernel `raw` takes: the tensor-core kernel when the caller and
// UsesTensorCores allow it for its largest group, else the FP32 kernel,
// with 8-bit activations when the caller asks and the kernel takes the
// shape.
enum class GroupedKernel { kTensorCores, kQ8, kF32 };
GroupedKernel KernelFor(const internal::RawGroupedMatMul& raw, bool tensor_cores, bool q8) {
  if (tensor_cores &&
      UsesTensorCores(static_cast<GgmlType>(raw.type), raw.cols, raw.max_entries_per_group)) {
    return GroupedKernel::kTensorCores;
  }
  if (q8 && Q8ActivationsEnabled() &&
      internal::Q8KernelSupports(raw.type, raw.cols, raw.max_entries_per_group,
                                 raw.x_q8 != nullptr)) {
    return GroupedKernel::kQ8;
  }
  return GroupedKernel::kF32;
}

// Launches `raw` on KernelFor's kernel (the 8-bit one streamed where
// StreamRounded takes it). CheckGeometry has bounded the FP32 kernel's
// grid (the 8-bit variant's is the same), which is never smaller than the
// tensor-core kernel's (128 rows and 32 entries per block against at most
// 64 and 8).
absl::Status LaunchEither(const internal::RawGroupedMatMul& raw, bool tensor_cores, bool q8,
                          CUstream_st* stream, const char* what) {
  switch (KernelFor(raw, tensor_cores, q8)) {
    case GroupedKernel::kTensorCores:
      return LaunchError(internal::LaunchGroupedMma(raw, stream), what);
    case GroupedKernel::kQ8:
      if (TakesInt8Mma(raw)) return LaunchError(LaunchInt8Mma(raw, stream), what);
      if (StreamRounded(raw, stream)) return LaunchError(internal::LastLaunchCode(), what);
      return LaunchError(internal::LaunchGroupedQ8(raw, stream), what);
    case GroupedKernel::kF32:
      break;
  }
  return LaunchError(internal::LaunchGrouped(raw, stream), what);  // F32 reads no x_q8
}

// A pair (raw.up_offset) in one launch, of the integer tensor cores where
// TakesInt8Mma, else of the streamed entries kernel where it takes both,
// while the pairs' switch is on, with the launch's error code in *code;
// false: nothing launched.
bool LaunchPaired(const internal::RawGroupedMatMul& raw, bool tensor_cores, bool q8,
                  CUstream_st* stream, int* code) {
  if (!paired_entries_switch.on() || KernelFor(raw, tensor_cores, q8) != GroupedKernel::kQ8) {
    return false;
  }
  if (TakesInt8Mma(raw)) {
    *code = LaunchInt8Mma(raw, stream);
  } else if (StreamRounded(raw, stream)) {
    *code = internal::LastLaunchCode();
  } else {
    return false;
  }
  paired_entry_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

EnvSwitch q8_switch("SLUICE_CUDA_Q8", true);
// One-entry launches too small to fill the GPU take one row per lane group
// (RawGroupedMatMul::spread_rows): the same sums, more blocks.
EnvSwitch spread_rows_switch("SLUICE_CUDA_SPREAD_ROWS", true);
// Every one-entry launch of long rows so: measured against the above.
EnvSwitch spread_all_switch("SLUICE_CUDA_SPREAD_ALL", false);
// Launches of several entries too short of blocks spread rows and entries
// too (RawGroupedMatMul::spread_entries): the same sums, more blocks.
EnvSwitch spread_entries_switch("SLUICE_CUDA_SPREAD_ENTRIES", true);
EnvSwitch q8_round_once_switch("SLUICE_CUDA_Q8_ROUND_ONCE", true);

// raw's spread_rows, spread_all and spread_entries as their switches say.
void SpreadBySwitches(internal::RawGroupedMatMul& raw) {
  raw.spread_rows = spread_rows_switch.on();
  raw.spread_all = spread_all_switch.on();
  raw.spread_entries = spread_entries_switch.on();
}
EnvSwitch fuse_rounding_switch("SLUICE_CUDA_FUSE_ROUNDING", false);

}  // namespace

bool TensorCoresEnabled() { return tensor_cores_switch.on(); }

void SetTensorCoresEnabled(bool enabled) { tensor_cores_switch.Set(enabled); }

bool Q8ActivationsEnabled() { return q8_switch.on(); }

bool StreamGroupedEnabled() { return stream_grouped_switch.on(); }

void SetStreamGroupedEnabled(bool enabled) { stream_grouped_switch.Set(enabled); }

uint64_t StreamedOneRowLaunches() { return streamed_launches.load(std::memory_order_relaxed); }

bool StreamEntriesEnabled() { return stream_entries_switch.on(); }

void SetStreamEntriesEnabled(bool enabled) { stream_entries_switch.Set(enabled); }

void SetStreamDenseEntriesAll(bool all) { stream_dense_all_switch.Set(all); }

uint64_t StreamedEntryLaunches() {
  return streamed_entry_launches.load(std::memory_order_relaxed);
}

bool PairedEntriesEnabled() { return paired_entries_switch.on(); }

void SetPairedEntriesEnabled(bool enabled) { paired_entries_switch.Set(enabled); }

uint64_t PairedEntryLaunches() { return paired_entry_launches.load(std::memory_order_relaxed); }

bool Q8RoundOnceEnabled() { return q8_round_once_switch.on(); }

bool Int8MmaEnabled() { return int8_mma_switch.on(); }

void SetInt8MmaEnabled(bool enabled) { int8_mma_switch.Set(enabled); }

uint64_t Int8MmaLaunches() { return int8_mma_launches.load(std::memory_order_relaxed); }

bool UsesTensorCores(GgmlType type, int64_t cols, int64_t max_entries) {
  return max_entries >= kTensorCoreMinEntries &&
         internal::MmaKernelSupports(static_cast<int>(type), cols) && TensorCoresEnabled();
}

bool MatMulSupported(GgmlType type) {
  return internal::KernelSupportsType(static_cast<int>(type));
}

uint64_t RowBytes(GgmlType type, int64_t cols) {
  const GgmlTypeTraits& t = TraitsOf(type);
  return static_cast<uint64_t>(cols) / t.block_size * t.bytes_per_block;
}

absl::Status LaunchGroupedMatMul(const GroupedMatMul& args, CUstream_st* stream) {
  constexpr const char* kWhat = "LaunchGroupedMatMul";
  RETURN_IF_ERROR(CheckTypeAndCols(args.type, args.cols, kWhat));
  RETURN_IF_ERROR(CheckPositive(kWhat, "rows", args.rows));
  RETURN_IF_ERROR(CheckPositive(kWhat, "n_groups", args.n_groups));
  RETURN_IF_ERROR(CheckPositive(kWhat, "max_entries_per_group", args.max_entries_per_group));
  if (args.x_stride < args.cols) {
    return absl::InvalidArgumentError(
        absl::StrCat(kWhat, ": x_stride=", args.x_stride, " is below cols=", args.cols));
  }
  if (args.y_stride < args.rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(kWhat, ": y_stride=", args.y_stride, " is below rows=", args.rows));
  }
  if (args.d_weights == nullptr || args.d_x == nullptr || args.d_y == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(kWhat, ": d_weights, d_x and d_y must be device pointers, not null"));
  }
  internal::RawGroupedMatMul raw;
  raw.type = static_cast<int>(args.type);
  raw.rows = args.rows;
  raw.cols = args.cols;
  raw.row_bytes = RowBytes(args.type, args.cols);
  raw.n_groups = args.n_groups;
  if (args.one_group_entries != 0 &&
      (args.d_group_begin != nullptr || args.n_groups != 1 || args.one_group_entries < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kWhat, ": one_group_entries=", args.one_group_entries,
        " needs n_groups=1 and no d_group_begin"));
  }
  // Without group_begin every group is one entry, whatever the bound says
  // (or the one group of one_group_entries).
  raw.max_entries_per_group =
      args.d_group_begin != nullptr
          ? args.max_entries_per_group
          : (args.one_group_entries > 0 ? args.one_group_entries : 1);
  raw.single_group_entries = args.one_group_entries;
  raw.weights = args.d_weights;
  raw.group_weight = args.d_group_weight;
  raw.group_begin = args.d_group_begin;
  raw.x_row = args.d_x_row;
  raw.x = args.d_x;
  raw.x_q8 = args.d_x_q8;
  raw.x_stride = args.x_stride;
  raw.y = args.d_y;
  raw.y_stride = args.y_stride;
  SpreadBySwitches(raw);
  RETURN_IF_ERROR(CheckGeometry(raw, kWhat));
  if (args.pair_offset == 0) {
    return LaunchEither(raw, args.tensor_cores, args.q8_activations, stream, kWhat);
  }
  if (args.pair_offset < 0 || args.d_y_up == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        kWhat, ": pair_offset=", args.pair_offset, " needs to be positive and d_y_up set"));
  }
  raw.up_offset = args.pair_offset;
  raw.y_up = args.d_y_up;
  if (int code = 0; LaunchPaired(raw, args.tensor_cores, args.q8_activations, stream, &code)) {
    return LaunchError(code, kWhat);
  }
  // Two launches: the first matrices, then the second into d_y_up.
  raw.up_offset = 0;
  raw.y_up = nullptr;
  RETURN_IF_ERROR(LaunchEither(raw, args.tensor_cores, args.q8_activations, stream, kWhat));
  raw.weights = args.d_weights + args.pair_offset;
  raw.y = args.d_y_up;
  return LaunchEither(raw, args.tensor_cores, args.q8_activations, stream, kWhat);
}

absl::Status MatMul(GgmlType type, const void* d_w, int64_t rows, int64_t cols, const float* d_x,
                    int64_t n_tok, float* d_y, CUstream_st* stream, bool tensor_cores,
                    bool q8_activations, const uint8_t* d_x_q8) {
  constexpr const char* kWhat = "MatMul";
  RETURN_IF_ERROR(CheckTypeAndCols(type, cols, kWhat));
  RETURN_IF_ERROR(CheckPositive(kWhat, "rows", rows));
  RETURN_IF_ERROR(CheckPositive(kWhat, "n_tok", n_tok));
  if (d_w == nullptr || d_x == nullptr || d_y == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(kWhat, ": d_w, d_x and d_y must be device pointers, not null"));
  }
  // One group of n_tok entries; the matrix pointer travels by value, so no
  // device-side table is needed.
  internal::RawGroupedMatMul raw;
  raw.type = static_cast<int>(type);
  raw.rows = rows;
  raw.cols = cols;
  raw.row_bytes = RowBytes(type, cols);
  raw.n_groups = 1;
  raw.max_entries_per_group = n_tok;
  raw.single_weight = d_w;
  raw.single_group_entries = n_tok;
  raw.x = d_x;
  raw.x_q8 = d_x_q8;
  raw.x_stride = cols;
  raw.y = d_y;
  raw.y_stride = rows;
  SpreadBySwitches(raw);
  RETURN_IF_ERROR(CheckGeometry(raw, kWhat));
  return LaunchEither(raw, tensor_cores, q8_activations, stream, kWhat);
}

Q8Format Q8ActivationFormat(GgmlType type, int64_t cols) {
  return static_cast<Q8Format>(internal::Q8FormatFor(static_cast<int>(type), cols));
}

int64_t Q8ActivationRowBytes(GgmlType type, int64_t cols) {
  return internal::Q8RowBytesFor(static_cast<int>(type), cols);
}

namespace {
// An 8-bit product's rows: `type` has one for rows of cols, and rows > 0.
absl::Status CheckQ8Rows(const char* what, GgmlType type, const char* field, int64_t rows,
                         int64_t cols) {
  if (Q8ActivationFormat(type, cols) == Q8Format::kNone) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": no 8-bit products for ", Name(type), " rows of ", cols, " columns"));
  }
  return CheckPositive(what, field, rows);
}
}  // namespace

absl::Status RoundActivationsQ8(GgmlType type, const float* d_x, int64_t n_rows, int64_t cols,
                                int64_t x_stride, uint8_t* d_out, CUstream_st* stream) {
  constexpr const char* kWhat = "RoundActivationsQ8";
  RETURN_IF_ERROR(CheckQ8Rows(kWhat, type, "n_rows", n_rows, cols));
  if (x_stride < cols || d_x == nullptr || d_out == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        kWhat, ": x_stride=", x_stride, " below cols=", cols, ", or a null pointer"));
  }
  return LaunchError(internal::LaunchRoundRowsQ8(static_cast<int>(type), d_x, n_rows, cols,
                                                 x_stride, d_out, stream),
                     kWhat);
}

absl::Status AddRmsNormRoundQ8(GgmlType type, float* d_x, const float* d_add, int64_t n_tok,
                               int64_t n, const float* d_w, float eps, float* d_xn,
                               uint8_t* d_out, CUstream_st* stream) {
  constexpr const char* kWhat = "AddRmsNormRoundQ8";
  RETURN_IF_ERROR(CheckQ8Rows(kWhat, type, "n_tok", n_tok, n));
  if (n_tok > kMaxGridX || d_x == nullptr || d_w == nullptr || d_xn == nullptr ||
      d_out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(kWhat, ": n_tok=", n_tok, " past the grid, or a null pointer"));
  }
  return LaunchError(internal::LaunchNormRoundQ8(static_cast<int>(type), d_x, d_add, n_tok, n,
                                                 d_w, eps, d_xn, d_out, stream),
                     kWhat);
}

absl::Status SwiGluRoundQ8(GgmlType type, float* d_g, const float* d_u, int64_t n_rows,
                           int64_t cols, uint8_t* d_out, CUstream_st* stream) {
  constexpr const char* kWhat = "SwiGluRoundQ8";
  RETURN_IF_ERROR(CheckQ8Rows(kWhat, type, "n_rows", n_rows, cols));
  if (d_g == nullptr || d_u == nullptr || d_out == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(kWhat, ": a null pointer"));
  }
  return LaunchError(internal::LaunchSwiGluRoundQ8(static_cast<int>(type), d_g, d_u, n_rows,
                                                   cols, d_out, stream),
                     kWhat);
}

bool FuseRoundingEnabled() { return fuse_rounding_switch.on(); }
void SetFuseRoundingEnabled(bool enabled) { fuse_rounding_switch.Set(enabled); }

absl::Status DequantRows(GgmlType type, const void* d_w, int64_t cols, const int32_t* d_ids,
                         int64_t n, float* d_dst, CUstream_st* stream) {
  constexpr const char* kWhat = "DequantRows";
  RETURN_IF_ERROR(CheckTypeAndCols(type, cols, kWhat));
  RETURN_IF_ERROR(CheckPositive(kWhat, "n", n));
  if (d_w == nullptr || d_ids == nullptr || d_dst == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(kWhat, ": d_w, d_ids and d_dst must be device pointers, not null"));
  }
  if (n > kMaxGridX || (cols + 255) / 256 > kMaxGridYZ) {
    return absl::InvalidArgumentError(
        absl::StrCat(kWhat, ": n=", n, " cols=", cols, " exceed the launch limits"));
  }
  return LaunchError(internal::LaunchDequantRows(static_cast<int>(type), d_w, RowBytes(type, cols),
                                                 cols, d_ids, n, d_dst, stream),
                     kWhat);
}

}  // namespace sluice::cuda
