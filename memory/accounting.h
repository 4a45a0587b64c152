// Device memory in use, by kind: what the CUDA model allocates, filled in by
// it as it allocates, read by the worker for its reports to the supervisor
// (exported as sluice_device_memory_bytes{kind="..."}).
//
//   DeviceMemoryAccounting acct;
//   acct.Set(DeviceMemoryKind::kDense, residency->counters().device_bytes_owned);
//   acct.Add(DeviceMemoryKind::kWorkspace, workspace_bytes);
//   acct.Release(DeviceMemoryKind::kWorkspace, workspace_bytes);
//
// Thread-safety: every method may be called concurrently (atomics per kind;
// a Read() is not one atomic snapshot across kinds, which figures sampled
// for a gauge do not need).
#ifndef SLUICE_MEMORY_ACCOUNTING_H_
#define SLUICE_MEMORY_ACCOUNTING_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

namespace sluice::memory {

enum class DeviceMemoryKind {
  kDense,        // dense weights (DenseResidency: copied, staged)
  kKvState,      // KV cache and recurrent (DeltaNet, conv) state
  kWorkspace,    // activations, scratch, cuBLASLt workspace
  kExpertArena,  // the expert slot arena
};

inline constexpr int kDeviceMemoryKindCount = 4;
inline constexpr std::array<DeviceMemoryKind, kDeviceMemoryKindCount> kAllDeviceMemoryKinds = {
    DeviceMemoryKind::kDense, DeviceMemoryKind::kKvState, DeviceMemoryKind::kWorkspace,
    DeviceMemoryKind::kExpertArena};

// The Prometheus label value of `kind`: "dense", "kv_state", "workspace",
// "expert_arena".
std::string_view DeviceMemoryKindLabel(DeviceMemoryKind kind);

struct DeviceMemoryBytes {
  std::array<uint64_t, kDeviceMemoryKindCount> bytes{};
  uint64_t of(DeviceMemoryKind kind) const { return bytes[static_cast<int>(kind)]; }
  uint64_t total() const;
};

class DeviceMemoryAccounting {
 public:
  void Set(DeviceMemoryKind kind, uint64_t bytes);
  void Add(DeviceMemoryKind kind, uint64_t bytes);
  // Subtracts, stopping at 0: a release larger than what was added is a
  // caller bug that must not turn the gauge into 2^64 - n.
  void Release(DeviceMemoryKind kind, uint64_t bytes);
  uint64_t Get(DeviceMemoryKind kind) const;
  DeviceMemoryBytes Read() const;

 private:
  std::array<std::atomic<uint64_t>, kDeviceMemoryKindCount> bytes_{};
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_ACCOUNTING_H_
