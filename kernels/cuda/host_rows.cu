// Device code of host_rows.h: a thread an element.
#include <cuda_runtime.h>

#include "kernels/cuda/host_rows.h"

namespace sluice::cuda {
namespace {

__global__ void AddWeightedRowsKernel(const float* rows, const float* weights, int k, int64_t n,
                                      float* y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float sum = 0.0f;
  for (int s = 0; s < k; ++s) sum += weights[s] * rows[s * n + i];
  y[i] += sum;
}

}  // namespace

void AddWeightedRows(const float* rows, const float* weights, int k, int64_t n, float* y,
                     Stream stream) {
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  AddWeightedRowsKernel<<<blocks, kThreads, 0, stream>>>(rows, weights, k, n, y);
}

}  // namespace sluice::cuda
