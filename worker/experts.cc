#include "worker/experts.h"

#include "absl/strings/str_cat.h"

namespace sluice::worker {

absl::StatusOr<memory::ExpertProfile> OpenExpertProfile(const std::string& path, int32_t n_layer,
                                                        int32_t n_expert, std::string* note) {
  absl::StatusOr<memory::ExpertProfile> empty = memory::ExpertProfile::Create(n_layer, n_expert);
  if (!empty.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expert_profile=", path, ": the model has no routed experts to profile (",
        empty.status().message(), ")"));
  }
  absl::StatusOr<memory::ExpertProfile> loaded = memory::ExpertProfile::Load(path);
  if (!loaded.ok()) {
    *note = absl::IsNotFound(loaded.status())
                ? absl::StrCat("expert profile ", path, ": none yet; starting cold")
                : absl::StrCat("expert profile ignored, starting cold: ",
                               loaded.status().message());
    return empty;
  }
  if (loaded->n_layer() != n_layer || loaded->n_expert() != n_expert) {
    *note = absl::StrCat("expert profile ", path, " ignored, starting cold: it counts ",
                         loaded->n_layer(), " layers x ", loaded->n_expert(),
                         " experts, the model has ", n_layer, " x ", n_expert);
    return empty;
  }
  uint64_t uses = 0;
  for (const memory::ExpertKey& k : loaded->Ranked()) uses += loaded->count(k);
  *note = absl::StrCat("expert profile ", path, ": ", loaded->Ranked().size(),
                       " experts used, ", uses, " uses");
  return loaded;
}

void ToSlotCacheStats(const ExpertStreamStats& s, sluice::v1::SlotCacheStats* out) {
  const memory::SlotCacheCounters& c = s.counters;
  out->set_streaming(s.streaming);
  out->set_policy(s.policy);
  out->set_slots_capacity(static_cast<uint64_t>(s.slots_capacity));
  out->set_experts(static_cast<uint64_t>(s.experts));
  out->set_slot_bytes(s.slot_bytes);
  out->set_arena_bytes(s.arena_bytes);
  out->set_host_tier_bytes(s.host_tier_bytes);
  if (s.streaming) out->set_miss_policy(s.miss_policy);
  out->set_copy_bytes_per_second(s.copy_bytes_per_s);
  out->set_host_bytes_per_second(s.host_bytes_per_s);
  out->set_host_computed(c.host_computed);
  out->set_bytes_host_computed(c.bytes_host_computed);
  out->set_skipped(c.skipped);
  out->set_lookups(c.lookups);
  out->set_hits(c.hits);
  out->set_misses(c.misses);
  out->set_evictions(c.evictions);
  out->set_exhausted(c.exhausted);
  out->set_forced(c.forced);
  out->set_bytes_streamed(c.bytes_streamed);
  out->set_prefetches_issued(c.prefetches_issued);
  out->set_prefetches_useful(c.prefetches_useful);
  out->set_prefetches_late(c.prefetches_late);
  out->set_bytes_host(c.bytes_by_tier[static_cast<int>(memory::Tier::kHost)]);
  out->set_bytes_disk(c.bytes_by_tier[static_cast<int>(memory::Tier::kDisk)]);
  if (s.host_tier) {
    const memory::SlotCacheCounters& h = s.host_tier_counters;
    out->set_tiers(s.exclusive_tiers ? "exclusive" : "inclusive");
    out->set_host_tier_lookups(h.lookups);
    out->set_host_tier_hits(h.hits);
    out->set_host_tier_demoted(h.offers_admitted);
    out->set_host_tier_promoted(h.removed);
  }
  for (size_t l = 0; l < c.layer_lookups.size(); ++l) {
    out->add_layer_hit_ratio(c.layer_hit_rate(static_cast<int>(l)));
  }
}

sluice::v1::ExpertRequestStats ToRequestStats(const memory::SlotCacheCounters& d) {
  sluice::v1::ExpertRequestStats r;
  r.set_lookups(d.lookups);
  r.set_hits(d.hits);
  r.set_misses(d.misses);
  r.set_forced(d.forced);
  r.set_host_computed(d.host_computed);
  r.set_bytes_host_computed(d.bytes_host_computed);
  r.set_skipped(d.skipped);
  r.set_evictions(d.evictions);
  r.set_exhausted(d.exhausted);
  r.set_hit_rate(d.hit_rate());
  r.set_bytes_host(d.bytes_by_tier[static_cast<int>(memory::Tier::kHost)]);
  r.set_bytes_disk(d.bytes_by_tier[static_cast<int>(memory::Tier::kDisk)]);
  r.set_prefetches_issued(d.prefetches_issued);
  r.set_prefetches_useful(d.prefetches_useful);
  r.set_prefetches_late(d.prefetches_late);
  r.set_prefetch_accuracy(d.prefetch_accuracy());
  for (size_t l = 0; l < d.layer_lookups.size(); ++l) {
    r.add_layer_hit_rate(d.layer_hit_rate(static_cast<int>(l)));
  }
  return r;
}

void RequestExpertTracker::Add(const memory::SlotCacheCounters& share) {
  total_.Add(share);
  since_token_.Add(share);
}

void RequestExpertTracker::Token() {
  if (per_token_) {
    sluice::v1::ExpertTokenStats t;
    t.set_hits(since_token_.hits);
    t.set_misses(since_token_.misses);
    tokens_.push_back(t);
  }
  since_token_ = {};
}

sluice::v1::ExpertRequestStats RequestExpertTracker::Finish() const {
  sluice::v1::ExpertRequestStats r = ToRequestStats(total_);
  for (const sluice::v1::ExpertTokenStats& t : tokens_) *r.add_tokens() = t;
  return r;
}

}  // namespace sluice::worker
