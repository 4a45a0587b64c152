#include "base/status_macros.h"
#include "memory/cuda_platform.h"
#include "worker/device_memory_probe.h"

namespace sluice::worker {

absl::StatusOr<memory::DeviceMemory> ProbeDeviceMemory(int device) {
  ASSIGN_OR_RETURN(std::unique_ptr<memory::CudaPlatform> platform,
                   memory::CudaPlatform::Create(device));
  ASSIGN_OR_RETURN(const memory::PlatformFacts facts, platform->Probe());
  return memory::DeviceMemory{true, facts.total_bytes, facts.free_bytes};
}

}  // namespace sluice::worker
