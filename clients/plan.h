// `sluicectl plan MODEL`: the fit planner's plan for a model, from its GGUF
// header and tensor table only (the weights are mapped, never read), on this
// host or on figures given by flags. No daemon is involved: the flags become
// a planning::PlanRequest (planning/model_plan.h), which runs the planner the
// worker runs (memory/fit_planner.h) before building a CUDA engine.
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

// Prints the plan of positional[0] to `out`, then its cold-start time and
// decode-rate bound (memory::ColdStartOf, memory::DecodeEstimateOf);
// refusals and bad flags to `err`. `flags` are ParseArgs' (name -> text); the
// old names --context, --arena_fraction and --disk_bandwidth become their
// current names, with a deprecation line on `err`, then SetFlags
// (sluicectl_flags.h) parses them into the Abseil flags plan reads:
// device_memory, host_memory (BYTES or "auto"), context_length, sessions,
// expert_arena_fraction | expert_slots, host_tier_bytes, expert_tiers
// (sluiced's names and definitions); disk_bytes_per_s, pcie_bytes_per_s,
// hbm_bytes_per_s (bytes/s, memory::Rates' defaults); expert_profile (a
// saved usage profile: the decode estimate's tier shares come from its
// counts instead of uniform routing). Returns 0 with a plan, 1 when the
// planner refuses (or the model cannot be read), 2 for bad usage (a bad
// flag value or profile, named).
int RunPlan(std::map<std::string, std::string> flags, const std::vector<std::string>& positional,
            std::ostream& out, std::ostream& err);

}  // namespace sluice::ctl

#endif  // SLUICE_CLIENTS_PLAN_H_
