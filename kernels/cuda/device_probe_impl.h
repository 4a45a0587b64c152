// The nvcc-compiled half of device_probe: CUDA error codes as plain ints and
// no Abseil, so that nvcc never parses Abseil headers.
#ifndef SLUICE_KERNELS_CUDA_DEVICE_PROBE_IMPL_H_
#define SLUICE_KERNELS_CUDA_DEVICE_PROBE_IMPL_H_

#include <cstdint>

namespace sluice::cuda::internal {

struct RawDeviceInfo {
  char name[256] = {};
  int cc_major = 0, cc_minor = 0, multiprocessors = 0, l2_bytes = 0;
  int pageable_memory_access = 0, integrated = 0, host_register_supported = 0;
  int host_register_read_only_supported = 0, concurrent_managed_access = 0;
  int pci_bus = 0, pci_device = 0, driver_version = 0, runtime_version = 0;
  uint64_t free_bytes = 0, total_bytes = 0;
};

// Each returns a cudaError_t value (0 = success).
int DeviceCount(int* count);
int Probe(int device, RawDeviceInfo* out);
int Axpy(int device, int n, float a, const float* x, float* y);
const char* ErrorString(int code);

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_DEVICE_PROBE_IMPL_H_
