// The host's rows of a decode step's routed experts added on the device:
// the host CPU computes some of a layer's missed experts (memory/miss_split.h)
// and their output rows come over after the device's own products, so the
// device adds them, weighted by their routing weights, to the layer's
// output in a launch of its own rather than holding its products back for
// them.
//
// Enqueues only; launch errors surface through LastLaunchError (device.h).
#ifndef SLUICE_KERNELS_CUDA_HOST_ROWS_H_
#define SLUICE_KERNELS_CUDA_HOST_ROWS_H_

#include <cstdint>

#include "kernels/cuda/ops.h"

namespace sluice::cuda {

// y[i] += sum over s < k, in slot order, of weights[s] * rows[s * n + i],
// for i < n (rows: [k][n], zero where the host computed nothing).
void AddWeightedRows(const float* rows, const float* weights, int k, int64_t n, float* y,
                     Stream stream);

}  // namespace sluice::cuda

#endif  // SLUICE_KERNELS_CUDA_HOST_ROWS_H_
