#include "memory/slot_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace sluice::memory {

absl::StatusOr<std::unique_ptr<SlotCache>> SlotCache::Create(
    SlotCacheOptions options, std::unique_ptr<EvictionPolicy> policy) {
  if (options.n_layer < 1 || options.n_expert < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot cache: n_layer (", options.n_layer,
                     ") and n_expert (", options.n_expert, ") must be >= 1"));
  }
  if (options.n_slots < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slot cache: n_slots must be >= 0, got ", options.n_slots));
  }
  if (policy == nullptr) {
    return absl::InvalidArgumentError("slot cache: null eviction policy");
  }
  return std::unique_ptr<SlotCache>(
      new SlotCache(options, std::move(policy)));
}

SlotCache::SlotCache(SlotCacheOptions options,
                     std::unique_ptr<EvictionPolicy> policy)
    : options_(options), policy_(std::move(policy)) {
  policy_->Reset(options_.n_slots);
  slots_.resize(options_.n_slots);
  // Popped from the back: slot 0 is filled first, which keeps tests and
  // traces readable.
  free_.reserve(options_.n_slots);
  for (int32_t s = options_.n_slots; s-- > 0;) free_.push_back(s);
  where_.assign(static_cast<size_t>(options_.n_layer) * options_.n_expert, -1);
  seen_.assign(options_.n_expert, 0);
  counters_.layer_lookups.assign(options_.n_layer, 0);
  counters_.layer_hits.assign(options_.n_layer, 0);
}

void SlotCache::BeginStep() {
  absl::MutexLock lock(&mu_);
  ++step_;
}

void SlotCache::Release() {
  absl::MutexLock lock(&mu_);
  ++step_;
}

bool SlotCache::Evictable(int32_t slot) const {
  const Slot& s = slots_[slot];
  return s.occupied && s.protected_step != step_ && !s.in_flight;
}

int32_t SlotCache::TakeSlot(SlotAssignment& a, uint64_t access) {
  if (!free_.empty()) {
    const int32_t slot = free_.back();
    free_.pop_back();
    return slot;
  }
  const int32_t victim = ChooseVictim(access);
  if (victim >= 0) Evict(victim, a);
  return victim;
}

int32_t SlotCache::ChooseVictim(uint64_t access) {
  return policy_->ChooseVictim(
      [this](int32_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return Evictable(s); },
      access);
}

void SlotCache::Evict(int32_t victim, SlotAssignment& a) {
  Slot& v = slots_[victim];
  a.evicted = true;
  a.evicted_key = v.key;
  where_[Index(v.key)] = -1;
  v = Slot{};
  policy_->OnRemove(victim);
  ++counters_.evictions;
}

void SlotCache::Place(int32_t slot, ExpertKey key, uint64_t access) {
  Slot& s = slots_[slot];
  s.occupied = true;
  s.key = key;
  where_[Index(key)] = slot;
  policy_->OnAccess(slot, key, /*inserted=*/true, access);
}

absl::Status SlotCache::CheckCall(int32_t layer,
                                  absl::Span<const int32_t> experts) {
  if (layer < 0 || layer >= options_.n_layer) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot cache: layer ", layer, " out of range [0, ",
                     options_.n_layer, ")"));
  }
  ++call_;
  for (int32_t e : experts) {
    if (e < 0 || e >= options_.n_expert) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot cache: layer ", layer, " expert ", e,
                       " out of range [0, ", options_.n_expert, ")"));
    }
    if (seen_[e] == call_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slot cache: layer ", layer, " expert ", e, " repeated in one call"));
    }
    seen_[e] = call_;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SlotAssignment>> SlotCache::Acquire(
    int32_t layer, absl::Span<const int32_t> experts) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckCall(layer, experts));

  const uint64_t first_access = counters_.lookups;
  std::vector<SlotAssignment> out(experts.size());
  // Hits first, so that they are protected before any miss picks a victim.
  uint64_t hits = 0;
  for (size_t i = 0; i < experts.size(); ++i) {
    const ExpertKey key{layer, experts[i]};
    const int32_t slot = where_[Index(key)];
    if (slot < 0) continue;
    Slot& s = slots_[slot];
    SlotAssignment& a = out[i];
    a.kind = SlotAssignment::kHit;
    a.slot = slot;
    if (s.prefetched) {
      ++counters_.prefetches_useful;
      if (s.in_flight) ++counters_.prefetches_late;
      s.prefetched = false;
    }
    a.pending = s.in_flight;
    s.protected_step = step_;
    policy_->OnAccess(slot, key, /*inserted=*/false, first_access + i);
    ++hits;
  }
  uint64_t filled = 0, forced = 0;
  for (size_t i = 0; i < experts.size(); ++i) {
    SlotAssignment& a = out[i];
    if (a.kind == SlotAssignment::kHit) continue;
    const ExpertKey key{layer, experts[i]};
    const int32_t slot = TakeSlot(a, first_access + i);
    if (slot < 0) {
      a.kind = SlotAssignment::kForced;
      policy_->OnLookupWithoutSlot(key, first_access + i);
      ++forced;
      continue;
    }
    a.kind = SlotAssignment::kMiss;
    a.slot = slot;
    Place(slot, key, first_access + i);
    slots_[slot].protected_step = step_;
    ++filled;
  }

  const uint64_t n = experts.size();
  counters_.lookups += n;
  counters_.hits += hits;
  counters_.misses += n - hits;
  counters_.forced += forced;
  if (forced > 0) ++counters_.exhausted;
  counters_.bytes_streamed += filled * options_.slice_bytes;
  counters_.bytes_forced += forced * options_.slice_bytes;
  counters_.layer_lookups[layer] += n;
  counters_.layer_hits[layer] += hits;
  return out;
}

