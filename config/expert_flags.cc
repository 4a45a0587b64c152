#include "config/expert_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "config/byte_size.h"

namespace {
constexpr sluice::config::ExpertConfig kDefaults{};
}  // namespace

ABSL_FLAG(int64_t, expert_slots, kDefaults.slots,
          "CUDA: device slots for routed experts (-1: the fit planner chooses: every expert "
          "resident when they fit, else the largest arena that fits; 0: none, every expert "
          "read in place).");
ABSL_FLAG(double, expert_arena_fraction, kDefaults.arena_fraction,
          "CUDA: slots as a fraction (0, 1] of all routed experts; exclusive with "
          "--expert_slots (0: the fit planner chooses).");
ABSL_FLAG(std::string, expert_policy,
          std::string(sluice::config::EvictionPolicyName(kDefaults.policy)),
          "Expert slot eviction policy: lru, lfu or tinylfu (scan-resistant; keeps hits when "
          "a batched step's experts exceed the arena).");
ABSL_FLAG(std::string, host_tier_bytes, absl::StrCat(kDefaults.host_tier_bytes),
          "CUDA: host RAM the expert cache may pin in front of O_DIRECT disk reads (e.g. 64G; "
          "0: the fit planner chooses).");
ABSL_FLAG(bool, expert_prefetch, kDefaults.prefetch,
          "CUDA: fetch the next layer's predicted experts ahead of demand.");
ABSL_FLAG(std::string, expert_miss_policy,
          std::string(sluice::config::MissPolicyName(kDefaults.miss_policy)),
          "CUDA: where decode misses are computed: copy (into slots; bit-identical logits), "
          "host (on the host CPU) or cost (split by measured copy and host rates).");
ABSL_FLAG(int, expert_host_threads, kDefaults.host_threads,
          "CUDA: threads computing misses on the host (0: one per hardware thread).");
ABSL_FLAG(std::string, expert_profile, kDefaults.profile,
          "A usage profile file: the worker warms its expert arena from it at load (CUDA) and "
          "saves its counts to it while serving (every minute and at shutdown); \"\": none.");
ABSL_FLAG(std::string, host_tier_policy, kDefaults.host_tier_policy,
          "CUDA: the host tier's eviction policy: lru, lfu or tinylfu (\"\": tinylfu).");
ABSL_FLAG(std::string, expert_tiers, sluice::config::TierModeName(kDefaults.tiers),
          "CUDA with a host tier: inclusive (the host tier keeps a copy of what it passes to the "
          "device) or exclusive (an expert lives in the device arena or the host tier, so both "
          "together keep more experts off disk).");

ABSL_FLAG(double, expert_skip, kDefaults.skip_threshold,
          "CPU, lossy, off by default: skip a routed expert whose share of its token's routing "
          "weights is below this and whose bytes are not in RAM, renormalising the others; "
          "never a token's top expert. In [0, 1); 0: off.");

namespace sluice::config {

absl::StatusOr<ExpertConfig> ExpertConfigFromFlags() {
  ExpertConfig e;
  e.slots = absl::GetFlag(FLAGS_expert_slots);
  e.arena_fraction = absl::GetFlag(FLAGS_expert_arena_fraction);
  ASSIGN_OR_RETURN(e.policy, ParseEvictionPolicy(absl::GetFlag(FLAGS_expert_policy)));
  ASSIGN_OR_RETURN(e.host_tier_bytes,
                   ParseByteSize("--host_tier_bytes", absl::GetFlag(FLAGS_host_tier_bytes)));
  e.prefetch = absl::GetFlag(FLAGS_expert_prefetch);
  const std::string miss = absl::GetFlag(FLAGS_expert_miss_policy);
  absl::StatusOr<MissPolicy> miss_policy = ParseMissPolicy(miss);
  if (!miss_policy.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expert_miss_policy='", miss.substr(0, 64), "': expected copy, host or cost"));
  }
  e.miss_policy = *miss_policy;
  e.host_threads = absl::GetFlag(FLAGS_expert_host_threads);
  e.profile = absl::GetFlag(FLAGS_expert_profile);
  e.skip_threshold = absl::GetFlag(FLAGS_expert_skip);
  e.host_tier_policy = absl::GetFlag(FLAGS_host_tier_policy);
  ASSIGN_OR_RETURN(e.tiers, ParseTierMode(absl::GetFlag(FLAGS_expert_tiers)));
  RETURN_IF_ERROR(ValidateExpertConfig(e));
  return e;
}

}  // namespace sluice::config
