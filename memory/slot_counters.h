// What the expert slot cache counts: plain data shared by the policy
// (slot_cache.h), the CUDA backend that drives it, the worker that reports
// it and tools/slotsim. No CUDA and no locking here.
#ifndef SLUICE_MEMORY_SLOT_COUNTERS_H_
#define SLUICE_MEMORY_SLOT_COUNTERS_H_

#include <array>
#include <cstdint>
#include <vector>

namespace sluice::memory {

// Where the bytes of a miss came from. kHost: host RAM (the registered
// mapping or the pinned host tier); kDisk: read from the file because host
// RAM did not hold them.
enum class Tier { kHost = 0, kDisk = 1 };
inline constexpr int kTierCount = 2;

struct SlotCacheCounters {
  uint64_t lookups = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;     // lookups that were not hits: filled + forced
  uint64_t evictions = 0;  // demand and prefetch fills that evicted a key
  uint64_t exhausted = 0;  // Acquire calls in which some miss found no slot
  uint64_t forced = 0;     // misses computed without taking a slot
  uint64_t prefetches_issued = 0;
  uint64_t prefetches_useful = 0;  // prefetched, then demanded before eviction
  uint64_t prefetches_late = 0;    // of the useful: demanded while in flight
  // slice_bytes x (filled misses + prefetches issued): bytes copied into
  // slots.
  uint64_t bytes_filled = 0;
  // slice_bytes x forced: bytes read without a slot.
  uint64_t bytes_forced = 0;
  // Bytes by source tier, as the caller reports them.
  std::array<uint64_t, kTierCount> bytes_by_tier{};
  // Per layer (index = layer id); sized n_layer by the cache.
  std::vector<uint64_t> layer_lookups;
  std::vector<uint64_t> layer_hits;

  double hit_rate() const {
    return lookups == 0 ? 0.0 : static_cast<double>(hits) / lookups;
  }
  double layer_hit_rate(int layer) const {
    if (layer < 0 || layer >= static_cast<int>(layer_lookups.size()) ||
        layer_lookups[layer] == 0) {
      return 0.0;
    }
    return static_cast<double>(layer_hits[layer]) / layer_lookups[layer];
  }
  double prefetch_accuracy() const {
    return prefetches_issued == 0
               ? 0.0
               : static_cast<double>(prefetches_useful) / prefetches_issued;
  }

  // this - earlier, field by field: the figures of one request (or token)
  // from two snapshots of one cache. Per-layer vectors of different sizes
  // are treated as zero-extended.
  SlotCacheCounters Minus(const SlotCacheCounters& earlier) const {
    SlotCacheCounters d = *this;
    d.lookups -= earlier.lookups;
    d.hits -= earlier.hits;
    d.misses -= earlier.misses;
    d.evictions -= earlier.evictions;
    d.exhausted -= earlier.exhausted;
    d.forced -= earlier.forced;
    d.prefetches_issued -= earlier.prefetches_issued;
    d.prefetches_useful -= earlier.prefetches_useful;
    d.prefetches_late -= earlier.prefetches_late;
    d.bytes_filled -= earlier.bytes_filled;
    d.bytes_forced -= earlier.bytes_forced;
    for (int t = 0; t < kTierCount; ++t) {
      d.bytes_by_tier[t] -= earlier.bytes_by_tier[t];
    }
    for (size_t i = 0; i < d.layer_lookups.size(); ++i) {
      if (i < earlier.layer_lookups.size()) {
        d.layer_lookups[i] -= earlier.layer_lookups[i];
      }
      if (i < earlier.layer_hits.size() && i < d.layer_hits.size()) {
        d.layer_hits[i] -= earlier.layer_hits[i];
      }
    }
    return d;
  }
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_SLOT_COUNTERS_H_
