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

// The launch's grid for a: row blocks, entry blocks (8 KQuantMmaTiles
// entries each) and groups.
struct Grid {
  int64_t x, y, z;
};
Grid GridOf(const RawGroupedMatMul& a) {
  const int64_t rows = KQuantMmaBlockRows(a.cols);
  const int64_t entries =
      static_cast<int64_t>(kKQuantMmaEntries) * KQuantMmaTiles(a.max_entries_per_group);
  return {(a.rows + rows - 1) / rows, (a.max_entries_per_group + entries - 1) / entries,
          a.n_groups};
}

}  // namespace

bool KQuantMmaTakes(const RawGroupedMatMul& a) {
  if ((a.type != kQ4K && a.type != kQ5K) || a.x_q8 == nullptr || a.cols <= 0 ||
      a.cols % 256 != 0 || a.up_offset != 0 || a.rows <= 0 || a.n_groups <= 0 ||
      a.max_entries_per_group <= 0) {
    return false;
  }
  const Grid g = GridOf(a);
  return g.x <= 2147483647 && g.y <= 65535 && g.z <= 65535;
}

int LaunchKQuantMma(const RawGroupedMatMul& a, CUstream_st* stream) {
  const Grid g = GridOf(a);
  const dim3 grid(static_cast<unsigned>(g.x), static_cast<unsigned>(g.y),
                  static_cast<unsigned>(g.z));
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
