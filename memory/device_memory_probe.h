// The device's total and free memory for the fit planner, asked before the
// CUDA engine is built. Two implementations, chosen by the build: the CUDA
// one (CudaPlatform) where CUDA is built, and one that answers
// "unknown" (the planner then checks the host only and the engine's own
// allocation reports a device that is too small).
#ifndef SLUICE_MEMORY_DEVICE_MEMORY_PROBE_H_
#define SLUICE_MEMORY_DEVICE_MEMORY_PROBE_H_

#include "absl/status/statusor.h"
#include "memory/fit_planner.h"

namespace sluice::memory {

// UNAVAILABLE (with the driver's text) when CUDA is built but device
// `device` cannot be opened.
absl::StatusOr<DeviceMemory> ProbeDeviceMemory(int device);

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_DEVICE_MEMORY_PROBE_H_
