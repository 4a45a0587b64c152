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
  // Misses the host CPU computed (the miss policy, memory/miss_split.h):
  // no slot taken, nothing copied; counted in lookups and misses too.
  uint64_t host_computed = 0;
  uint64_t prefetches_issued = 0;
  uint64_t prefetches_useful = 0;  // prefetched, then demanded before eviction
  uint64_t prefetches_late = 0;    // of the useful: demanded while in flight
  // SlotCache::Offer: keys offered (demotions from the tier above), and
  // those placed.
  uint64_t offered = 0;
  uint64_t offers_admitted = 0;
  // SlotCache::Remove: keys whose slot was freed because they moved up.
  uint64_t removed = 0;
  // slice_bytes x (filled misses + prefetches issued): bytes copied into
  // slots. Named as its metric, sluice_expert_bytes_streamed_total (it was
  // bytes_filled here; tools/generate's JSON keeps that key beside this one).
  uint64_t bytes_streamed = 0;
  // slice_bytes x forced: bytes read without a slot.
  uint64_t bytes_forced = 0;
  // slice_bytes x host_computed: bytes the host CPU read instead.
  uint64_t bytes_host_computed = 0;
  // Routed experts the lossy mode skipped (--expert_skip; model/
  // expert_skip.h): (token, expert) pairs not computed, counted by the CPU
  // backend, which has no slot cache (all the other fields stay 0 there).
  uint64_t skipped = 0;
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
    d.Combine(earlier, [](uint64_t& x, uint64_t y) { x -= y; });
    return d;
  }

  // Adds `other` field by field (the counters of several slot classes, whose
  // layers differ); the per-layer vectors grow to the longer of the two.
  void Add(const SlotCacheCounters& other) {
    if (layer_lookups.size() < other.layer_lookups.size()) {
      layer_lookups.resize(other.layer_lookups.size());
    }
    if (layer_hits.size() < other.layer_hits.size()) {
      layer_hits.resize(other.layer_hits.size());
    }
    Combine(other, [](uint64_t& x, uint64_t y) { x += y; });
  }

  // The share of [from, to) out of `whole` of every counter: floor(x x to /
  // whole) - floor(x x from / whole). Cutting [0, whole) into consecutive
  // ranges gives shares that add up to the counters exactly (a step's
  // figures apportioned to the sequences in it by their rows).
  // Precondition: from <= to <= whole, whole > 0.
  SlotCacheCounters Portion(uint64_t from, uint64_t to, uint64_t whole) const {
    SlotCacheCounters d = *this;
    d.Combine(*this, [&](uint64_t& x, uint64_t y) {
      const unsigned __int128 v = y;
      x = static_cast<uint64_t>(v * to / whole - v * from / whole);
    });
    return d;
  }

 private:
  // op(field of this, field of other) for every counter; per-layer entries
  // beyond this object's vectors are left out.
  template <typename Op>
  void Combine(const SlotCacheCounters& o, Op op) {
    op(lookups, o.lookups);
    op(hits, o.hits);
    op(misses, o.misses);
    op(evictions, o.evictions);
    op(exhausted, o.exhausted);
    op(forced, o.forced);
    op(host_computed, o.host_computed);
    op(prefetches_issued, o.prefetches_issued);
    op(prefetches_useful, o.prefetches_useful);
    op(prefetches_late, o.prefetches_late);
    op(offered, o.offered);
    op(offers_admitted, o.offers_admitted);
    op(removed, o.removed);
    op(bytes_streamed, o.bytes_streamed);
    op(bytes_forced, o.bytes_forced);
    op(bytes_host_computed, o.bytes_host_computed);
    op(skipped, o.skipped);
    for (int t = 0; t < kTierCount; ++t) op(bytes_by_tier[t], o.bytes_by_tier[t]);
    for (size_t i = 0; i < layer_lookups.size() && i < o.layer_lookups.size(); ++i) {
      op(layer_lookups[i], o.layer_lookups[i]);
    }
    for (size_t i = 0; i < layer_hits.size() && i < o.layer_hits.size(); ++i) {
      op(layer_hits[i], o.layer_hits[i]);
    }
  }
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_SLOT_COUNTERS_H_
