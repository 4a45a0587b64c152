#include "clients/sluicectl_flags.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, addr, "127.0.0.1:50051", "The daemon's gRPC address, HOST:PORT.");
ABSL_FLAG(std::optional<double>, timeout, std::nullopt,
          "Seconds each call may take (unset or 0: no deadline; top: 5 s a frame when unset).");
ABSL_FLAG(std::string, tls_ca_file, "",
          "TLS: the CA that signed the daemon's certificate (unset: plaintext).");
ABSL_FLAG(std::string, tls_cert_file, "", "TLS: a client certificate.");
ABSL_FLAG(std::string, tls_key_file, "", "TLS: the client certificate's key.");
ABSL_FLAG(std::string, api_key_file, "",
          "A file holding the API key, sent as 'authorization: Bearer KEY'.");

ABSL_FLAG(std::string, model_id, "", "load: the id to give; generate, tokenize: the model.");
ABSL_FLAG(uint32_t, threads, 0, "load: CPU threads (0: the daemon's).");
ABSL_FLAG(std::optional<uint32_t>, context_length, std::nullopt,
          "load: tokens per session (unset: the daemon's); plan: (unset: 4096).");
ABSL_FLAG(bool, json, false, "generate, tokenize, models: JSON instead of text.");
ABSL_FLAG(bool, parse_special, false, "generate, tokenize: special tokens in the text.");
ABSL_FLAG(bool, chat, false, "generate: the prompt is a user turn of the chat template.");
ABSL_FLAG(std::string, system, "", "generate --chat: a system turn before it.");
ABSL_FLAG(uint32_t, max_tokens, 0, "generate: tokens at most (0: the daemon's).");
ABSL_FLAG(std::optional<float>, temperature, std::nullopt, "generate: sampling temperature.");
ABSL_FLAG(std::optional<uint32_t>, top_k, std::nullopt, "generate: top-k.");
ABSL_FLAG(std::optional<float>, top_p, std::nullopt, "generate: top-p.");
ABSL_FLAG(std::optional<float>, min_p, std::nullopt, "generate: min-p.");
ABSL_FLAG(std::optional<float>, repetition_penalty, std::nullopt, "generate: repetition penalty.");
ABSL_FLAG(std::optional<uint32_t>, repetition_window, std::nullopt,
          "generate: tokens the repetition penalty looks back on.");
ABSL_FLAG(std::optional<uint64_t>, seed, std::nullopt, "generate: sampler seed.");
ABSL_FLAG(std::string, stop, "", "generate: a stop string.");
ABSL_FLAG(bool, ignore_eos, false, "generate: go on past end of sequence.");
ABSL_FLAG(std::string, stats, "",
          "generate: the request's expert slot cache figures after the text (bare: true); "
          "token: also per token.");

ABSL_FLAG(double, interval, 1, "top: seconds between frames (> 0).");
ABSL_FLAG(int, iterations, 0, "top: frames to draw (0: until ^C).");
ABSL_FLAG(bool, plain, false, "top: frames one after another, no screen clearing.");

ABSL_FLAG(std::string, device_memory, "auto",
          "plan: the device's memory, BYTES or auto (nvidia-smi).");
ABSL_FLAG(std::string, host_memory, "auto",
          "plan: the host's memory, BYTES or auto (/proc/meminfo).");
ABSL_FLAG(int64_t, sessions, 1, "plan: sessions of --context_length tokens (>= 1).");
ABSL_FLAG(int64_t, kv_cache_tokens, 0,
          "plan: the worker's KV pool in positions over all sessions, as sluiced "
          "--kv_cache_tokens (0: sessions x context).");
ABSL_FLAG(std::optional<sluice::ctl::BytesPerSecond>, disk_bytes_per_s, std::nullopt,
          "plan: the disk's read rate (unset: the H200's, 1.5e9).");
