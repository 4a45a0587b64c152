// Launches of the grouped mat-mul kernels (FP32 CUDA cores, with F32 or 8-bit
// activations, and tensor cores) and the row dequantizer (the kernels themselves are in
// quant_matmul_kernel.h and quant_matmul_mma_kernel.h); the host wrapper,
// which picks between the two products, is quant_matmul.cc.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

// Weight words not 16-byte aligned (Q6_K's 210-byte and Q8_0's 34-byte
// blocks) are read as aligned words shifted into place (LoadWords), as the
// decode kernels read them: the same bits, fewer and wider loads.
#define SLUICE_FUNNEL_LOADS true

#include "kernels/cuda/quant_matmul_impl.h"
#include "kernels/cuda/quant_matmul_kernel.h"
#include "kernels/cuda/quant_matmul_mma_kernel.h"

namespace sluice::cuda::internal {
namespace {

template <class T>
int Launch(const RawGroupedMatMul& a, const GroupedGeometry& geo, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(geo.entry_tiles), static_cast<unsigned>(geo.row_blocks),
                  static_cast<unsigned>(a.n_groups));
  if (geo.entries_per_tile == 1 && geo.rows_per_lane == 1) {
    GroupedKernel<T, 1, false, 1><<<grid, kThreads, 0, stream>>>(a, geo.lanes_per_row);
  } else if (geo.entries_per_tile == 1) {
    GroupedKernel<T, 1><<<grid, kThreads, 0, stream>>>(a, geo.lanes_per_row);
  } else if (geo.rows_per_lane == 1) {
    GroupedKernel<T, kEntryTile, false, 1><<<grid, kThreads, 0, stream>>>(a, geo.lanes_per_row);
  } else {
    GroupedKernel<T, kEntryTile><<<grid, kThreads, 0, stream>>>(a, geo.lanes_per_row);
  }
  return static_cast<int>(cudaGetLastError());
}

template <class T>
int LaunchQ8(const RawGroupedMatMul& a, const GroupedGeometry& geo, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(geo.entry_tiles), static_cast<unsigned>(geo.row_blocks),
                  static_cast<unsigned>(a.n_groups));
  // Rows rounded by the caller are read in place: no shared tile.
  const size_t row_bytes = a.x_q8 != nullptr ? 0 : static_cast<size_t>(Q8RowBytes<T>(a.cols));
  if (geo.entries_per_tile == 1 && geo.rows_per_lane == 1) {
    GroupedKernel<T, 1, true, 1><<<grid, kThreads, row_bytes, stream>>>(a, geo.lanes_per_row);
  } else if (geo.entries_per_tile == 1) {
    GroupedKernel<T, 1, true><<<grid, kThreads, row_bytes, stream>>>(a, geo.lanes_per_row);
  } else if (geo.rows_per_lane == 1) {
    GroupedKernel<T, kEntryTile, true, 1>
        <<<grid, kThreads, kEntryTile * row_bytes, stream>>>(a, geo.lanes_per_row);
  } else {
    GroupedKernel<T, kEntryTile, true>
        <<<grid, kThreads, kEntryTile * row_bytes, stream>>>(a, geo.lanes_per_row);
  }
  return static_cast<int>(cudaGetLastError());
}

template <class T>
int LaunchMma(const RawGroupedMatMul& a, cudaStream_t stream) {
  const GroupedGeometry geo = ComputeMmaGeometry(a);
  const dim3 grid(static_cast<unsigned>(geo.entry_tiles), static_cast<unsigned>(geo.row_blocks),
                  static_cast<unsigned>(a.n_groups));
  GroupedMmaKernel<T><<<grid, kMmaThreads, 0, stream>>>(a);
  return static_cast<int>(cudaGetLastError());
}

// blockIdx.x: output row i; blockIdx.y * blockDim.x + threadIdx.x: column.
__global__ void DequantRowsKernel(int type, const uint8_t* w, uint64_t row_bytes, int64_t cols,
                                  const int32_t* ids, float* dst) {
  const int64_t i = blockIdx.x;
  const int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  dst[i * cols + j] = DequantElement(type, w + static_cast<int64_t>(ids[i]) * row_bytes, j);
}

}  // namespace

bool KernelSupportsType(int type) { return ChunkElems(type) != 0; }

int LastLaunchCode() { return static_cast<int>(cudaGetLastError()); }

GroupedGeometry GeometryFor(const RawGroupedMatMul& a) { return ComputeGeometry(a); }

int LaunchGrouped(const RawGroupedMatMul& a, CUstream_st* stream) {
  const GroupedGeometry geo = GeometryFor(a);
  return VisitWeights(a.type, static_cast<int>(cudaErrorInvalidValue), [&](auto t) {
    return Launch<typename decltype(t)::type>(a, geo, stream);
  });
}

bool Q8KernelSupports(int type, int64_t cols, int64_t max_entries, bool rounded) {
  const int64_t row_bytes = Q8RowBytesFor(type, cols);
  if (row_bytes == 0) return false;
  const int64_t tile = max_entries == 1 ? 1 : kEntryTile;
  return rounded || tile * row_bytes <= kQ8SharedBytes;
}

