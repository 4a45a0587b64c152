#include "memory/accounting.h"

namespace sluice::memory {

std::string_view DeviceMemoryKindLabel(DeviceMemoryKind kind) {
  switch (kind) {
    case DeviceMemoryKind::kDense:
      return "dense";
    case DeviceMemoryKind::kKvState:
      return "kv_state";
    case DeviceMemoryKind::kWorkspace:
      return "workspace";
    case DeviceMemoryKind::kExpertArena:
      return "expert_arena";
  }
  return "unknown";
}

uint64_t DeviceMemoryBytes::total() const {
  uint64_t sum = 0;
  for (uint64_t b : bytes) sum += b;
  return sum;
}

void DeviceMemoryAccounting::Set(DeviceMemoryKind kind, uint64_t bytes) {
  bytes_[static_cast<int>(kind)].store(bytes, std::memory_order_relaxed);
}

void DeviceMemoryAccounting::Add(DeviceMemoryKind kind, uint64_t bytes) {
  bytes_[static_cast<int>(kind)].fetch_add(bytes, std::memory_order_relaxed);
}

void DeviceMemoryAccounting::Release(DeviceMemoryKind kind, uint64_t bytes) {
  std::atomic<uint64_t>& v = bytes_[static_cast<int>(kind)];
  uint64_t old = v.load(std::memory_order_relaxed);
  while (!v.compare_exchange_weak(old, old > bytes ? old - bytes : 0,
                                  std::memory_order_relaxed)) {
  }
}

uint64_t DeviceMemoryAccounting::Get(DeviceMemoryKind kind) const {
  return bytes_[static_cast<int>(kind)].load(std::memory_order_relaxed);
}

DeviceMemoryBytes DeviceMemoryAccounting::Read() const {
  DeviceMemoryBytes out;
  for (int i = 0; i < kDeviceMemoryKindCount; ++i) {
    out.bytes[i] = bytes_[i].load(std::memory_order_relaxed);
  }
  return out;
}

}  // namespace sluice::memory
