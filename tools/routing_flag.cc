#include "tools/routing_flag.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "memory/routing_trace.h"
#include "model/arch.h"
#include "tools/slotsim_lib.h"

ABSL_FLAG(std::string, routing, "router",
          "which experts each token uses: router (the model's own), trace:FILE (a recorded "
          "trace), or a synthetic kind for the model's shape: uniform, zipf:S, cyclic, "
          "realistic[:zipf=S,reuse=R,spread=D], mixed[:wave=W,every=N,...]");
ABSL_FLAG(uint64_t, routing_seed, 1, "seed of a synthetic --routing");

namespace sluice::tools {

std::string RoutingFlag() { return absl::GetFlag(FLAGS_routing); }

absl::StatusOr<std::unique_ptr<TraceRouting>> RoutingFromFlags(const ModelFiles& files,
                                                               int64_t tokens) {
  const std::string spec = RoutingFlag();
  if (spec == "router") return nullptr;
  if (absl::StartsWith(spec, "trace:")) {
    const std::string path = spec.substr(6);
    ASSIGN_OR_RETURN(memory::RoutingTrace trace, memory::ReadRoutingTrace(path));
    return std::make_unique<TraceRouting>(std::move(trace), path);
  }
  ASSIGN_OR_RETURN(const ArchDesc desc, DescribeModel(files));
  memory::RoutingTraceHeader shape;
  shape.n_layer = static_cast<uint32_t>(desc.layers.size());
  shape.n_expert = static_cast<uint32_t>(desc.moe.n_expert);
  shape.k = static_cast<uint32_t>(desc.moe.n_expert_used);
  auto trace = slotsim::MakeSyntheticTrace(spec, shape, std::max<int64_t>(tokens, 1),
                                           absl::GetFlag(FLAGS_routing_seed));
  if (!trace.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--routing=", spec, ": ", trace.status().message(),
                     " (or router, trace:FILE)"));
  }
  return std::make_unique<TraceRouting>(*std::move(trace), spec);
}

}  // namespace sluice::tools
