#include "worker/device_memory_probe.h"

namespace sluice::worker {

// A build without CUDA cannot ask a device; Engine::Create then reports that
// the CUDA backend is missing.
absl::StatusOr<memory::DeviceMemory> ProbeDeviceMemory(int) { return memory::DeviceMemory{}; }

}  // namespace sluice::worker
