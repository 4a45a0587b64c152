// The DevicePlatform of one CUDA device, over kernels/cuda (device.h and
// device_probe.h). CUDA-only target: absent under --config=nocuda.
//
// Every operation first makes the device current on the calling thread
// (CUDA's current device is per thread), so callers on any thread get the
// device this platform was created for.
#ifndef SLUICE_MEMORY_CUDA_PLATFORM_H_
#define SLUICE_MEMORY_CUDA_PLATFORM_H_

#include <memory>

#include "memory/platform.h"

namespace sluice::memory {

class CudaPlatform : public DevicePlatform {
 public:
  // UNAVAILABLE (with the CUDA error text, or the number of devices seen)
  // where there is no driver, no device or no device `device`.
  static absl::StatusOr<std::unique_ptr<CudaPlatform>> Create(int device);

  absl::StatusOr<PlatformFacts> Probe() override;
  absl::StatusOr<void*> Alloc(uint64_t bytes) override;
  void Free(void* device) override;
  // Synchronous: waits for the copy on the legacy default stream.
  absl::Status CopyToDevice(void* device_dst, const void* host_src,
                            uint64_t bytes) override;
  absl::Status RegisterHost(const void* host, uint64_t bytes,
                            bool read_only) override;
  absl::Status UnregisterHost(const void* host) override;
  absl::StatusOr<void*> DevicePointerOf(const void* host) override;

  int device() const { return device_; }

 private:
  explicit CudaPlatform(int device) : device_(device) {}
  const int device_;
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_CUDA_PLATFORM_H_
