// The command-line flags of the expert settings, defined once for every
// binary that takes them (sluiced, where its config file's keys are the
// same names; tools/generate; tools/parity): --expert_slots,
// --expert_arena_fraction, --expert_policy, --host_tier_bytes (a byte size:
// 64G), --expert_prefetch, --expert_miss_policy, --expert_host_threads,
// --expert_profile, --expert_skip, --host_tier_policy, --expert_tiers.
// Linking this library defines them; their defaults are ExpertConfig{}'s.
#ifndef SLUICE_CONFIG_EXPERT_FLAGS_H_
#define SLUICE_CONFIG_EXPERT_FLAGS_H_

#include "absl/status/statusor.h"
#include "config/expert_config.h"

namespace sluice::config {

// The flags' values, parsed and validated (ValidateExpertConfig).
// InvalidArgument naming the flag and the value: "--expert_policy='fifo':
// expected lru, lfu or tinylfu", "--expert_miss_policy='Host': expected copy, host
// or cost", "--host_tier_bytes='lots': expected a byte count ...", and the
// range errors of ValidateExpertConfig.
absl::StatusOr<ExpertConfig> ExpertConfigFromFlags();

}  // namespace sluice::config

#endif  // SLUICE_CONFIG_EXPERT_FLAGS_H_
