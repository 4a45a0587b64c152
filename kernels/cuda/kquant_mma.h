// Launches of the Q4_K / Q5_K / Q6_K / Q1_0 integer tensor-core products
// (kquant_mma_device.h): a decode batch's grouped products summed in
// integers across each super-block. On unless SLUICE_CUDA_INT8_MMA=0
// (quant_matmul.cc; run 33, docs/CUDA_KERNELS.md).
#ifndef SLUICE_KERNELS_CUDA_KQUANT_MMA_H_
#define SLUICE_KERNELS_CUDA_KQUANT_MMA_H_

#include "kernels/cuda/quant_matmul_impl.h"

namespace sluice::cuda::internal {

// Whether LaunchKQuantMma takes a: Q4_K, Q5_K, Q6_K or Q1_0 weights, rows
// already rounded at x_q8 (Q8_K; Q1_0's to groups of 32), whole blocks, a
// pair only through a table of weights, a grid within CUDA's limits.
bool KQuantMmaTakes(const RawGroupedMatMul& a);

// The launch's variants (their switches are quant_matmul.cc's).
struct KQuantMmaOptions {
  // A block of a two-tile launch whose entries fit one tile takes one
  // (KQuantMmaShrinkingBlock).
  bool shrink = true;
  // Q4_K / Q5_K / Q1_0 blocks load the next block's weight words before
  // their sums (BlocksInTurn).
  bool ahead = false;
};

// Launches a's products (KQuantMmaTakes(a)) and returns cudaGetLastError()
// as an int.
int LaunchKQuantMma(const RawGroupedMatMul& a, KQuantMmaOptions options, CUstream_st* stream);

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_KQUANT_MMA_H_
