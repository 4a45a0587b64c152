// Where routed experts live: the one definition of the expert settings.
//
// sluiced's flags and config file, the tools' flags (both through
// config/expert_flags.h), the worker's Hello (config/expert_config_proto.h),
// EngineOptions and CudaModelOptions all carry this struct, so a setting
// means the same thing at every hop and its default is written once, here.
// A CUDA worker and the tools' CUDA backend run the fit planner
// (memory/expert_plan.h) on it before the engine is built: what is left to
// the planner (slots -1 with no fraction, host_tier_bytes 0) becomes the
// plan's numbers.
#ifndef SLUICE_CONFIG_EXPERT_CONFIG_H_
#define SLUICE_CONFIG_EXPERT_CONFIG_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice::config {

// Which expert leaves a full slot arena (memory::MakePolicy's names).
enum class EvictionPolicy {
  kLru,  // least recently used
  kLfu,  // frequency-weighted LRU (memory::kDefaultLfuHalfLife)
  // Scan-resistant, frequency-aware (memory::MakeTinyLfuPolicy): the one
  // that keeps hits when a batched step's experts over all layers exceed
  // the arena, where LRU's fall to 0 (docs/SLOT_CACHE.md, "Many streams").
  kTinyLfu,
};

// Where decode misses are computed (memory/miss_split.h).
enum class MissPolicy {
  kCopy,  // every miss is copied into a slot (bit-identical logits)
  kHost,  // every miss the host can reach is computed by the host CPU
  kCost,  // per layer, the split the cost model predicts finishes first
};

// How the device arena and the host tier share experts (model/cuda/host_tier.h).
enum class TierMode {
  kInclusive,  // the host tier keeps a copy of what it passes up
  kExclusive,  // an expert is in one tier: D + H distinct experts off disk
};

// --expert_slots -1: the fit planner chooses.
inline constexpr int64_t kPlannerChoosesSlots = -1;
// The largest --expert_host_threads.
inline constexpr int kMaxHostThreads = 1024;

struct ExpertConfig {
  // --expert_slots: device slots for routed experts. -1: the fit planner
  // chooses (every expert resident when they fit, else the largest arena
  // that fits); 0: no slot, every expert read in place. A backend given -1
  // and no fraction keeps every expert resident: the plan's answer when
  // they fit.
  int64_t slots = kPlannerChoosesSlots;
  // --expert_arena_fraction: slots = ceil(fraction x layers x experts), in
  // (0, 1]; 0: the planner chooses. Exclusive with slots >= 0.
  double arena_fraction = 0;
  // --expert_policy: lru, lfu or tinylfu.
  EvictionPolicy policy = EvictionPolicy::kLru;
  // --host_tier_bytes: host RAM the expert cache may pin, in front of
  // O_DIRECT disk reads. 0: the planner chooses (the mapping registered in
  // place when the experts fit in RAM, else a host tier).
  uint64_t host_tier_bytes = 0;
  // --host_tier_policy: the host tier's eviction policy, lru, lfu or
  // tinylfu; "": memory::kDefaultHostTierPolicy (tinylfu).
  std::string host_tier_policy;
  // --expert_tiers: inclusive or exclusive (with a host tier). Exclusive
  // since it decoded 15-29% faster on realistic routing and 4-24% on
  // uniform, and prefilled 10-24% faster, than inclusive, interleaved on
  // the H100 (bench35 q4_k_m, arena 25%, host tier 1.5 GB; 2026-12-06,
  // docs/BENCHMARKS.md).
  TierMode tiers = TierMode::kExclusive;
  // --expert_prefetch: fetch the next layer's predicted experts ahead of
  // demand (streaming decode), at most a learnt budget a layer
  // (memory/prefetch_budget.h), and not in steps that run the host path.
  // Off: on the H100 (runs 21-22, 2026-12-07, docs/BENCHMARKS.md) the same
  // command with it on decoded 416.7 and 339.8 tok/s at 25% of bench35
  // (copy; 361.0 off), the budget settling high in the slower run.
  bool prefetch = false;
  // --expert_miss_policy: copy, host or cost. With every expert resident
  // nothing misses and the plan sets copy.
  MissPolicy miss_policy = MissPolicy::kCopy;
  // --expert_host_threads: threads computing host misses, 0..1024; 0: one
  // per hardware thread.
  int host_threads = 0;
  // --expert_profile: a usage profile file (memory/expert_profile.h) the
  // worker warms its expert arena from at load and saves its counts to
  // while serving; "" : none.
  std::string profile;
  // --expert_skip: the opt-in lossy mode (issue 22; docs/SLOT_CACHE.md,
  // "Skipping cold experts"). A routed expert whose share of its token's
  // routing weights is below this and whose bytes are not in RAM is not
  // computed; the token's other weights are scaled up to the same sum. The
  // token's largest weight is never skipped. In [0, 1); 0: off (logits bit
  // for bit as without it). The CUDA backend skips in one-token passes
  // while streaming experts (residency: a device slot or the host tier).
  double skip_threshold = 0;

  bool operator==(const ExpertConfig&) const = default;
};

// "lru", "lfu", "tinylfu".
std::string EvictionPolicyName(EvictionPolicy policy);
// InvalidArgument "--expert_policy='NAME': expected lru, lfu or tinylfu"
// otherwise.
absl::StatusOr<EvictionPolicy> ParseEvictionPolicy(absl::string_view name);

// "inclusive", "exclusive".
std::string TierModeName(TierMode mode);
// InvalidArgument "--expert_tiers='NAME': expected inclusive or exclusive"
// otherwise.
absl::StatusOr<TierMode> ParseTierMode(absl::string_view name);

// "copy", "host", "cost".
std::string MissPolicyName(MissPolicy policy);
// InvalidArgument `unknown expert miss policy "NAME" (copy, host or cost)`
// otherwise.
absl::StatusOr<MissPolicy> ParseMissPolicy(absl::string_view name);

// Checks ranges: slots >= -1, a fraction in [0, 1], not both a slot count
// and a fraction, host threads in 0..kMaxHostThreads, a host-tier policy
// name ("", lru, lfu or tinylfu). InvalidArgument
// naming the flag and the value.
absl::Status ValidateExpertConfig(const ExpertConfig& config);

// "slots=-1 arena_fraction=0 policy=lru host_tier_bytes=0 prefetch=false
// miss_policy=copy host_threads=0" (then " profile=FILE" and
// " skip=0.05" when set), for logs and test failures.
std::string ExpertConfigString(const ExpertConfig& config);

}  // namespace sluice::config

#endif  // SLUICE_CONFIG_EXPERT_CONFIG_H_
