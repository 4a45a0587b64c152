#include "memory/expert_plan.h"

#include "base/status_macros.h"
#include "memory/model_footprint.h"

namespace sluice::memory {

absl::StatusOr<Plan> PlanExperts(const TensorTable& table, int64_t context_length,
                                 const DeviceMemory& device, const HostMemory& host,
                                 config::ExpertConfig* experts, int64_t sessions,
                                 int64_t kv_pool_tokens) {
  ASSIGN_OR_RETURN(ModelFootprint footprint, FootprintOf(table, context_length, sessions));
  if (kv_pool_tokens > 0) {
    footprint.kv_pool_tokens = kv_pool_tokens;
    footprint.kv_page_bytes = kDeviceKvPageBytes;
  }
  FitInputs in;
  in.model = footprint;
  in.device = device;
  in.host = host;
  in.request = *experts;
  ASSIGN_OR_RETURN(Plan plan, PlanFit(in));
  // The engine takes the plan's numbers, so that it builds exactly what was
  // checked (a fraction becomes its slot count).
  experts->arena_fraction = 0;
  experts->slots = plan.streaming() ? plan.slots : config::kPlannerChoosesSlots;
  experts->host_tier_bytes = plan.mode == FitMode::kArenaHostTier ? plan.host_tier_bytes : 0;
  // Without streaming nothing misses, and the CUDA backend refuses a miss
  // policy other than copy; the setting applies to the models that stream.
  if (!plan.streaming()) experts->miss_policy = config::MissPolicy::kCopy;
  return plan;
}

}  // namespace sluice::memory
