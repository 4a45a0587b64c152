// sluicectl's flags are Abseil flags (ABSL_FLAG), as in the other binaries:
// their types, defaults, help and value parsing are Abseil's. What is not
// Abseil's is the reading of argv: ParseArgs (sluicectl.h) splits it, then
// SetFlags hands each value to its flag through Abseil's per-flag API.
// absl::ParseCommandLine does not fit a command-line client run in-process by
// tests: it exits 1 on an unknown flag or a bad value (sluicectl's usage
// errors exit 2 and return from ctl::Run), reads `generate --stats Hi` as
// --stats=Hi, takes -5 for a flag and answers --help with its own text.
//
// The expert settings that `plan` takes (--expert_slots,
// --expert_arena_fraction, --host_tier_bytes, --expert_tiers,
// --expert_profile) are sluiced's definitions (config/expert_flags.h), read
// through config::ExpertConfigFromFlags.
#ifndef SLUICE_CLIENTS_SLUICECTL_FLAGS_H_
#define SLUICE_CLIENTS_SLUICECTL_FLAGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice::ctl {

// A rate in bytes per second, finite and > 0 ("1.5e9"); anything else fails
// to parse with "expected bytes per second > 0, such as 1.5e9".
struct BytesPerSecond {
  double value = 0;
};
bool AbslParseFlag(absl::string_view text, BytesPerSecond* rate, std::string* error);
std::string AbslUnparseFlag(BytesPerSecond rate);

// plan's first names for settings now named as sluiced names them (or, for
// the disk rate, as the other rates): {old, now}. They are no Abseil flags:
// RunPlan moves an old name's text to its current name (with a deprecation
// line) before SetFlags parses it, so a bad value is reported under the
// current name. Other commands ignore them, as before.
inline constexpr std::pair<const char*, const char*> kRenamedPlanFlags[] = {
    {"context", "context_length"},
    {"arena_fraction", "expert_arena_fraction"},
    {"disk_bandwidth", "disk_bytes_per_s"}};

// The names ParseArgs accepts: every flag sluicectl takes, "help" and the
// old names above.
std::vector<std::string> FlagNames();

// Those that may stand alone: the booleans ("--json" is --json=true), help
// and --stats (--stats=true).
std::vector<std::string> BareFlagNames();

// Resets every flag sluicectl takes to its default, then parses each of
// `given` (name -> text, as ParseArgs split them) into its flag; "help" and
// the old names are skipped. A text the flag's type refuses is
// InvalidArgument naming the flag and the text: "--max_tokens='x' is not a
// number", "--json='maybe': expected true or false", "--hbm_bytes_per_s='0':
// expected bytes per second > 0, such as 1.5e9". Not thread-safe: the flags
// are the process's, so one ctl::Run at a time.
absl::Status SetFlags(const std::map<std::string, std::string>& given);

}  // namespace sluice::ctl

// Every command.
ABSL_DECLARE_FLAG(std::string, addr);
ABSL_DECLARE_FLAG(std::optional<double>, timeout);
ABSL_DECLARE_FLAG(std::string, tls_ca_file);
ABSL_DECLARE_FLAG(std::string, tls_cert_file);
ABSL_DECLARE_FLAG(std::string, tls_key_file);
ABSL_DECLARE_FLAG(std::string, api_key_file);
// load, generate, tokenize; plan takes --context_length too.
ABSL_DECLARE_FLAG(std::string, model_id);
ABSL_DECLARE_FLAG(uint32_t, threads);
ABSL_DECLARE_FLAG(std::optional<uint32_t>, context_length);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(bool, parse_special);
ABSL_DECLARE_FLAG(bool, chat);
ABSL_DECLARE_FLAG(std::string, system);
ABSL_DECLARE_FLAG(uint32_t, max_tokens);
ABSL_DECLARE_FLAG(std::optional<float>, temperature);
ABSL_DECLARE_FLAG(std::optional<uint32_t>, top_k);
ABSL_DECLARE_FLAG(std::optional<float>, top_p);
ABSL_DECLARE_FLAG(std::optional<float>, min_p);
ABSL_DECLARE_FLAG(std::optional<float>, repetition_penalty);
ABSL_DECLARE_FLAG(std::optional<uint32_t>, repetition_window);
ABSL_DECLARE_FLAG(std::optional<uint64_t>, seed);
ABSL_DECLARE_FLAG(std::string, stop);
ABSL_DECLARE_FLAG(bool, ignore_eos);
ABSL_DECLARE_FLAG(std::string, stats);
// top.
ABSL_DECLARE_FLAG(double, interval);
ABSL_DECLARE_FLAG(int, iterations);
ABSL_DECLARE_FLAG(bool, plain);
// plan (with --context_length and the expert settings).
ABSL_DECLARE_FLAG(std::string, device_memory);
ABSL_DECLARE_FLAG(std::string, host_memory);
ABSL_DECLARE_FLAG(int64_t, sessions);
ABSL_DECLARE_FLAG(int64_t, kv_cache_tokens);
ABSL_DECLARE_FLAG(std::optional<sluice::ctl::BytesPerSecond>, disk_bytes_per_s);
ABSL_DECLARE_FLAG(std::optional<sluice::ctl::BytesPerSecond>, pcie_bytes_per_s);
ABSL_DECLARE_FLAG(std::optional<sluice::ctl::BytesPerSecond>, hbm_bytes_per_s);

#endif  // SLUICE_CLIENTS_SLUICECTL_FLAGS_H_
