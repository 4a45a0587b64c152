// What the CUDA devices of this machine are and can do.
//
// The residency planner (memory/) needs exactly these facts: whether the GPU
// can address pageable host memory (alias dense weights in place) or must be
// given device copies (a discrete part such as the H200), and how much memory
// and L2 it has. Callers see plain C++ only; CUDA stays in the .cu file.
//
// Thread-safety: the functions are safe to call from any thread.
#ifndef SLUICE_KERNELS_CUDA_DEVICE_PROBE_H_
#define SLUICE_KERNELS_CUDA_DEVICE_PROBE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  int multiprocessors = 0;
  int l2_bytes = 0;
  int pageable_memory_access = 0;  // device can read pageable host memory
  int integrated = 0;              // shares physical memory with the host
  int host_register_supported = 0;
  int host_register_read_only_supported = 0;
  int concurrent_managed_access = 0;
  int pci_bus = 0;
  int pci_device = 0;
  int driver_version = 0;   // e.g. 13010 for 13.1
  int runtime_version = 0;  // the cudart this binary runs with

  // True where a device pointer may alias host bytes (DESIGN.md residency).
  bool CanAliasHostMemory() const {
    return pageable_memory_access != 0 && integrated != 0;
  }
};

// Every visible device. UNAVAILABLE (with the CUDA error text) where there is
// no driver or no device; an empty list is never returned as success.
absl::StatusOr<std::vector<DeviceInfo>> ProbeDevices();

// Runs a small kernel on `device` and checks its result on the host: proves
// that the code in this binary runs on that device. INTERNAL on a mismatch.
absl::Status RunSelfTest(int device);

// One line per attribute, "key=value", stable order (for logs and STATUS.md).
std::string FormatDeviceInfo(const DeviceInfo& info);

}  // namespace sluice::cuda

#endif  // SLUICE_KERNELS_CUDA_DEVICE_PROBE_H_
