#include "memory/device_memory_probe.h"

namespace sluice::memory {

// A build without CUDA cannot ask a device; Engine::Create then reports that
// the CUDA backend is missing.
absl::StatusOr<DeviceMemory> ProbeDeviceMemory(int) { return DeviceMemory{}; }

}  // namespace sluice::memory
