// Dense (non-expert) weights on the device exactly once (DESIGN.md,
// "Residency rules").
//
// Given every dense tensor's host bytes, DenseResidency::Place decides per
// tensor, from the platform's facts, where the device reads it:
//
//   discrete part (no pageable access, or not integrated; the H200):
//     kCopied   one device allocation for all tensors, each at a
//               kDeviceAlignment offset, filled by one copy per tensor
//               straight from the host bytes. No pinned or anonymous host
//               copy is made, and owned host buffers are released once
//               copied, so afterwards the host holds only the mapping.
//   unified part (pageable access and integrated; a GB10):
//     kAliased  aligned host bytes are used in place: the device pointer is
//               the host address. A copy would be a second copy in the same
//               RAM.
//     kRehomed  an OWNED misaligned buffer is moved once into an aligned
//               host block (the original is released), then aliased.
//     kStaged   a BORROWED misaligned range (a tensor inside the read-only
//               mapping) is copied to device memory. Copying it into
//               anonymous host memory instead would create exactly the
//               resident duplicate this avoids: staged bytes count as
//               device memory, the mapping's pages stay reclaimable.
//
// Copies go straight from the host bytes, one per tensor, synchronously. On
// the H200 a pageable copy from the hot mapping measured 8.0 GB/s against
// 6.1 GB/s for a single-thread memcpy through a pinned bounce ring
// (DESIGN.md), so a staging buffer would only pay off with several fill
// threads; registering the mapping would pin pages this must not keep.
//
// Lookups go by host address: any address inside a placed tensor (as given
// at placement) maps to the same offset of its device copy or alias.
//
// Lifetimes: the platform must outlive the DenseResidency; borrowed host
// bytes (the mapping) must outlive it where they are aliased. The device
// memory and re-homed blocks are released by the destructor.
//
// Thread-safety: Place is a factory; the const lookups may be called
// concurrently.
#ifndef SLUICE_MEMORY_DENSE_RESIDENCY_H_
#define SLUICE_MEMORY_DENSE_RESIDENCY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/tensor_table.h"
#include "memory/platform.h"

namespace sluice::memory {

// Every device pointer of a placed tensor is a multiple of this: cuBLASLt's
// default minimum alignment for its A/B/C/D operands. Pinned by a test.
inline constexpr uint64_t kDeviceAlignment = 256;

// `bytes` rounded up to a multiple of kDeviceAlignment.
constexpr uint64_t AlignUp(uint64_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

struct DenseTensor {
  std::string name;
  const void* host = nullptr;  // first byte of the tensor's data
  uint64_t bytes = 0;
  // Null: borrowed (bytes inside the read-only mapping, which outlives the
  // placement). Non-null: the tensor lives in a buffer this keeps alive; the
  // placement takes it over and releases it where the device does not read
  // it in place (copied, re-homed). Callers keep no other reference.
  std::shared_ptr<const void> owner;
};

// Every dense (non-routed-expert) tensor of `table`, borrowed from its
// read-only mapping, in table order: the input Place needs for a model's
// weights. INVALID_ARGUMENT when the table was built without mappings.
absl::StatusOr<std::vector<DenseTensor>> DenseTensorsOf(const TensorTable& table);

enum class PlacementKind { kCopied, kAliased, kRehomed, kStaged };
std::string_view PlacementKindName(PlacementKind kind);

struct DensePlacement {
  std::string name;
  const void* host = nullptr;  // as given to Place
  uint64_t bytes = 0;
  void* device = nullptr;      // kDeviceAlignment-aligned
  PlacementKind kind = PlacementKind::kCopied;
};

struct ResidencyCounters {
  uint64_t tensors = 0;
  uint64_t bytes_copied = 0;   // kCopied: host -> device
  uint64_t bytes_aliased = 0;  // kAliased only (re-homed ones count below)
  uint64_t bytes_rehomed = 0;  // kRehomed: moved into aligned host blocks
  uint64_t bytes_staged = 0;   // kStaged: host -> device on a unified part
  // The device allocation (copied or staged tensors with alignment padding).
  uint64_t device_bytes_owned = 0;
  // Aligned host blocks holding re-homed tensors.
  uint64_t host_bytes_owned = 0;
};

class DenseResidency {
 public:
  // Places `tensors` (see the file comment). Errors: INVALID_ARGUMENT for a
  // null pointer, an empty tensor or two overlapping ones (names given);
  // RESOURCE_EXHAUSTED when the device allocation does not fit, naming the
  // bytes needed, the tensor count and the device's free and total bytes;
  // the platform's error when a probe or copy fails. On error nothing stays
  // allocated.
  // `progress`, when set, is called after each tensor placed with the bytes
  // placed so far and the total (a load's "dense" phase).
  using Progress = std::function<void(uint64_t done, uint64_t total)>;
  static absl::StatusOr<std::unique_ptr<DenseResidency>> Place(
      DevicePlatform& platform, std::vector<DenseTensor> tensors,
      const Progress& progress = nullptr);

  ~DenseResidency();
  DenseResidency(const DenseResidency&) = delete;
  DenseResidency& operator=(const DenseResidency&) = delete;

  // The device address of `host`, which may point anywhere inside a placed
  // tensor. NOT_FOUND (naming the address) when no placed tensor holds it.
  absl::StatusOr<void*> DevicePointer(const void* host) const;
  // The placement of the tensor named `name`, or nullptr.
  const DensePlacement* Find(std::string_view name) const;

  const std::vector<DensePlacement>& placements() const { return placements_; }
  const ResidencyCounters& counters() const { return counters_; }
  const PlatformFacts& facts() const { return facts_; }

 private:
  DenseResidency(DevicePlatform& platform, PlatformFacts facts)
      : platform_(platform), facts_(std::move(facts)) {}
  absl::Status Fill(std::vector<DenseTensor>& tensors, const Progress& progress);

  DevicePlatform& platform_;
  const PlatformFacts facts_;
  void* device_block_ = nullptr;
  std::vector<void*> host_blocks_;  // re-homed tensors (aligned_alloc)
  std::vector<std::shared_ptr<const void>> kept_owners_;  // aliased in place
  std::vector<DensePlacement> placements_;
  std::map<const char*, size_t> by_host_;  // host start -> placements_ index
  ResidencyCounters counters_;
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_DENSE_RESIDENCY_H_
