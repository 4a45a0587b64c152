// The Q4_K / Q5_K integer tensor-core products' launch (kquant_mma.h).
#include "kernels/cuda/kquant_mma.h"

#include <cuda_runtime.h>

#include "kernels/cuda/kquant_mma_device.h"

namespace sluice::cuda::internal {
namespace {

constexpr int kQ4K = 12, kQ5K = 13;  // ggml type ids

template <bool kQ5, int NT>
__global__ void __launch_bounds__(32 * kKQuantMmaWarps)
    KQuantMmaKernel(const __grid_constant__ RawGroupedMatMul a) {
  __shared__ float part[kKQuantMmaWarps * 32 * 4 * NT];
  KQuantMmaBlock<kQ5, NT>(a, part);
}

// Entries a block covers for a: 8 KQuantMmaTiles.
int64_t BlockEntries(const RawGroupedMatMul& a) {
  return static_cast<int64_t>(kKQuantMmaEntries) * KQuantMmaTiles(a.max_entries_per_group);
}

}  // namespace

bool KQuantMmaTakes(const RawGroupedMatMul& a) {
  if (a.cols <= 0 || a.max_entries_per_group <= 0) return false;
  const int64_t block_rows = KQuantMmaBlockRows(a.cols);
  const int64_t row_tiles = (a.rows + block_rows - 1) / block_rows;
  const int64_t entry_tiles = (a.max_entries_per_group + BlockEntries(a) - 1) / BlockEntries(a);
  return (a.type == kQ4K || a.type == kQ5K) && a.x_q8 != nullptr && a.cols % 256 == 0 &&
         a.up_offset == 0 && a.rows > 0 && a.n_groups > 0 && row_tiles <= 2147483647 &&
         entry_tiles <= 65535 && a.n_groups <= 65535;
}

int LaunchKQuantMma(const RawGroupedMatMul& a, CUstream_st* stream) {
  const int64_t block_rows = KQuantMmaBlockRows(a.cols);
  const dim3 grid(static_cast<unsigned>((a.rows + block_rows - 1) / block_rows),
                  static_cast<unsigned>((a.max_entries_per_group + BlockEntries(a) - 1) /
                                        BlockEntries(a)),
                  static_cast<unsigned>(a.n_groups));
  const bool q5 = a.type == kQ5K, two = KQuantMmaTiles(a.max_entries_per_group) == 2;
  const int threads = 32 * kKQuantMmaWarps;
  if (q5 && two) {
    KQuantMmaKernel<true, 2><<<grid, threads, 0, stream>>>(a);
  } else if (q5) {
    KQuantMmaKernel<true, 1><<<grid, threads, 0, stream>>>(a);
  } else if (two) {
    KQuantMmaKernel<false, 2><<<grid, threads, 0, stream>>>(a);
  } else {
    KQuantMmaKernel<false, 1><<<grid, threads, 0, stream>>>(a);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace sluice::cuda::internal
