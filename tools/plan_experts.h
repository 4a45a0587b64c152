// The fit planner before a tool builds a CUDA engine, as the CUDA worker
// runs it, so that the expert flags mean to the tools what they mean to
// sluiced (--expert_slots -1: the planner chooses).
#ifndef SLUICE_TOOLS_PLAN_EXPERTS_H_
#define SLUICE_TOOLS_PLAN_EXPERTS_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "loader/model_files.h"
#include "model/engine.h"

namespace sluice::tools {

// On the CUDA backend: plans `files` (memory/expert_plan.h) for
// options->context_length on device options->device and this host, gives
// `log` the plan's table and writes the plan into options->experts. Nothing
// on the CPU backend. The planner's and the device probe's errors are
// returned unchanged.
absl::Status PlanExperts(const ModelFiles& files, EngineOptions* options,
                         const std::function<void(const std::string& line)>& log);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_PLAN_EXPERTS_H_
