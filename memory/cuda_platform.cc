#include "memory/cuda_platform.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_probe.h"

namespace sluice::memory {

absl::StatusOr<std::unique_ptr<CudaPlatform>> CudaPlatform::Create(int device) {
  RETURN_IF_ERROR(cuda::SetDevice(device));
  return std::unique_ptr<CudaPlatform>(new CudaPlatform(device));
}

absl::StatusOr<PlatformFacts> CudaPlatform::Probe() {
  ASSIGN_OR_RETURN(std::vector<cuda::DeviceInfo> devices, cuda::ProbeDevices());
  for (const cuda::DeviceInfo& d : devices) {
    if (d.index != device_) continue;
    PlatformFacts f;
    f.name = absl::StrCat(d.name, " (device ", d.index, ")");
    f.pageable_memory_access = d.pageable_memory_access != 0;
    f.integrated = d.integrated != 0;
    f.host_register_supported = d.host_register_supported != 0;
    f.host_register_read_only_supported = d.host_register_read_only_supported != 0;
    f.free_bytes = d.free_bytes;
    f.total_bytes = d.total_bytes;
    return f;
  }
  return absl::UnavailableError(absl::StrCat("CUDA device ", device_, " is gone (",
                                             devices.size(), " visible)"));
}

absl::StatusOr<void*> CudaPlatform::Alloc(uint64_t bytes) {
  RETURN_IF_ERROR(cuda::SetDevice(device_));
  return cuda::DeviceAlloc(bytes);
}

void CudaPlatform::Free(void* device) {
  if (device == nullptr || !cuda::SetDevice(device_).ok()) return;
  cuda::DeviceFree(device);
}

absl::Status CudaPlatform::CopyToDevice(void* device_dst, const void* host_src,
                                        uint64_t bytes) {
  RETURN_IF_ERROR(cuda::SetDevice(device_));
  RETURN_IF_ERROR(cuda::CopyToDevice(device_dst, host_src, bytes, /*stream=*/nullptr));
  return cuda::Synchronize(nullptr);
}

absl::Status CudaPlatform::RegisterHost(const void* host, uint64_t bytes, bool read_only) {
  RETURN_IF_ERROR(cuda::SetDevice(device_));
  return cuda::HostRegister(host, bytes, read_only);
}

absl::Status CudaPlatform::UnregisterHost(const void* host) {
  RETURN_IF_ERROR(cuda::SetDevice(device_));
  return cuda::HostUnregister(host);
}

absl::StatusOr<void*> CudaPlatform::DevicePointerOf(const void* host) {
  RETURN_IF_ERROR(cuda::SetDevice(device_));
  return cuda::DevicePointerOf(host);
}

}  // namespace sluice::memory
