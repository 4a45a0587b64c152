#include "clients/plan.h"

#include <cstdio>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "config/byte_size.h"
#include "config/expert_config.h"
#include "config/flag_alias.h"
#include "loader/model_files.h"
#include "memory/fit_planner.h"
#include "memory/host_probe.h"
#include "memory/model_footprint.h"

namespace sluice::ctl {
namespace {

constexpr int64_t kDefaultContext = 4096;  // sluiced's --context_length default

// plan's first names for two settings sluiced calls otherwise: {old, now}.
constexpr std::pair<const char*, const char*> kRenamedFlags[] = {
    {"context", "context_length"}, {"arena_fraction", "expert_arena_fraction"}};

// Moves an old name's value to its current name, with a deprecation line on
// `err`; an empty string, or the message when both names disagree.
std::string ResolveRenamedFlags(std::map<std::string, std::string>& flags, std::ostream& err) {
  for (const auto& [old_name, new_name] : kRenamedFlags) {
    auto old = flags.find(old_name);
    if (old == flags.end()) continue;
    auto now = flags.find(new_name);
    if (now != flags.end() && now->second != old->second) {
      return config::RenamedFlagConflict(new_name, now->second, old_name, old->second);
    }
    err << "sluicectl: " << config::DeprecationLine(old_name, new_name) << "\n";
    flags[new_name] = old->second;
    flags.erase(old);
  }
  return "";
}

std::string Get(const std::map<std::string, std::string>& flags, const std::string& name,
                const std::string& fallback) {
  auto it = flags.find(name);
  return it == flags.end() ? fallback : it->second;
}

// The first GPU's memory from nvidia-smi (a process, not a link: clients/
// never links CUDA). Unknown where there is no nvidia-smi or no GPU.
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

}  // namespace

absl::StatusOr<uint64_t> ParseBytes(const std::string& flag, const std::string& value) {
  return config::ParseByteSize("--" + flag, value);
}

int RunPlan(std::map<std::string, std::string> flags, const std::vector<std::string>& positional,
            std::ostream& out, std::ostream& err) {
  auto usage = [&err](const std::string& why) {
    err << "sluicectl: plan: " << why << "\n";
    return 2;
  };
  if (positional.size() != 1) return usage("takes one MODEL path");
  if (std::string conflict = ResolveRenamedFlags(flags, err); !conflict.empty()) {
    return usage(conflict);
  }
  memory::FitInputs in;
  int64_t context = kDefaultContext, sessions = 1;
  if (!absl::SimpleAtoi(Get(flags, "context_length", "4096"), &context) || context < 1) {
    return usage(
        absl::StrCat("--context_length='", Get(flags, "context_length", ""), "': must be >= 1"));
  }
  if (!absl::SimpleAtoi(Get(flags, "sessions", "1"), &sessions) || sessions < 1) {
    return usage(absl::StrCat("--sessions='", Get(flags, "sessions", ""), "': must be >= 1"));
  }
  if (flags.count("expert_slots") &&
      !absl::SimpleAtoi(flags.at("expert_slots"), &in.request.slots)) {
    return usage(absl::StrCat("--expert_slots='", flags.at("expert_slots"), "' is not a number"));
  }
  if (flags.count("expert_arena_fraction") &&
      !absl::SimpleAtod(flags.at("expert_arena_fraction"), &in.request.arena_fraction)) {
    return usage(absl::StrCat("--expert_arena_fraction='", flags.at("expert_arena_fraction"),
                              "' is not a number"));
  }
  for (const auto& [name, target] :
       {std::pair<const char*, uint64_t*>{"host_tier_bytes", &in.request.host_tier_bytes},
        {"disk_bandwidth", nullptr}}) {
    if (!flags.count(name)) continue;
    absl::StatusOr<uint64_t> b = ParseBytes(name, flags.at(name));
    if (!b.ok()) return usage(std::string(b.status().message()));
    if (target != nullptr) *target = *b;
    else in.disk_bytes_per_s = static_cast<double>(*b);
  }
  // sluiced's ranges and messages: -1 slots and fraction 0 mean "the
  // planner chooses" here too.
  if (absl::Status valid = config::ValidateExpertConfig(in.request); !valid.ok()) {
    return usage(std::string(valid.message()));
  }
  const std::string device = Get(flags, "device_memory", "auto");
  if (device == "auto") {
    in.device = ProbeDevice();
  } else {
    absl::StatusOr<uint64_t> b = ParseBytes("device_memory", device);
    if (!b.ok()) return usage(std::string(b.status().message()));
    in.device = {true, *b, *b};
  }
  const std::string host = Get(flags, "host_memory", "auto");
  if (host == "auto") {
    absl::StatusOr<memory::HostMemory> h = memory::ProcHostProbe().Memory();
    if (!h.ok()) return usage(std::string(h.status().message()));
    in.host = *h;
  } else {
    absl::StatusOr<uint64_t> b = ParseBytes("host_memory", host);
    if (!b.ok()) return usage(std::string(b.status().message()));
    in.host = {*b, *b};
  }
  absl::StatusOr<std::unique_ptr<ModelFiles>> files = ModelFiles::Open(positional[0]);
  if (!files.ok()) {
    err << "sluicectl: plan: " << files.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<memory::ModelFootprint> footprint =
      memory::FootprintOf((*files)->tensors(), context, sessions);
  if (!footprint.ok()) {
    err << "sluicectl: plan: " << footprint.status().message() << "\n";
    return 1;
  }
  in.model = *footprint;
  absl::StatusOr<memory::Plan> plan = memory::PlanFit(in);
  if (!plan.ok()) {
    err << "sluicectl: plan refused: " << plan.status().message() << "\n";
    return 1;
  }
  out << "model                  " << positional[0] << " (" << (*files)->shard_count()
      << " shard(s), " << (*files)->tensors().size() << " tensors)\n"
      << "context                " << context << " tokens x " << sessions << " session(s)\n"
      << plan->Table();
  return 0;
}

}  // namespace sluice::ctl
