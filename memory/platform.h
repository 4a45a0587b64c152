// The device facts and operations that residency decisions need, behind an
// interface so that every branch of the placement logic runs in CPU-only
// tests (memory/testing/fake_platform.h) and the real one
// (memory/cuda_platform.h) stays a thin layer over kernels/cuda.
//
// A "device pointer" is whatever the device's kernels dereference: memory
// from Alloc, or, on a part that can address pageable host memory, a host
// address itself.
//
// Thread-safety: implementations must allow concurrent calls.
#ifndef SLUICE_MEMORY_PLATFORM_H_
#define SLUICE_MEMORY_PLATFORM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice::memory {

struct PlatformFacts {
  std::string name;
  // The device can read pageable host memory at its host address
  // (cudaDevAttrPageableMemoryAccess).
  bool pageable_memory_access = false;
  // Device and host share physical memory (cudaDevAttrIntegrated): a device
  // copy of host bytes would be a second copy in the same RAM.
  bool integrated = false;
  bool host_register_supported = false;
  bool host_register_read_only_supported = false;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;

  // DESIGN.md "Residency rules": alias host bytes only where both hold (a
  // GB10); an HMM-capable discrete part still gets device copies.
  bool CanAliasHostMemory() const { return pageable_memory_access && integrated; }
};

class DevicePlatform {
 public:
  virtual ~DevicePlatform() = default;

  // Facts of the device this platform drives, free bytes read now.
  virtual absl::StatusOr<PlatformFacts> Probe() = 0;

  // Device memory aligned to at least 256 bytes. RESOURCE_EXHAUSTED when it
  // does not fit; the message names the request and the free bytes.
  virtual absl::StatusOr<void*> Alloc(uint64_t bytes) = 0;
  // Releases memory from Alloc; nullptr is ignored.
  virtual void Free(void* device) = 0;

  // Copies host bytes to device memory; complete when it returns, so the
  // source may be released or unmapped at once.
  virtual absl::Status CopyToDevice(void* device_dst, const void* host_src,
                                    uint64_t bytes) = 0;

  // Page-locks a host range and maps it for the device (read_only for a
  // read-only mapping); UnregisterHost takes the start address back.
  virtual absl::Status RegisterHost(const void* host, uint64_t bytes,
                                    bool read_only) = 0;
  virtual absl::Status UnregisterHost(const void* host) = 0;
  // The device address of registered host memory.
  virtual absl::StatusOr<void*> DevicePointerOf(const void* host) = 0;
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_PLATFORM_H_
