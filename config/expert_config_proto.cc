#include "config/expert_config_proto.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace sluice::config {
namespace {

absl::Status InField(const char* field, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("Hello.config.", field, ": ", s.message()));
}

}  // namespace

void ToWorkerConfig(const ExpertConfig& e, sluice::worker::v1::WorkerConfig* out) {
  if (e.slots != kPlannerChoosesSlots) {
    out->set_expert_slots(e.slots);
  } else {
    out->clear_expert_slots();
  }
  out->set_expert_arena_fraction(e.arena_fraction);
  out->set_expert_policy(std::string(EvictionPolicyName(e.policy)));
  out->set_host_tier_bytes(e.host_tier_bytes);
  out->set_expert_prefetch(e.prefetch);
  out->set_expert_miss_policy(std::string(MissPolicyName(e.miss_policy)));
  out->set_expert_host_threads(static_cast<uint32_t>(e.host_threads));
  out->set_expert_profile(e.profile);
  out->set_expert_skip(e.skip_threshold);
  out->set_host_tier_policy(e.host_tier_policy);
  out->set_expert_tiers(TierModeName(e.tiers));
}

absl::StatusOr<ExpertConfig> FromWorkerConfig(const sluice::worker::v1::WorkerConfig& in) {
  ExpertConfig e;
  if (in.has_expert_slots()) e.slots = in.expert_slots();
  e.arena_fraction = in.expert_arena_fraction();
  if (!in.expert_policy().empty()) {
    absl::StatusOr<EvictionPolicy> policy = ParseEvictionPolicy(in.expert_policy());
    if (!policy.ok()) return InField("expert_policy", policy.status());
    e.policy = *policy;
  }
  e.host_tier_bytes = in.host_tier_bytes();
  if (in.has_expert_prefetch()) e.prefetch = in.expert_prefetch();
  if (!in.expert_miss_policy().empty()) {
    absl::StatusOr<MissPolicy> miss = ParseMissPolicy(in.expert_miss_policy());
    if (!miss.ok()) return InField("expert_miss_policy", miss.status());
    e.miss_policy = *miss;
  }
  // A uint32 above the int range reads as negative and is refused below.
  e.host_threads = static_cast<int>(in.expert_host_threads());
  e.profile = in.expert_profile();
  e.skip_threshold = in.expert_skip();
  e.host_tier_policy = in.host_tier_policy();
  if (!in.expert_tiers().empty()) {
    absl::StatusOr<TierMode> tiers = ParseTierMode(in.expert_tiers());
    if (!tiers.ok()) return InField("expert_tiers", tiers.status());
    e.tiers = *tiers;
  }
  if (absl::Status s = ValidateExpertConfig(e); !s.ok()) return InField("expert_*", s);
  return e;
}

}  // namespace sluice::config
