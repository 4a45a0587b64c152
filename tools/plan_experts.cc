#include "tools/plan_experts.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "memory/device_memory_probe.h"
#include "memory/expert_plan.h"
#include "memory/host_probe.h"

namespace sluice::tools {

absl::Status PlanExperts(const ModelFiles& files, EngineOptions* options,
                         const std::function<void(const std::string& line)>& log) {
  if (options->backend != Backend::kCuda) return absl::OkStatus();
  ASSIGN_OR_RETURN(const memory::DeviceMemory device,
                   memory::ProbeDeviceMemory(options->device));
  ASSIGN_OR_RETURN(const memory::HostMemory host, memory::ProcHostProbe().Memory());
  ASSIGN_OR_RETURN(const memory::Plan plan,
                   memory::PlanExperts(files.tensors(), options->context_length, device, host,
                                       &options->experts));
  if (log) log(absl::StrCat("fit plan:\n", plan.Table()));
  return absl::OkStatus();
}

}  // namespace sluice::tools