ABSL_FLAG(std::optional<sluice::ctl::BytesPerSecond>, pcie_bytes_per_s, std::nullopt,
          "plan: host to device over PCIe, pinned (unset: the H200's, 55.2e9).");
ABSL_FLAG(std::optional<sluice::ctl::BytesPerSecond>, hbm_bytes_per_s, std::nullopt,
          "plan: the device's memory rate (unset: the H200's, 4.0e12).");

namespace sluice::ctl {
namespace {

// The Abseil flags sluicectl takes: those above and the expert settings that
// plan shares with sluiced. The process defines others (the expert settings
// plan does not take, Abseil's --help family); to sluicectl they are unknown.
constexpr const char* kTaken[] = {
    "addr", "timeout", "tls_ca_file", "tls_cert_file", "tls_key_file", "api_key_file",
    "model_id", "threads", "context_length", "json", "parse_special", "chat", "system",
    "max_tokens", "temperature", "top_k", "top_p", "min_p", "repetition_penalty",
    "repetition_window", "seed", "stop", "ignore_eos", "stats", "interval", "iterations",
    "plain", "device_memory", "host_memory", "sessions", "kv_cache_tokens", "disk_bytes_per_s",
    "pcie_bytes_per_s", "hbm_bytes_per_s", "expert_slots", "expert_arena_fraction",
    "host_tier_bytes", "expert_tiers", "expert_profile"};

constexpr char kHelp[] = "help";
constexpr char kBareString[] = "stats";  // a string flag that may stand alone

// "--NAME='TEXT' is not a number", or ": REASON" where the type gave one.
std::string BadValue(const absl::CommandLineFlag& flag, const std::string& text,
                     const std::string& error) {
  // Abseil's error: "Illegal value 'TEXT' specified for flag 'NAME'", then
  // "; REASON" when the type's parser gave a reason (BytesPerSecond does;
  // the numbers and bool do not).
  const std::string prefix =
      absl::StrCat("Illegal value '", text, "' specified for flag '", flag.Name(), "'; ");
  std::string reason;
  if (absl::StartsWith(error, prefix)) {
    reason = error.substr(prefix.size());
  } else if (flag.IsOfType<bool>()) {
    reason = "expected true or false";
  }
  if (reason.empty()) return absl::StrCat("--", flag.Name(), "='", text, "' is not a number");
  return absl::StrCat("--", flag.Name(), "='", text, "': ", reason);
}

}  // namespace

bool AbslParseFlag(absl::string_view text, BytesPerSecond* rate, std::string* error) {
  if (!absl::SimpleAtod(text, &rate->value) || !(rate->value > 0) || !std::isfinite(rate->value)) {
    *error = "expected bytes per second > 0, such as 1.5e9";
    return false;
  }
  return true;
}

std::string AbslUnparseFlag(BytesPerSecond rate) { return absl::UnparseFlag(rate.value); }

std::vector<std::string> FlagNames() {
  std::vector<std::string> names(std::begin(kTaken), std::end(kTaken));
  names.push_back(kHelp);
  for (const auto& [old_name, new_name] : kRenamedPlanFlags) names.push_back(old_name);
  return names;
}

std::vector<std::string> BareFlagNames() {
  std::vector<std::string> names = {kHelp, kBareString};
  for (const char* name : kTaken) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag != nullptr && flag->IsOfType<bool>()) names.push_back(name);
  }
  return names;
}

absl::Status SetFlags(const std::map<std::string, std::string>& given) {
  std::string error;
  for (const char* name : kTaken) {
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr || !flag->ParseFrom(flag->DefaultValue(), &error)) {
      return absl::InternalError(absl::StrCat("flag --", name, ": cannot reset: ", error));
    }
  }
  for (const auto& [name, text] : given) {
    if (std::find(std::begin(kTaken), std::end(kTaken), name) == std::end(kTaken)) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (!flag->ParseFrom(text, &error)) {
      return absl::InvalidArgumentError(BadValue(*flag, text, error));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::ctl
