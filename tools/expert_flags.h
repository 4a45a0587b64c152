// The command-line flags that place routed experts (tools/generate,
// tools/parity): --expert_slots, --expert_arena_fraction, --expert_policy,
// --host_tier_bytes, --expert_prefetch, --expert_miss_policy,
// --expert_host_threads. Defined once here; linking this library adds them.
#ifndef SLUICE_TOOLS_EXPERT_FLAGS_H_
#define SLUICE_TOOLS_EXPERT_FLAGS_H_

#include "absl/status/statusor.h"
#include "model/engine.h"

namespace sluice::tools {

// EngineOptions::experts from the flags. InvalidArgument (naming the flag
// and the value) for a slot count below -1, a fraction outside [0, 1], an
// unknown eviction or miss policy, or a negative thread count.
absl::StatusOr<EngineOptions::Experts> ExpertOptionsFromFlags();

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_EXPERT_FLAGS_H_
