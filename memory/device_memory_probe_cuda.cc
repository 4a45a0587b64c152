#include "base/status_macros.h"
#include "memory/cuda_platform.h"
#include "memory/device_memory_probe.h"

namespace sluice::memory {

absl::StatusOr<DeviceMemory> ProbeDeviceMemory(int device) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaPlatform> platform,
                   CudaPlatform::Create(device));
  ASSIGN_OR_RETURN(const PlatformFacts facts, platform->Probe());
  return DeviceMemory{true, facts.total_bytes, facts.free_bytes};
}

}  // namespace sluice::memory
