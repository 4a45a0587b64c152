#include "clients/plan.h"

#include <cmath>
#include <cstdio>
#include <memory>
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

// plan's first names for settings now named as sluiced names them (or, for
// the disk rate, as the other rates): {old, now}.
constexpr std::pair<const char*, const char*> kRenamedFlags[] = {
    {"context", "context_length"},
    {"arena_fraction", "expert_arena_fraction"},
    {"disk_bandwidth", "disk_bytes_per_s"}};

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

// What plan's flags ask for.
struct Settings {
  memory::FitInputs in;  // all but the model
  int64_t context = kDefaultContext;
  int64_t sessions = 1;
  memory::Rates rates;
};

// --context_length, --sessions, --expert_slots, --expert_arena_fraction,
// --host_tier_bytes and --expert_tiers into `s`; InvalidArgument naming the
// flag.
absl::Status ParseRequest(const std::map<std::string, std::string>& flags, Settings& s) {
  if (!absl::SimpleAtoi(Get(flags, "context_length", "4096"), &s.context) || s.context < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--context_length='", Get(flags, "context_length", ""), "': must be >= 1"));
  }
  if (!absl::SimpleAtoi(Get(flags, "sessions", "1"), &s.sessions) || s.sessions < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sessions='", Get(flags, "sessions", ""), "': must be >= 1"));
  }
  config::ExpertConfig& r = s.in.request;
  if (flags.count("expert_slots") && !absl::SimpleAtoi(flags.at("expert_slots"), &r.slots)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--expert_slots='", flags.at("expert_slots"), "' is not a number"));
  }
  if (flags.count("expert_arena_fraction") &&
      !absl::SimpleAtod(flags.at("expert_arena_fraction"), &r.arena_fraction)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expert_arena_fraction='", flags.at("expert_arena_fraction"), "' is not a number"));
  }
  if (flags.count("host_tier_bytes")) {
    absl::StatusOr<uint64_t> b = ParseBytes("host_tier_bytes", flags.at("host_tier_bytes"));
    if (!b.ok()) return b.status();
    r.host_tier_bytes = *b;
  }
  if (flags.count("expert_tiers")) {
    absl::StatusOr<config::TierMode> tiers = config::ParseTierMode(flags.at("expert_tiers"));
    if (!tiers.ok()) return tiers.status();
    r.tiers = *tiers;
  }
  // sluiced's ranges and messages: -1 slots and fraction 0 mean "the
  // planner chooses" here too.
  return config::ValidateExpertConfig(r);
}

// --disk_bytes_per_s, --pcie_bytes_per_s, --hbm_bytes_per_s: bytes per
// second (1.5e9), memory::Rates' defaults where not given.
absl::Status ParseRates(const std::map<std::string, std::string>& flags, memory::Rates& rates) {
  const std::pair<const char*, double*> named[] = {
      {"disk_bytes_per_s", &rates.disk_bytes_per_s},
      {"pcie_bytes_per_s", &rates.pcie_bytes_per_s},
      {"hbm_bytes_per_s", &rates.hbm_bytes_per_s}};
  for (const auto& [name, rate] : named) {
    if (!flags.count(name)) continue;
    double v = 0;
    if (!absl::SimpleAtod(flags.at(name), &v) || !(v > 0) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", name, "='", flags.at(name), "': expected bytes per second > 0, such as 1.5e9"));
    }
    *rate = v;
  }
  return absl::OkStatus();
}

// The device's and the host's memory: BYTES, or "auto" (nvidia-smi,
// /proc/meminfo).
absl::Status ParseMemory(const std::map<std::string, std::string>& flags, memory::FitInputs& in) {
  const std::string device = Get(flags, "device_memory", "auto");
  if (device == "auto") {
    in.device = ProbeDevice();
  } else {
    absl::StatusOr<uint64_t> b = ParseBytes("device_memory", device);
    if (!b.ok()) return b.status();
    in.device = {true, *b, *b};
  }
  const std::string host = Get(flags, "host_memory", "auto");
  if (host == "auto") {
    absl::StatusOr<memory::HostMemory> h = memory::ProcHostProbe().Memory();
    if (!h.ok()) return h.status();
    in.host = *h;
  } else {
    absl::StatusOr<uint64_t> b = ParseBytes("host_memory", host);
    if (!b.ok()) return b.status();
    in.host = {*b, *b};
  }
  return absl::OkStatus();
}

absl::StatusOr<Settings> ParseSettings(const std::map<std::string, std::string>& flags) {
  Settings s;
  if (absl::Status st = ParseRequest(flags, s); !st.ok()) return st;
  if (absl::Status st = ParseRates(flags, s.rates); !st.ok()) return st;
  if (absl::Status st = ParseMemory(flags, s.in); !st.ok()) return st;
  return s;
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
  absl::StatusOr<Settings> settings = ParseSettings(flags);
  if (!settings.ok()) return usage(std::string(settings.status().message()));
  absl::StatusOr<std::unique_ptr<ModelFiles>> files = ModelFiles::Open(positional[0]);
  if (!files.ok()) {
    err << "sluicectl: plan: " << files.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<memory::ModelFootprint> footprint =
      memory::FootprintOf(**files, settings->context, settings->sessions);
  if (!footprint.ok()) {
    err << "sluicectl: plan: " << footprint.status().message() << "\n";
    return 1;
  }
  settings->in.model = *footprint;
  absl::StatusOr<memory::Plan> plan = memory::PlanFit(settings->in);
  if (!plan.ok()) {
    err << "sluicectl: plan refused: " << plan.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<memory::TierShares> shares = memory::UniformShares(*plan);
  if (flags.count("expert_profile")) {
    shares = memory::ProfileSharesOfFile(*plan, flags.at("expert_profile"));
    if (!shares.ok()) return usage(absl::StrCat("--expert_profile: ", shares.status().message()));
  }
  out << "model                  " << positional[0] << " (" << (*files)->shard_count()
      << " shard(s), " << (*files)->tensors().size() << " tensors)\n"
      << "context                " << settings->context << " tokens x " << settings->sessions
      << " session(s)\n"
      << plan->Table() << memory::ColdStartOf(*plan, settings->rates).Table()
      << memory::DecodeEstimateOf(*plan, *shares, settings->rates).Table();
  return 0;
}

}  // namespace sluice::ctl
