// A DevicePlatform for tests: configurable facts, "device" memory that is
// host memory it tracks (so a test reads back what was copied through the
// device pointer), a count of every call, and allocations that can be made
// to fail.
//
// Device capacity is facts.free_bytes: an Alloc that would take the bytes
// live beyond it fails with RESOURCE_EXHAUSTED, as cudaMalloc does. Copies
// are checked to land inside one live allocation (INVALID_ARGUMENT otherwise),
// so a placement bug shows up as an error rather than as memory corruption.
//
// Thread-safety: every method may be called concurrently.
#ifndef SLUICE_MEMORY_TESTING_FAKE_PLATFORM_H_
#define SLUICE_MEMORY_TESTING_FAKE_PLATFORM_H_

#include <cstdint>
#include <map>

#include "absl/synchronization/mutex.h"
#include "memory/platform.h"

namespace sluice::memory {

struct FakePlatformCalls {
  int probe = 0;
  int alloc = 0;
  int free = 0;
  int copy_to_device = 0;
  uint64_t bytes_copied = 0;
  int register_host = 0;
  int unregister_host = 0;
  int device_pointer_of = 0;
  int bad_free = 0;  // Free of a pointer that is not live
};

class FakePlatform : public DevicePlatform {
 public:
  explicit FakePlatform(PlatformFacts facts);
  ~FakePlatform() override;  // releases what is still live

  // An H200-like discrete part / a GB10-like unified part, `free` bytes free.
  static PlatformFacts Discrete(uint64_t free_bytes);
  static PlatformFacts Unified(uint64_t free_bytes);

  absl::StatusOr<PlatformFacts> Probe() override;
  absl::StatusOr<void*> Alloc(uint64_t bytes) override;
  void Free(void* device) override;
  absl::Status CopyToDevice(void* device_dst, const void* host_src,
                            uint64_t bytes) override;
  absl::Status RegisterHost(const void* host, uint64_t bytes,
                            bool read_only) override;
  absl::Status UnregisterHost(const void* host) override;
  absl::StatusOr<void*> DevicePointerOf(const void* host) override;

  // The next `n` Alloc calls fail with RESOURCE_EXHAUSTED whatever the size.
  void FailNextAllocs(int n);

  FakePlatformCalls calls() const;
  int live_allocations() const;
  uint64_t live_bytes() const;

 private:
  mutable absl::Mutex mu_;
  const PlatformFacts facts_;
  FakePlatformCalls calls_ ABSL_GUARDED_BY(mu_);
  std::map<const char*, uint64_t> live_ ABSL_GUARDED_BY(mu_);  // start -> bytes
  uint64_t live_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_allocs_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<const char*, uint64_t> registered_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_TESTING_FAKE_PLATFORM_H_
