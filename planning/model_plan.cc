#include "planning/model_plan.h"

#include <cstdio>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loader/model_files.h"
#include "memory/fit_planner.h"
#include "memory/host_probe.h"
#include "memory/model_footprint.h"

namespace sluice::planning {
namespace {

// The first GPU's memory from nvidia-smi. Unknown where there is no
// nvidia-smi or no GPU.
memory::DeviceMemory ProbeDevice() {
  memory::DeviceMemory d;
  FILE* p = popen(
      "nvidia-smi --query-gpu=memory.total,memory.free --format=csv,noheader,nounits -i 0 "
      "2>/dev/null",
      "r");
  if (p == nullptr) return d;
  char line[256] = {0};
  const bool got = fgets(line, sizeof line, p) != nullptr;
  const int rc = pclose(p);
  unsigned long long total_mib = 0, free_mib = 0;
  if (got && rc == 0 && sscanf(line, "%llu, %llu", &total_mib, &free_mib) == 2) {
    d.known = true;
    d.total_bytes = total_mib << 20;
    d.free_bytes = free_mib << 20;
  }
  return d;
}

PlanReport Failed(PlanFailure failure, const absl::Status& status) {
  return {failure, std::string(status.message()), ""};
}

memory::Rates RatesOf(const PlanRequest& r) {
  memory::Rates rates;
  if (r.disk_bytes_per_s) rates.disk_bytes_per_s = *r.disk_bytes_per_s;
  if (r.pcie_bytes_per_s) rates.pcie_bytes_per_s = *r.pcie_bytes_per_s;
  if (r.hbm_bytes_per_s) rates.hbm_bytes_per_s = *r.hbm_bytes_per_s;
  return rates;
}

}  // namespace

PlanReport PlanModelFile(const PlanRequest& r) {
  memory::FitInputs in;
  in.request = r.experts;
  in.device = r.device_bytes ? memory::DeviceMemory{true, *r.device_bytes, *r.device_bytes}
                             : ProbeDevice();
  if (r.host_bytes) {
    in.host = {*r.host_bytes, *r.host_bytes};
  } else {
    absl::StatusOr<memory::HostMemory> host = memory::ProcHostProbe().Memory();
    if (!host.ok()) return Failed(PlanFailure::kHostProbe, host.status());
    in.host = *host;
  }
  absl::StatusOr<std::unique_ptr<ModelFiles>> files = ModelFiles::Open(r.model_path);
  if (!files.ok()) return Failed(PlanFailure::kModel, files.status());
  absl::StatusOr<memory::ModelFootprint> footprint =
      memory::FootprintOf(**files, r.context_length, r.sessions);
  if (!footprint.ok()) return Failed(PlanFailure::kModel, footprint.status());
  in.model = *footprint;
  if (r.kv_pool_tokens > 0) {
    in.model.kv_pool_tokens = r.kv_pool_tokens;
    in.model.kv_page_bytes = memory::kDeviceKvPageBytes;
  }
  absl::StatusOr<memory::Plan> plan = memory::PlanFit(in);
  if (!plan.ok()) return Failed(PlanFailure::kRefused, plan.status());
  absl::StatusOr<memory::TierShares> shares = memory::UniformShares(*plan);
  if (r.expert_profile) {
    shares = memory::ProfileSharesOfFile(*plan, *r.expert_profile);
    if (!shares.ok()) return Failed(PlanFailure::kProfile, shares.status());
  }
  const memory::Rates rates = RatesOf(r);
  std::ostringstream text;
  text << "model                  " << r.model_path << " (" << (*files)->shard_count()
       << " shard(s), " << (*files)->tensors().size() << " tensors)\n"
       << "context                " << r.context_length << " tokens x " << r.sessions
       << " session(s)\n"
       << plan->Table() << memory::ColdStartOf(*plan, rates).Table()
       << memory::DecodeEstimateOf(*plan, *shares, rates).Table();
  return {PlanFailure::kNone, "", text.str()};
}

}  // namespace sluice::planning
