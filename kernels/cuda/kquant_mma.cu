// The Q4_K / Q5_K / Q6_K / Q1_0 integer tensor-core products' launch (kquant_mma.h).
#include "kernels/cuda/kquant_mma.h"

#include <cuda_runtime.h>

#include "kernels/cuda/kquant_mma_device.h"

namespace sluice::cuda::internal {
namespace {

// kShrink: a block of a two-tile launch with 8 entries or fewer takes one
// tile (KQuantMmaShrinkingBlock). No minimum of blocks an SM: asking for 8
// / 5 at one / two tiles (64 / 96 registers, 76-256 bytes spilt) was 1-5%
// slower at 4-32 sequences (H100, run 35); naming a minimum of 1 lets the
// compiler take up to 167 registers.
// kAhead: Q4_K / Q5_K / Q1_0 blocks load the next block's weight words
// before their sums (KQuantMmaSums, SumsByParity).
template <int kType, int NT, bool kShrink = false, bool kAhead = false>
__global__ void __launch_bounds__(32 * kKQuantMmaWarps)
    KQuantMmaKernel(const __grid_constant__ RawGroupedMatMul a) {
  __shared__ float part[kKQuantMmaWarps * 32 * 4 * NT];
  if constexpr (kShrink) {
    KQuantMmaShrinkingBlock<kType, kAhead>(a, part);
  } else {
    KQuantMmaBlock<kType, NT, NT, kAhead>(a, part);
  }
}

// The launch's grid for a: row blocks (twice over for a pair), entry
// blocks (8 KQuantMmaTiles entries each) and groups.
struct Grid {
  int64_t x, y, z;
};
Grid GridOf(const RawGroupedMatMul& a) {
  const int64_t entries =
      static_cast<int64_t>(kKQuantMmaEntries) * KQuantMmaTiles(a.max_entries_per_group);
  return {KQuantMmaRowBlocks(a), (a.max_entries_per_group + entries - 1) / entries, a.n_groups};
}

template <int kType, bool kAhead>
void LaunchAs(const RawGroupedMatMul& a, bool shrink, dim3 grid, CUstream_st* stream) {
  if (KQuantMmaTiles(a.max_entries_per_group) == 2) {
    if (shrink) {
      KQuantMmaKernel<kType, 2, true, kAhead><<<grid, 32 * kKQuantMmaWarps, 0, stream>>>(a);
    } else {
      KQuantMmaKernel<kType, 2, false, kAhead><<<grid, 32 * kKQuantMmaWarps, 0, stream>>>(a);
    }
  } else {
    KQuantMmaKernel<kType, 1, false, kAhead><<<grid, 32 * kKQuantMmaWarps, 0, stream>>>(a);
  }
}

template <int kType>
void Launch(const RawGroupedMatMul& a, KQuantMmaOptions o, dim3 grid, CUstream_st* stream) {
  constexpr bool kAheadType = kType != kKQuantMmaQ6K;
  if (kAheadType && o.ahead) {
    LaunchAs<kType, kAheadType>(a, o.shrink, grid, stream);
  } else {
    LaunchAs<kType, false>(a, o.shrink, grid, stream);
  }
}

}  // namespace

bool KQuantMmaTakes(const RawGroupedMatMul& a) {
  if (!KQuantMmaTypeSupported(a.type) || a.x_q8 == nullptr || a.cols <= 0 ||
      a.cols % KQuantMmaUnitCols(a.type) != 0 || a.rows <= 0 || a.n_groups <= 0 ||
      a.max_entries_per_group <= 0) {
    return false;
  }
  if (a.up_offset != 0 && (a.single_weight != nullptr || a.weights == nullptr ||
                           a.y_up == nullptr)) {
    return false;
  }
  const Grid g = GridOf(a);
  return g.x <= 2147483647 && g.y <= 65535 && g.z <= 65535;
}

int LaunchKQuantMma(const RawGroupedMatMul& a, KQuantMmaOptions options, CUstream_st* stream) {
  const Grid g = GridOf(a);
  const dim3 grid(static_cast<unsigned>(g.x), static_cast<unsigned>(g.y),
                  static_cast<unsigned>(g.z));
  if (a.type == kKQuantMmaQ1_0) {
    Launch<kKQuantMmaQ1_0>(a, options, grid, stream);
  } else if (a.type == kKQuantMmaQ6K) {
    Launch<kKQuantMmaQ6K>(a, options, grid, stream);
  } else if (a.type == kKQuantMmaQ5K) {
    Launch<kKQuantMmaQ5K>(a, options, grid, stream);
  } else {
    Launch<kKQuantMmaQ4K>(a, options, grid, stream);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace sluice::cuda::internal
