// The nvcc-compiled half of quant_matmul: plain structs and int (cudaError_t)
// results, no Abseil and no type table (format/), so that nvcc parses neither.
// Types are GGUF type ids (format/ggml_type.h); quant_matmul.cc validates the
// arguments before anything here runs.
#ifndef SLUICE_KERNELS_CUDA_QUANT_MATMUL_IMPL_H_
#define SLUICE_KERNELS_CUDA_QUANT_MATMUL_IMPL_H_

#include <cstdint>

struct CUstream_st;

namespace sluice::cuda::internal {

// GroupedMatMul with the derived sizes the kernels need. Exactly one of
// `weights` (a device table) and `single_weight` is used: single_weight, when
// non-null, is the one matrix of every group. When group_begin is null,
// single_group_entries > 0 means one group with entries [0, that), and 0
// means one entry per group (e = g).
struct RawGroupedMatMul {
  int type = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
  int n_groups = 0;
  int64_t max_entries_per_group = 0;
  const void* const* weights = nullptr;
  const void* single_weight = nullptr;
  const int32_t* group_weight = nullptr;
  const int32_t* group_begin = nullptr;
  int64_t single_group_entries = 0;
  const int32_t* x_row = nullptr;
  const float* x = nullptr;
  // The 8-bit kernel only: x's rows already rounded to its weights' format
  // (row xr at x_q8 + xr * its bytes, LaunchRoundRowsQ8), or null (each
  // block rounds its tile's rows into shared memory).
  const uint8_t* x_q8 = nullptr;
  int64_t x_stride = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
  // At most one tile of entries per group (kEntryTile) and too few blocks
  // to fill the GPU with kRows rows per lane group: one row each instead
  // (ComputeGeometry), the same sums. spread_all: every such launch of long
  // rows so (a measurement).
  bool spread_rows = false;
  bool spread_all = false;
  // With spread_rows: a launch of several tiles of entries spreads its
  // rows too where its blocks are few, and one whose spread grid still
  // falls short takes one entry a block (ComputeGeometry), the same sums.
  bool spread_entries = false;
  // A pair (the streamed entries kernel only, StreamGroupedQ8): group g's
  // second matrix is weights[w + up_offset] (w the index of its first),
  // its sums written to y_up as the first's to y. 0: no pair.
  int up_offset = 0;
  float* y_up = nullptr;
};

#if defined(__CUDACC__)
#define SLUICE_GROUPED_HD __host__ __device__
#else
#define SLUICE_GROUPED_HD
#endif

// The entries [begin, end) of group g: from group_begin, or the one group of
// single_group_entries, or one entry per group (host and device: the
// grouped, tensor-core and streamed kernels read them alike).
SLUICE_GROUPED_HD inline void GroupEntries(const RawGroupedMatMul& a, int g, int64_t& begin,
                                           int64_t& end) {
  if (a.group_begin != nullptr) {
    begin = a.group_begin[g];
    end = a.group_begin[g + 1];
  } else if (a.single_group_entries > 0) {
    begin = 0;
    end = a.single_group_entries;
  } else {
    begin = g;
    end = g + 1;
  }
}

// Whether a's groups may hold several entries (through group_begin, or one
// group of several), rather than entry g of group g.
inline bool HasSeveralEntries(const RawGroupedMatMul& a) {
  return a.group_begin != nullptr || a.single_group_entries > 1;
}

// Entries a tile of the streamed entries kernel (StreamGroupedQ8) sums in
// one round.
inline constexpr int kStreamTileEntries = 8;

// Entries a round of that kernel's tiles takes for `a` whose rows make
// row_blocks tiles: kStreamTileEntries, or, for dense groups (no
// group_begin) whose tiles would number fewer than target_tiles, the
// largest of 4, 2 and 1 that reaches it (else 1). A dense group takes
// ceil(max_entries_per_group / run) rounds a row block, each its own
// block summing the same staged rows against other entries, each entry's
// sums unchanged: a small product (a decode batch's beta and alpha, the
// shared expert) spreads over more of the GPU. Experts keep one round a
// tile: most of their groups hold a run or less.
inline int StreamEntriesPerRound(const RawGroupedMatMul& a, int64_t row_blocks,
                                 int64_t target_tiles) {
  int run = kStreamTileEntries;
  if (a.group_begin != nullptr) return run;
  auto tiles = [&](int r) {
    return row_blocks * a.n_groups * ((a.max_entries_per_group + r - 1) / r);
  };
  while (run > 1 && tiles(run) < target_tiles) run /= 2;
  return run;
}

// Whether the kernels below handle type id `type`.
bool KernelSupportsType(int type);

// cudaGetLastError() as an int (after a launch made elsewhere).
int LastLaunchCode();

// Launches a's products (their rows rounded by the caller at x_q8)
// streamed through shared memory as the decode projections are
// (decode_ops.cu: a few resident blocks a SM, each asking for its next
// tiles' weight bytes with cp.async while it sums the current one) and
// returns true. One entry per group (entry g of group g), or with
// group_begin or single_group_entries > 1 any number a group: each staged
// tile is then summed against every entry of its group, and empty groups
// stage nothing. Each row is summed by `lanes` lanes
// (GroupedGeometry::lanes_per_row) in the grouped kernel's order, so the
// bits are the grouped kernel's. False, launching nothing, where x_q8 is
// null, the type has no 8-bit product, a tile of rows (or the last one) is
// not a multiple of 16 bytes, a lane would sum fewer than
// min_chunks_per_lane chunks of a row, the
// tiles do not fit the stages or the streamed kernels are off
// (SLUICE_CUDA_STREAM_PROJECT=0 or PrepareDecodeKernels not run).
bool StreamGroupedQ8(const RawGroupedMatMul& a, int lanes, int min_chunks_per_lane,
                     CUstream_st* stream);

// The launch geometry LaunchGrouped will use (exposed so the host side can
// check it against CUDA's grid limits before launching, and tests can pin it).
struct GroupedGeometry {
  int lanes_per_row = 32;       // 8, 16 or 32 lanes share one row
  int rows_per_lane = 4;        // rows a lane group owns: kRows, or 1 (spread_rows)
  int64_t rows_per_block = 0;   // rows one thread block covers
  int64_t row_blocks = 0;       // grid.y
  int64_t entry_tiles = 0;      // grid.x: entries in tiles of 1 or 8
  int entries_per_tile = 8;     // 1 or 8 (kEntryTile)
};
GroupedGeometry GeometryFor(const RawGroupedMatMul& a);

// Enqueues the grouped kernel; returns cudaGetLastError() after the launch.
int LaunchGrouped(const RawGroupedMatMul& a, CUstream_st* stream);

// The tensor-core kernel (quant_matmul_mma_kernel.h): whether it handles
// type id `type` with rows of `cols` elements (every kernel type but F32,
// rows of whole 32-element chunks), and its launch. Its grid is never larger
// than LaunchGrouped's for the same arguments, so GeometryFor bounds both.
bool MmaKernelSupports(int type, int64_t cols);
int LaunchGroupedMma(const RawGroupedMatMul& a, CUstream_st* stream);

// The FP32 kernel with 8-bit activations (quant_matmul_kernel.h, kQ8):
// whether it handles type id `type` with rows of `cols` elements and groups
// of up to max_entries (a quantized type with a Q8Dot, cols a multiple of
// its format's group, the tile's rounded rows within kQ8SharedBytes), and
// its launch, on GroupedGeometry's grid.
// With rows rounded by the caller (`rounded`) no shared memory bounds cols.
constexpr int64_t kQ8SharedBytes = 48 << 10;  // no opt-in above the default
bool Q8KernelSupports(int type, int64_t cols, int64_t max_entries, bool rounded = false);
int LaunchGroupedQ8(const RawGroupedMatMul& a, CUstream_st* stream);

// Bytes of one row of `cols` elements rounded to the 8-bit format that the
// 8-bit kernel pairs with weights of type id `type` (Q8_K or Q8_0), and that
// format (1: Q8_K, 2: Q8_0); 0 for both where it has no 8-bit path for them.
int64_t Q8RowBytesFor(int type, int64_t cols);
int Q8FormatFor(int type, int64_t cols);
// Enqueues the rounding of n_rows rows of x (x_stride floats apart) into out
// for weights of type id `type` (Q8FormatFor(type, cols) != 0).
int LaunchRoundRowsQ8(int type, const float* x, int64_t n_rows, int64_t cols, int64_t x_stride,
                      uint8_t* out, CUstream_st* stream);

// Enqueues NormRoundQ8Kernel over n_tok rows of n: x += add (unless null),
// xn = RMSNorm(x) * w, out = xn's rows rounded for weights of type id `type`
// (Q8FormatFor(type, n) != 0).
int LaunchNormRoundQ8(int type, float* x, const float* add, int64_t n_tok, int64_t n,
                      const float* w, float eps, float* xn, uint8_t* out, CUstream_st* stream);

// Enqueues SwiGluRoundQ8Kernel: g = SiLU(g) * u over n_rows rows of cols,
// out = those rows rounded for weights of type id `type`.
int LaunchSwiGluRoundQ8(int type, float* g, const float* u, int64_t n_rows, int64_t cols,
                        uint8_t* out, CUstream_st* stream);

// Enqueues dst[i][c] = W[ids[i]][c] (bit-exact with kernels/cpu/dequant.cc).
int LaunchDequantRows(int type, const void* w, uint64_t row_bytes,
                      int64_t cols, const int32_t* ids, int64_t n, float* dst,
                      CUstream_st* stream);

const char* ErrorName(int code);
const char* MatMulErrorString(int code);

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_QUANT_MATMUL_IMPL_H_
