// `sluicectl plan MODEL`: the fit planner's plan for a model, from its GGUF
// header and tensor table only (the weights are mapped, never read), on this
// host or on figures given by flags. No daemon is involved; the worker runs
// the same planner (memory/fit_planner.h) before building a CUDA engine.
#ifndef SLUICE_CLIENTS_PLAN_H_
#define SLUICE_CLIENTS_PLAN_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::ctl {

// The byte sizes of sluiced and the tools (config::ParseByteSize: "123",
// "64K", "512M", "1.5G", "8G"), InvalidArgument naming --`flag` and the value.
absl::StatusOr<uint64_t> ParseBytes(const std::string& flag, const std::string& value);

// Prints the plan of positional[0] to `out`; refusals and bad flags to `err`.
// Flags: device_memory, host_memory (BYTES or "auto"), context_length,
// sessions, expert_arena_fraction | expert_slots, host_tier_bytes,
// disk_bandwidth (bytes/s); sluiced's names. The old names --context and
// --arena_fraction still work, with a deprecation line on `err`.
// Returns 0 with a plan, 1 when the planner refuses, 2 for bad usage.
int RunPlan(std::map<std::string, std::string> flags, const std::vector<std::string>& positional,
            std::ostream& out, std::ostream& err);

}  // namespace sluice::ctl

#endif  // SLUICE_CLIENTS_PLAN_H_
