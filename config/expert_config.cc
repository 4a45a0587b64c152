#include "config/expert_config.h"

#include "absl/strings/str_cat.h"

namespace sluice::config {

std::string EvictionPolicyName(EvictionPolicy policy) {
  switch (policy) {
    case EvictionPolicy::kLfu:
      return "lfu";
    case EvictionPolicy::kTinyLfu:
      return "tinylfu";
    case EvictionPolicy::kLru:
      break;
  }
  return "lru";
}

absl::StatusOr<EvictionPolicy> ParseEvictionPolicy(absl::string_view name) {
  if (name == "lru") return EvictionPolicy::kLru;
  if (name == "lfu") return EvictionPolicy::kLfu;
  if (name == "tinylfu") return EvictionPolicy::kTinyLfu;
  return absl::InvalidArgumentError(absl::StrCat("--expert_policy='", name.substr(0, 64),
                                                 "': expected lru, lfu or tinylfu"));
}

std::string MissPolicyName(MissPolicy policy) {
  switch (policy) {
    case MissPolicy::kCopy:
      return "copy";
    case MissPolicy::kHost:
      return "host";
    case MissPolicy::kCost:
      return "cost";
  }
  return "copy";
}

std::string TierModeName(TierMode mode) {
  return mode == TierMode::kExclusive ? "exclusive" : "inclusive";
}

absl::StatusOr<TierMode> ParseTierMode(absl::string_view name) {
  if (name == "inclusive") return TierMode::kInclusive;
  if (name == "exclusive") return TierMode::kExclusive;
  return absl::InvalidArgumentError(absl::StrCat(
      "--expert_tiers='", name.substr(0, 64), "': expected inclusive or exclusive"));
}

absl::StatusOr<MissPolicy> ParseMissPolicy(absl::string_view name) {
  if (name == "copy") return MissPolicy::kCopy;
  if (name == "host") return MissPolicy::kHost;
  if (name == "cost") return MissPolicy::kCost;
  return absl::InvalidArgumentError(absl::StrCat("unknown expert miss policy \"",
                                                 name.substr(0, 64), "\" (copy, host or cost)"));
}

absl::Status ValidateExpertConfig(const ExpertConfig& e) {
  if (e.slots < kPlannerChoosesSlots) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expert_slots=", e.slots, ": must be >= 0 (or -1: the fit planner chooses)"));
  }
  if (!(e.arena_fraction >= 0 && e.arena_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--expert_arena_fraction=", e.arena_fraction,
                                                   ": must be in (0, 1] (0: the fit planner "
                                                   "chooses)"));
  }
  if (e.slots >= 0 && e.arena_fraction > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expert_slots=", e.slots, " and --expert_arena_fraction=", e.arena_fraction,
        ": give one of them"));
  }
  if (e.host_threads < 0 || e.host_threads > kMaxHostThreads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expert_host_threads=", e.host_threads, ": must be in 0..", kMaxHostThreads));
  }
  const std::string& p = e.host_tier_policy;
  if (!(p.empty() || p == "lru" || p == "lfu" || p == "tinylfu")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--host_tier_policy='", p.substr(0, 64), "': expected lru, lfu or tinylfu"));
  }
  // A negated test so that NaN is refused too.
  if (!(e.skip_threshold >= 0 && e.skip_threshold < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expert_skip=", e.skip_threshold, ": must be in [0, 1) (0: off)"));
  }
  return absl::OkStatus();
}

std::string ExpertConfigString(const ExpertConfig& e) {
  return absl::StrCat("slots=", e.slots, " arena_fraction=", e.arena_fraction,
                      " policy=", EvictionPolicyName(e.policy),
                      " host_tier_bytes=", e.host_tier_bytes,
                      " prefetch=", e.prefetch ? "true" : "false",
                      " miss_policy=", MissPolicyName(e.miss_policy),
                      " host_threads=", e.host_threads,
                      e.profile.empty() ? "" : " profile=", e.profile,
                      e.host_tier_policy.empty() ? "" : " host_tier_policy=",
                      e.host_tier_policy,
                      e.tiers == TierMode::kExclusive ? "" : " tiers=inclusive",
                      e.skip_threshold == 0 ? "" : absl::StrCat(" skip=", e.skip_threshold));
}

}  // namespace sluice::config
