// Usage profiles: how often each routed expert was used, saved so that a
// restarted worker can fill its device arena and host tier with the experts
// it will need before the first request (issue 22, "--expert_profile").
//
// File format (little-endian; docs/SLOT_CACHE.md, "Usage profiles"):
//
//   offset 0   magic     "SLEP"
//          4   version   uint32, 1
//          8   n_layer   uint32
//         12   n_expert  uint32
//         16   counts    uint64 x n_layer x n_expert, layer-major: uses of
//                        (layer, expert), each lookup counted once
//
// The file is exactly 16 + 8 x n_layer x n_expert bytes.
//
// Plain data; not thread-safe (the recorder serialises Record).
#ifndef SLUICE_MEMORY_EXPERT_PROFILE_H_
#define SLUICE_MEMORY_EXPERT_PROFILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/slot_cache.h"

namespace sluice::memory {

class ExpertProfile {
 public:
  // InvalidArgument unless n_layer, n_expert >= 1.
  static absl::StatusOr<ExpertProfile> Create(int32_t n_layer, int32_t n_expert);

  // Counts one use of each of `experts` of `layer`. InvalidArgument for a
  // layer or expert out of range (nothing counted then).
  absl::Status Record(int32_t layer, absl::Span<const int32_t> experts);
  uint64_t count(ExpertKey k) const { return counts_[Index(k)]; }
  int32_t n_layer() const { return n_layer_; }
  int32_t n_expert() const { return n_expert_; }

  // Every used key, the most used first (ties: lower layer, then lower
  // expert); unused keys are left out.
  std::vector<ExpertKey> Ranked() const;

  std::string Serialize() const;
  // Errors (InvalidArgument, the message starting with `name` and giving the
  // byte offset of the fault): bad magic, unknown version, a bad shape, a
  // size that is not 16 + 8 x n_layer x n_expert.
  static absl::StatusOr<ExpertProfile> Parse(std::string_view bytes,
                                             std::string_view name);
  absl::Status Save(const std::string& path) const;
  static absl::StatusOr<ExpertProfile> Load(const std::string& path);

 private:
  ExpertProfile(int32_t n_layer, int32_t n_expert)
      : n_layer_(n_layer), n_expert_(n_expert),
        counts_(static_cast<size_t>(n_layer) * n_expert, 0) {}
  size_t Index(ExpertKey k) const {
    return static_cast<size_t>(k.layer) * n_expert_ + k.expert;
  }
  int32_t n_layer_;
  int32_t n_expert_;
  std::vector<uint64_t> counts_;
};

// Which experts to load at start: the most used `device_slots` into the
// device arena; then, for the host tier, the next `host_slots` (exclusive
// tiers: an expert in one tier) or the most used `host_slots` (inclusive).
struct WarmPlan {
  std::vector<ExpertKey> device;
  std::vector<ExpertKey> host;
};
WarmPlan PlanWarmStart(const ExpertProfile& profile, int64_t device_slots,
                       int64_t host_slots, bool exclusive);

// Gives every used expert its profile count as uses at access `now`, so a
// frequency-aware policy starts out knowing what is hot (a first prefill
// wave after the restart then cannot flush the warmed experts).
// Precondition: the profile's shape is the caches' one.
void SeedFrequency(const ExpertProfile& profile, KeyFrequency& frequency,
                   uint64_t now = 0);

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_EXPERT_PROFILE_H_
