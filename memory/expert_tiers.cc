#include "memory/expert_tiers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace sluice::memory {

absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakeTierPolicy(
    std::string_view name, std::shared_ptr<KeyFrequency> frequency) {
  if (name == "tinylfu" && frequency != nullptr) {
    return MakeTinyLfuPolicy({.frequency = std::move(frequency)});
  }
  return MakePolicy(name);
}

absl::StatusOr<std::unique_ptr<ExpertTiers>> ExpertTiers::Create(
    ExpertTiersOptions options, std::unique_ptr<EvictionPolicy> device,
    std::unique_ptr<EvictionPolicy> host, std::shared_ptr<KeyFrequency> frequency) {
  if (options.host_slots < 0 || options.device_slots < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expert tiers: slots must be >= 0 (device ", options.device_slots,
        ", host ", options.host_slots, ")"));
  }
  auto t = std::unique_ptr<ExpertTiers>(new ExpertTiers());
  t->options_ = options;
  t->frequency_ = std::move(frequency);
  ASSIGN_OR_RETURN(t->device_, SlotCache::Create({options.n_layer, options.n_expert,
                                                  options.device_slots,
                                                  options.slice_bytes},
                                                 std::move(device)));
  ASSIGN_OR_RETURN(t->host_, SlotCache::Create({options.n_layer, options.n_expert,
                                                options.host_slots, options.slice_bytes},
                                               std::move(host)));
  t->counters_.slice_bytes = options.slice_bytes;
  return t;
}

absl::StatusOr<TierStep> ExpertTiers::Step(int32_t layer,
                                           absl::Span<const int32_t> experts) {
  device_->BeginStep();
  host_->BeginStep();
  TierStep step;
  ASSIGN_OR_RETURN(step.device, device_->Acquire(layer, experts));
  // Counted once the call is known to be valid; the device decided on the
  // counts before this step (its own accesses are numbered by the cache).
  if (frequency_ != nullptr) {
    for (int32_t e : experts) frequency_->Touch({layer, e}, access_++);
  }
  step.source.assign(experts.size(), ExpertSource::kDevice);
  step.host_slot.assign(experts.size(), -1);
  std::vector<int32_t> missed;
  std::vector<size_t> at;
  for (size_t i = 0; i < experts.size(); ++i) {
    if (step.device[i].kind == SlotAssignment::kHit) continue;
    if (options_.exclusive && !host_->Peek({layer, experts[i]}).has_value()) {
      step.source[i] = ExpertSource::kDisk;  // read into staging, not kept here
      continue;
    }
    missed.push_back(experts[i]);
    at.push_back(i);
  }
  // Exclusive: only the host's hits (held through the step); inclusive:
  // every miss, the host keeping what it reads.
  ASSIGN_OR_RETURN(std::vector<SlotAssignment> from, host_->Acquire(layer, missed));
  for (size_t j = 0; j < from.size(); ++j) {
    const bool hit = from[j].kind == SlotAssignment::kHit;
    step.source[at[j]] = hit ? ExpertSource::kHost : ExpertSource::kDisk;
    if (hit) step.host_slot[at[j]] = from[j].slot;
  }
  counters_.lookups += experts.size();
  for (size_t i = 0; i < experts.size(); ++i) {
    switch (step.source[i]) {
      case ExpertSource::kDevice: ++counters_.device_hits; break;
      case ExpertSource::kHost: ++counters_.host_hits; break;
      case ExpertSource::kDisk: ++counters_.disk_reads; break;
    }
  }
  if (options_.exclusive) RETURN_IF_ERROR(Settle(layer, experts, step));
  host_->Release();
  device_->Release();
  return step;
}

absl::Status ExpertTiers::Settle(int32_t layer, absl::Span<const int32_t> experts,
                                 TierStep& step) {
  for (size_t i = 0; i < experts.size(); ++i) {
    const SlotAssignment& a = step.device[i];
    if (a.kind == SlotAssignment::kMiss && a.evicted) {
      ASSIGN_OR_RETURN(const SlotAssignment down, host_->Offer(a.evicted_key));
      if (down.kind == SlotAssignment::kMiss) {
        step.demotions.push_back({a.evicted_key, a.slot, down.slot});
        ++counters_.demoted;
      } else {
        ++counters_.dropped;
      }
    } else if (a.kind == SlotAssignment::kForced &&
               step.source[i] == ExpertSource::kDisk) {
      // Its bytes are in staging: keeping them costs a host copy, no read.
      RETURN_IF_ERROR(host_->Offer({layer, experts[i]}).status());
    }
  }
  // Moved up: their host slots free once this step's copies are done.
  for (size_t i = 0; i < experts.size(); ++i) {
    if (step.device[i].kind == SlotAssignment::kMiss &&
        step.source[i] == ExpertSource::kHost) {
      host_->Remove({layer, experts[i]});
      step.promoted.push_back({layer, experts[i]});
      ++counters_.promoted;
    }
  }
  return absl::OkStatus();
}

absl::Status ExpertTiers::Preload(absl::Span<const ExpertKey> device,
                                  absl::Span<const ExpertKey> host) {
  for (const ExpertKey& k : device) RETURN_IF_ERROR(device_->Offer(k).status());
  for (const ExpertKey& k : host) RETURN_IF_ERROR(host_->Offer(k).status());
  return absl::OkStatus();
}

ExpertTiersCounters ExpertTiers::Snapshot() const {
  ExpertTiersCounters c = counters_;
  c.device = device_->Snapshot();
  c.host = host_->Snapshot();
  return c;
}

int64_t ExpertTiers::InBoth() const {
  int64_t n = 0;
  for (int32_t l = 0; l < options_.n_layer; ++l) {
    for (int32_t e = 0; e < options_.n_expert; ++e) {
      if (device_->Peek({l, e}).has_value() && host_->Peek({l, e}).has_value()) ++n;
    }
  }
  return n;
}

}  // namespace sluice::memory