absl::Status SlotCache::ComputedOnHost(int32_t layer,
                                       absl::Span<const int32_t> experts) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckCall(layer, experts));
  for (int32_t e : experts) {
    if (where_[Index({layer, e})] >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot cache: layer ", layer, " expert ", e,
                       " is resident: a hit, not a host computation"));
    }
  }
  for (size_t i = 0; i < experts.size(); ++i) {
    policy_->OnLookupWithoutSlot({layer, experts[i]}, counters_.lookups + i);
  }
  const uint64_t n = experts.size();
  counters_.lookups += n;
  counters_.misses += n;
  counters_.host_computed += n;
  counters_.bytes_host_computed += n * options_.slice_bytes;
  counters_.layer_lookups[layer] += n;
  return absl::OkStatus();
}

absl::Status SlotCache::CheckKey(ExpertKey key, const char* what) const {
  if (InRange(key)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "slot cache: ", what, " of layer ", key.layer, " expert ", key.expert,
      " out of range (", options_.n_layer, " layers, ", options_.n_expert,
      " experts)"));
}

absl::StatusOr<SlotAssignment> SlotCache::Prefetch(ExpertKey key) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckKey(key, "prefetch"));
  SlotAssignment a;
  if (where_[Index(key)] >= 0) return a;  // kNone: already resident
  const int32_t slot = TakeSlot(a, counters_.lookups);
  if (slot < 0) return SlotAssignment{};  // kNone: nothing evictable
  a.kind = SlotAssignment::kMiss;
  a.slot = slot;
  Place(slot, key, counters_.lookups);
  slots_[slot].prefetched = true;
  slots_[slot].in_flight = true;
  ++counters_.prefetches_issued;
  counters_.bytes_streamed += options_.slice_bytes;
  return a;
}

void SlotCache::CompletePrefetch(ExpertKey key) {
  absl::MutexLock lock(&mu_);
  if (!InRange(key)) return;
  const int32_t slot = where_[Index(key)];
  if (slot >= 0) slots_[slot].in_flight = false;
}

absl::StatusOr<SlotAssignment> SlotCache::Offer(ExpertKey key) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckKey(key, "offer"));
  if (where_[Index(key)] >= 0) return SlotAssignment{};  // kNone: resident
  ++counters_.offered;
  const uint64_t access = counters_.lookups;
  SlotAssignment a;
  int32_t slot = -1;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    const int32_t victim = ChooseVictim(access);
    if (victim < 0 || !policy_->Admit(key, victim, access)) {
      return SlotAssignment{};  // kNone: nothing evictable, or not admitted
    }
    Evict(victim, a);
    slot = victim;
  }
  a.kind = SlotAssignment::kMiss;
  a.slot = slot;
  Place(slot, key, access);
  slots_[slot].protected_step = step_;
  ++counters_.offers_admitted;
  counters_.bytes_streamed += options_.slice_bytes;
  return a;
}

std::optional<int32_t> SlotCache::Remove(ExpertKey key) {
  absl::MutexLock lock(&mu_);
  if (!InRange(key)) return std::nullopt;
  const int32_t slot = where_[Index(key)];
  if (slot < 0) return std::nullopt;
  where_[Index(key)] = -1;
  slots_[slot] = Slot{};
  policy_->OnRemove(slot);
  free_.push_back(slot);
  ++counters_.removed;
  return slot;
}

void SlotCache::RecordBytes(Tier tier, uint64_t bytes) {
  const int t = static_cast<int>(tier);
  if (t < 0 || t >= kTierCount) return;
  absl::MutexLock lock(&mu_);
  counters_.bytes_by_tier[t] += bytes;
}

std::optional<int32_t> SlotCache::Peek(ExpertKey key) const {
  absl::MutexLock lock(&mu_);
  if (!InRange(key)) return std::nullopt;
  const int32_t slot = where_[Index(key)];
  if (slot < 0) return std::nullopt;
  return slot;
}

std::optional<ExpertKey> SlotCache::SlotKey(int32_t slot) const {
  absl::MutexLock lock(&mu_);
  if (slot < 0 || slot >= options_.n_slots || !slots_[slot].occupied) {
    return std::nullopt;
  }
  return slots_[slot].key;
}

SlotCacheCounters SlotCache::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

std::string SlotCache::policy_name() const {
  absl::MutexLock lock(&mu_);
  return policy_->Name();
}

}  // namespace sluice::memory
