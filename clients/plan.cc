#include "clients/plan.h"

#include <optional>
#include <tuple>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "clients/sluicectl_flags.h"
#include "config/byte_size.h"
#include "config/expert_config.h"
#include "config/expert_flags.h"
#include "config/flag_alias.h"
#include "planning/model_plan.h"

namespace sluice::ctl {
namespace {

constexpr int64_t kDefaultContext = 4096;  // sluiced's --context_length default

// Moves an old name's text to its current name (kRenamedPlanFlags), with a
// deprecation line on `err`; an empty string, or the message when both names
// disagree.
std::string ResolveRenamedFlags(std::map<std::string, std::string>& flags, std::ostream& err) {
  for (const auto& [old_name, new_name] : kRenamedPlanFlags) {
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

// --context_length, --sessions and the expert settings (sluiced's flags,
// ranges and messages: -1 slots and fraction 0 mean "the planner chooses"
// here too) into `s`; InvalidArgument naming the flag.
absl::Status ParseRequest(planning::PlanRequest& s) {
  s.context_length = absl::GetFlag(FLAGS_context_length).value_or(kDefaultContext);
  if (s.context_length < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--context_length='", s.context_length, "': must be >= 1"));
  }
  s.sessions = absl::GetFlag(FLAGS_sessions);
  if (s.sessions < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--sessions='", s.sessions, "': must be >= 1"));
  }
  s.kv_pool_tokens = absl::GetFlag(FLAGS_kv_cache_tokens);
  if (s.kv_pool_tokens != 0 && s.kv_pool_tokens < s.context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv_cache_tokens='", s.kv_pool_tokens, "': must hold one session's --context_length=",
        s.context_length, " (or be 0)"));
  }
  ASSIGN_OR_RETURN(s.experts, config::ExpertConfigFromFlags());
  if (!s.experts.profile.empty()) s.expert_profile = s.experts.profile;
  return absl::OkStatus();
}

// The device's and the host's memory: BYTES, or "auto" (left unset: the
// planner asks nvidia-smi and /proc/meminfo).
absl::Status ParseMemory(planning::PlanRequest& s) {
  const std::tuple<const char*, std::string, std::optional<uint64_t>*> named[] = {
      {"device_memory", absl::GetFlag(FLAGS_device_memory), &s.device_bytes},
      {"host_memory", absl::GetFlag(FLAGS_host_memory), &s.host_bytes}};
  for (const auto& [name, value, bytes] : named) {
    if (value == "auto") continue;
    ASSIGN_OR_RETURN(*bytes, ParseBytes(name, value));
  }
  return absl::OkStatus();
}

absl::StatusOr<planning::PlanRequest> ParseSettings() {
  planning::PlanRequest s;
  RETURN_IF_ERROR(ParseRequest(s));
  // --*_bytes_per_s: > 0 and finite, checked as they were parsed; unset, the
  // planner's defaults.
  const std::pair<std::optional<BytesPerSecond>, std::optional<double>*> rates[] = {
      {absl::GetFlag(FLAGS_disk_bytes_per_s), &s.disk_bytes_per_s},
      {absl::GetFlag(FLAGS_pcie_bytes_per_s), &s.pcie_bytes_per_s},
      {absl::GetFlag(FLAGS_hbm_bytes_per_s), &s.hbm_bytes_per_s}};
  for (const auto& [rate, field] : rates) {
    if (rate) *field = rate->value;
  }
  RETURN_IF_ERROR(ParseMemory(s));
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
  if (absl::Status st = SetFlags(flags); !st.ok()) return usage(std::string(st.message()));
  absl::StatusOr<planning::PlanRequest> request = ParseSettings();
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
