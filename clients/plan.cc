#include "clients/plan.h"

#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "config/byte_size.h"
#include "config/expert_config.h"
#include "config/flag_alias.h"
#include "planning/model_plan.h"

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

// --context_length, --sessions, --expert_slots, --expert_arena_fraction,
// --host_tier_bytes and --expert_tiers into `s`; InvalidArgument naming the
// flag.
absl::Status ParseRequest(const std::map<std::string, std::string>& flags,
                          planning::PlanRequest& s) {
  if (!absl::SimpleAtoi(Get(flags, "context_length", absl::StrCat(kDefaultContext)),
                        &s.context_length) ||
      s.context_length < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--context_length='", Get(flags, "context_length", ""), "': must be >= 1"));
  }
  if (!absl::SimpleAtoi(Get(flags, "sessions", "1"), &s.sessions) || s.sessions < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sessions='", Get(flags, "sessions", ""), "': must be >= 1"));
  }
  config::ExpertConfig& r = s.experts;
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
// second (1.5e9); the planner's defaults where not given.
absl::Status ParseRates(const std::map<std::string, std::string>& flags,
                        planning::PlanRequest& s) {
  const std::pair<const char*, std::optional<double>*> named[] = {
      {"disk_bytes_per_s", &s.disk_bytes_per_s},
      {"pcie_bytes_per_s", &s.pcie_bytes_per_s},
      {"hbm_bytes_per_s", &s.hbm_bytes_per_s}};
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

// The device's and the host's memory: BYTES, or "auto" (left unset: the
// planner asks nvidia-smi and /proc/meminfo).
absl::Status ParseMemory(const std::map<std::string, std::string>& flags,
                         planning::PlanRequest& s) {
  const std::pair<const char*, std::optional<uint64_t>*> named[] = {
      {"device_memory", &s.device_bytes}, {"host_memory", &s.host_bytes}};
  for (const auto& [name, bytes] : named) {
    const std::string value = Get(flags, name, "auto");
    if (value == "auto") continue;
    absl::StatusOr<uint64_t> b = ParseBytes(name, value);
    if (!b.ok()) return b.status();
    *bytes = *b;
  }
  return absl::OkStatus();
}

absl::StatusOr<planning::PlanRequest> ParseSettings(
    const std::map<std::string, std::string>& flags) {
  planning::PlanRequest s;
  if (absl::Status st = ParseRequest(flags, s); !st.ok()) return st;
  if (absl::Status st = ParseRates(flags, s); !st.ok()) return st;
  if (absl::Status st = ParseMemory(flags, s); !st.ok()) return st;
  if (flags.count("expert_profile")) s.expert_profile = flags.at("expert_profile");
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
  absl::StatusOr<planning::PlanRequest> request = ParseSettings(flags);
  if (!request.ok()) return usage(std::string(request.status().message()));
  request->model_path = positional[0];
  const planning::PlanReport report = planning::PlanModelFile(*request);
  switch (report.failure) {
    case planning::PlanFailure::kNone:
      out << report.text;
      return 0;
    case planning::PlanFailure::kHostProbe:
      return usage(report.message);
    case planning::PlanFailure::kModel:
      err << "sluicectl: plan: " << report.message << "\n";
      return 1;
    case planning::PlanFailure::kRefused:
      err << "sluicectl: plan refused: " << report.message << "\n";
      return 1;
    case planning::PlanFailure::kProfile:
      return usage(absl::StrCat("--expert_profile: ", report.message));
  }
  return 1;
}

}  // namespace sluice::ctl