int Q8FormatFor(int type, int64_t cols) {
  return VisitWeights(type, 0, [&](auto t) {
    using W = typename decltype(t)::type;
    if constexpr (kHasQ8Dot<W>) {
      const int64_t group = kReadsQ8K<W> ? 256 : 32;
      return cols % group == 0 ? (kReadsQ8K<W> ? 1 : 2) : 0;
    } else {
      return 0;
    }
  });
}

int64_t Q8RowBytesFor(int type, int64_t cols) {
  const int format = Q8FormatFor(type, cols);
  return format == 0 ? 0 : (format == 1 ? Q8KBytes(cols) : Q8ZBytes(cols));
}

// A thread per 16-element chunk of a rounding block's rows, so one pass
// covers them (a 7,168-wide row took four dependent passes of 128).
int RoundThreads(int64_t n_rows, int64_t cols) {
  const int64_t chunks = (n_rows < kRoundRows ? n_rows : kRoundRows) * (cols / 16);
  const int64_t want = (chunks + 31) / 32 * 32;
  return static_cast<int>(want < kThreads ? kThreads
                                          : (want > kRoundMaxThreads ? kRoundMaxThreads : want));
}

// launch(WeightsTag<W>{}) for the weights class of type id `type` where it
// has 8-bit products, then the launch's error; cudaErrorInvalidValue for a
// type without (the host side's Q8FormatFor said no before).
template <class Fn>
int LaunchForQ8(int type, Fn&& launch) {
  return VisitWeights(type, static_cast<int>(cudaErrorInvalidValue), [&](auto t) {
    using W = typename decltype(t)::type;
    if constexpr (kHasQ8Dot<W>) {
      launch(t);
      return static_cast<int>(cudaGetLastError());
    } else {
      return static_cast<int>(cudaErrorInvalidValue);
    }
  });
}

unsigned RoundBlocks(int64_t n_rows) {
  return static_cast<unsigned>((n_rows + kRoundRows - 1) / kRoundRows);
}

int LaunchRoundRowsQ8(int type, const float* x, int64_t n_rows, int64_t cols, int64_t x_stride,
                      uint8_t* out, CUstream_st* stream) {
  return LaunchForQ8(type, [&](auto t) {
    using W = typename decltype(t)::type;
    RoundRowsQ8Kernel<W><<<RoundBlocks(n_rows), RoundThreads(n_rows, cols), 0, stream>>>(
        x, n_rows, cols, x_stride, out);
  });
}

int LaunchSwiGluRoundQ8(int type, float* g, const float* u, int64_t n_rows, int64_t cols,
                        uint8_t* out, CUstream_st* stream) {
  return LaunchForQ8(type, [&](auto t) {
    using W = typename decltype(t)::type;
    SwiGluRoundQ8Kernel<W><<<RoundBlocks(n_rows), RoundThreads(n_rows, cols), 0, stream>>>(
        g, u, n_rows, cols, out);
  });
}

int LaunchNormRoundQ8(int type, float* x, const float* add, int64_t n_tok, int64_t n,
                      const float* w, float eps, float* xn, uint8_t* out, CUstream_st* stream) {
  return LaunchForQ8(type, [&](auto t) {
    using W = typename decltype(t)::type;
    WithNormElems(n, kNormThreads, [&](auto per) {
      NormRoundQ8Kernel<W, decltype(per)::value>
          <<<static_cast<unsigned>(n_tok), kNormThreads, 0, stream>>>(x, add, n, w, eps, xn, out);
    });
  });
}

int LaunchGroupedQ8(const RawGroupedMatMul& a, CUstream_st* stream) {
  const GroupedGeometry geo = GeometryFor(a);
  return VisitWeights(a.type, static_cast<int>(cudaErrorInvalidValue), [&](auto t) {
    using W = typename decltype(t)::type;
    if constexpr (kHasQ8Dot<W>) {
      return LaunchQ8<W>(a, geo, stream);
    } else {
      return static_cast<int>(cudaErrorInvalidValue);  // Q8KernelSupports said no
    }
  });
}

bool MmaKernelSupports(int type, int64_t cols) { return MmaSupportsShape(type, cols); }

int LaunchGroupedMma(const RawGroupedMatMul& a, CUstream_st* stream) {
  return VisitWeights(a.type, static_cast<int>(cudaErrorInvalidValue), [&](auto t) {
    using W = typename decltype(t)::type;
    if constexpr (std::is_same_v<W, F32Weights>) {
      return static_cast<int>(cudaErrorInvalidValue);  // F32 never takes this path
    } else {
      return LaunchMma<W>(a, stream);
    }
  });
}

int LaunchDequantRows(int type, const void* w, uint64_t row_bytes, int64_t cols,
                      const int32_t* ids, int64_t n, float* dst, CUstream_st* stream) {
  constexpr int kBlock = 256;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>((cols + kBlock - 1) / kBlock));
  DequantRowsKernel<<<grid, kBlock, 0, stream>>>(type, static_cast<const uint8_t*>(w), row_bytes,
                                                 cols, ids, dst);
  return static_cast<int>(cudaGetLastError());
}

const char* ErrorName(int code) { return cudaGetErrorName(static_cast<cudaError_t>(code)); }
const char* MatMulErrorString(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // namespace sluice::cuda::internal
