// The device arena and the host tier chosen together: two SlotCaches (the
// device's slots, the pinned host tier's slots) in front of the disk, driven
// as one two-level cache. Plain C++, no CUDA: it decides and counts; the
// caller (tools/slotsim today) owns the memory and the copies.
//
// Inclusive (what model/cuda does today): every device miss goes through
// the host tier, which keeps a copy of what it passed up, so an expert in a
// device slot usually holds a host slot too: with a device arena of D slots
// and a host tier of H, only about max(D, H) distinct experts stay off disk.
//
// Exclusive (the default here): an expert lives in at most one tier, so D +
// H distinct experts stay off disk (the 370 GiB target: 110 GiB on
// the device plus 100 GiB of host tier hold ~57% of its experts, against
// ~30% inclusive). A device miss
//   - found in the host tier is copied up, and its host slot is freed once
//     the copy is done (`promoted`);
//   - not found is read from disk into staging and copied up; it does not
//     take a host slot;
//   - that evicts a device victim demotes the victim: it is Offered to the
//     host tier (its policy may refuse it: a one-off expert is not worth a
//     hotter host expert), and the caller copies it down from its device
//     slot before that slot is refilled (`demotions`; a device-to-host copy,
//     the direction the disk path leaves idle);
//   - forced (no device slot) is read where it is (host) or from disk, and
//     one from disk is Offered to the host tier.
// With a shared KeyFrequency (tinylfu in either tier) every lookup is
// counted once, before either tier decides, so an expert moving between the
// tiers keeps its history.
//
// Order within a step, so that no copy overwrites bytes another still needs:
// the host slots of the step's promoted experts stay held (protected)
// through the step and are freed at its end, so a demotion never lands in
// the slot a promotion is reading from. The host tier therefore needs a
// step's promotions of slack (a few slots in thousands; or staging buffers
// that trade places with the freed slots), which inclusive does not.
//
// Thread-safety: one caller at a time (the caches' own locks do not make a
// Step atomic).
#ifndef SLUICE_MEMORY_EXPERT_TIERS_H_
#define SLUICE_MEMORY_EXPERT_TIERS_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/slot_cache.h"

namespace sluice::memory {

struct ExpertTiersOptions {
  int32_t n_layer = 0;
  int32_t n_expert = 0;
  int32_t device_slots = 0;
  int32_t host_slots = 0;
  uint64_t slice_bytes = 1;  // one expert's bytes (counters)
  bool exclusive = true;
};

// Where a looked-up expert's bytes come from.
enum class ExpertSource { kDevice, kHost, kDisk };

struct TierStep {
  // Per expert of the call, in order: the device's assignment and the
  // source of its bytes (kDevice for a device hit).
  std::vector<SlotAssignment> device;
  std::vector<ExpertSource> source;
  // For kHost: the host slot read from; -1 otherwise.
  std::vector<int32_t> host_slot;
  // Exclusive: device victims to copy down, from their device slot into a
  // host slot, before the device slot is refilled.
  struct Demotion {
    ExpertKey key;
    int32_t device_slot = -1;
    int32_t host_slot = -1;
  };
  std::vector<Demotion> demotions;
  // Exclusive: experts whose host slot was freed at the end of the step
  // (they moved up; the caller's copy out of the slot must be done by the
  // next step).
  std::vector<ExpertKey> promoted;
};

struct ExpertTiersCounters {
  SlotCacheCounters device;  // the device arena's own counters
  SlotCacheCounters host;    // the host tier's (inclusive: its lookups)
  uint64_t lookups = 0;
  uint64_t device_hits = 0;
  uint64_t host_hits = 0;  // device misses found in the host tier
  uint64_t disk_reads = 0;  // device misses read from disk
  uint64_t demoted = 0;     // device victims copied into the host tier
  uint64_t dropped = 0;     // device victims the host tier refused
  uint64_t promoted = 0;    // host slots freed by a move up
  uint64_t slice_bytes = 1;
  // Of the lookups the device missed: the share found in the host tier.
  double host_hit_rate() const {
    const uint64_t m = host_hits + disk_reads;
    return m == 0 ? 0.0 : static_cast<double>(host_hits) / m;
  }
  // Of all lookups: the share not read from disk.
  double off_disk_rate() const {
    return lookups == 0 ? 0.0 : 1.0 - static_cast<double>(disk_reads) / lookups;
  }
};

// MakePolicy(name), with "tinylfu" reading `frequency` (shared counts, fed
// by ExpertTiers) when it is not null.
absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakeTierPolicy(
    std::string_view name, std::shared_ptr<KeyFrequency> frequency);

class ExpertTiers {
 public:
  // `frequency` may be null; when set, Step counts every lookup in it
  // before either tier decides (pass the same to the tinylfu policies).
  // InvalidArgument for a bad shape or a null policy.
  static absl::StatusOr<std::unique_ptr<ExpertTiers>> Create(
      ExpertTiersOptions options, std::unique_ptr<EvictionPolicy> device,
      std::unique_ptr<EvictionPolicy> host,
      std::shared_ptr<KeyFrequency> frequency = nullptr);

  // One step (one layer of one micro-batch): `experts` distinct. Errors as
  // SlotCache::Acquire (nothing is changed then).
  absl::StatusOr<TierStep> Step(int32_t layer, absl::Span<const int32_t> experts);

  // Places experts before any lookup (a warm start: memory/expert_profile.h's
  // PlanWarmStart): each of `device`, then each of `host`, Offered to its
  // tier; those that find no slot are left out. Not lookups.
  absl::Status Preload(absl::Span<const ExpertKey> device,
                       absl::Span<const ExpertKey> host);

  ExpertTiersCounters Snapshot() const;
  // Experts resident in both tiers at once (0 while exclusive); O(keys).
  int64_t InBoth() const;
  const SlotCache& device() const { return *device_; }
  const SlotCache& host() const { return *host_; }

 private:
  ExpertTiers() = default;
  // Exclusive: the device's victims offered down, forced disk reads offered,
  // promoted experts' host slots freed.
  absl::Status Settle(int32_t layer, absl::Span<const int32_t> experts,
                      TierStep& step);

  ExpertTiersOptions options_;
  std::unique_ptr<SlotCache> device_, host_;
  std::shared_ptr<KeyFrequency> frequency_;
  uint64_t access_ = 0;
  ExpertTiersCounters counters_;
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_EXPERT_TIERS_H_
