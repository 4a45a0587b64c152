// The fit planner applied to an expert configuration: what a CUDA worker
// and the tools' CUDA backend run before the engine is built, so that the
// settings left to the planner (config/expert_config.h) mean the same in
// sluiced and in the tools.
#ifndef SLUICE_MEMORY_EXPERT_PLAN_H_
#define SLUICE_MEMORY_EXPERT_PLAN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "config/expert_config.h"
#include "loader/tensor_table.h"
#include "memory/fit_planner.h"

namespace sluice::memory {

// Plans `table` for `sessions` sessions of `context_length` tokens on
// `device` and `host` with *experts as the request, then sets *experts to the plan
// (slots and host tier; slots -1 when every expert stays resident, and then
// miss_policy copy: nothing misses). The planner's RESOURCE_EXHAUSTED or
// INVALID_ARGUMENT is returned unchanged: its message gives the numbers and
// a configuration that fits. The sessions are the worker's --max_sequences
// (each holds its KV and recurrent state beside the weights); the tools run
// one. A KV pool (kv_pool_tokens > 0, sluiced --kv_cache_tokens) bounds the
// positions they hold together: the KV counted is the pool's, plus a device
// page of rounding per KV buffer of each session (kDeviceKvPageBytes).
absl::StatusOr<Plan> PlanExperts(const TensorTable& table, int64_t context_length,
                                 const DeviceMemory& device, const HostMemory& host,
                                 config::ExpertConfig* experts, int64_t sessions = 1,
                                 int64_t kv_pool_tokens = 0);

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_EXPERT_PLAN_H_
