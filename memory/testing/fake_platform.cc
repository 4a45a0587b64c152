#include "memory/testing/fake_platform.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sluice::memory {
namespace {

// The device alignment cudaMalloc guarantees, which callers may rely on.
constexpr uint64_t kFakeAllocAlignment = 256;

// Whether [p, p + bytes) lies inside one entry of `ranges` (start -> size).
bool Inside(const std::map<const char*, uint64_t>& ranges, const char* p,
            uint64_t bytes) {
  auto it = ranges.upper_bound(p);
  if (it == ranges.begin()) return false;
  --it;
  const uint64_t offset = static_cast<uint64_t>(p - it->first);
  return offset <= it->second && bytes <= it->second - offset;
}

}  // namespace

FakePlatform::FakePlatform(PlatformFacts facts) : facts_(std::move(facts)) {}

FakePlatform::~FakePlatform() {
  for (auto& [p, bytes] : live_) std::free(const_cast<char*>(p));
}

PlatformFacts FakePlatform::Discrete(uint64_t free_bytes) {
  PlatformFacts f;
  f.name = "fake discrete GPU";
  f.host_register_supported = true;
  f.host_register_read_only_supported = true;
  f.free_bytes = free_bytes;
  f.total_bytes = free_bytes;
  return f;
}

PlatformFacts FakePlatform::Unified(uint64_t free_bytes) {
  PlatformFacts f = Discrete(free_bytes);
  f.name = "fake unified-memory GPU";
  f.pageable_memory_access = true;
  f.integrated = true;
  return f;
}

absl::StatusOr<PlatformFacts> FakePlatform::Probe() {
  absl::MutexLock lock(&mu_);
  ++calls_.probe;
  PlatformFacts f = facts_;
  f.free_bytes = facts_.free_bytes - live_bytes_;
  return f;
}

absl::StatusOr<void*> FakePlatform::Alloc(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  ++calls_.alloc;
  const uint64_t free_now = facts_.free_bytes - live_bytes_;
  if (fail_allocs_ > 0 || bytes > free_now) {
    if (fail_allocs_ > 0) --fail_allocs_;
    return absl::ResourceExhaustedError(absl::StrCat(
        "fake device: cannot allocate ", bytes, " bytes (", free_now, " of ",
        facts_.total_bytes, " free)"));
  }
  const uint64_t rounded =
      (bytes + kFakeAllocAlignment - 1) / kFakeAllocAlignment * kFakeAllocAlignment;
  void* p = std::aligned_alloc(kFakeAllocAlignment, rounded == 0 ? kFakeAllocAlignment : rounded);
  if (p == nullptr) return absl::ResourceExhaustedError("fake device: host malloc failed");
  live_[static_cast<const char*>(p)] = bytes;
  live_bytes_ += bytes;
  return p;
}

void FakePlatform::Free(void* device) {
  if (device == nullptr) return;
  absl::MutexLock lock(&mu_);
  ++calls_.free;
  auto it = live_.find(static_cast<const char*>(device));
  if (it == live_.end()) {
    ++calls_.bad_free;
    return;
  }
  live_bytes_ -= it->second;
  live_.erase(it);
  std::free(device);
}

absl::Status FakePlatform::CopyToDevice(void* device_dst, const void* host_src,
                                        uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  ++calls_.copy_to_device;
  if (!Inside(live_, static_cast<const char*>(device_dst), bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fake device: copy of ", bytes, " bytes to 0x", absl::Hex(reinterpret_cast<uintptr_t>(device_dst)),
        " does not land inside one allocation"));
  }
  calls_.bytes_copied += bytes;
  if (bytes != 0) std::memcpy(device_dst, host_src, bytes);
  return absl::OkStatus();
}

absl::Status FakePlatform::RegisterHost(const void* host, uint64_t bytes, bool read_only) {
  absl::MutexLock lock(&mu_);
  ++calls_.register_host;
  if (!facts_.host_register_supported ||
      (read_only && !facts_.host_register_read_only_supported)) {
    return absl::UnimplementedError("fake device: host registration not supported");
  }
  registered_[static_cast<const char*>(host)] = bytes;
  return absl::OkStatus();
}

absl::Status FakePlatform::UnregisterHost(const void* host) {
  absl::MutexLock lock(&mu_);
  ++calls_.unregister_host;
  if (registered_.erase(static_cast<const char*>(host)) == 0) {
    return absl::InvalidArgumentError("fake device: host memory was not registered");
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> FakePlatform::DevicePointerOf(const void* host) {
  absl::MutexLock lock(&mu_);
  ++calls_.device_pointer_of;
  if (!Inside(registered_, static_cast<const char*>(host), 0)) {
    return absl::InvalidArgumentError("fake device: host memory is not registered");
  }
  return const_cast<void*>(host);  // the fake's device addresses are host addresses
}

void FakePlatform::FailNextAllocs(int n) {
  absl::MutexLock lock(&mu_);
  fail_allocs_ = n;
}

FakePlatformCalls FakePlatform::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

int FakePlatform::live_allocations() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(live_.size());
}

uint64_t FakePlatform::live_bytes() const {
  absl::MutexLock lock(&mu_);
  return live_bytes_;
}

}  // namespace sluice::memory
