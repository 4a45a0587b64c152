#include "daemon/config.h"

#include <sys/stat.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "config/device_flag.h"

namespace sluice::daemon {
namespace {

constexpr int kMaxDevice = 255;

absl::Status CheckAddress(const std::string& flag, const std::string& value) {
  const size_t colon = value.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(value.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "='", value,
        "': expected HOST:PORT with a port in 0..65535 (e.g. 127.0.0.1:50051)"));
  }
  return absl::OkStatus();
}

absl::Status CheckRange(const std::string& flag, int64_t value, int64_t lo,
                        int64_t hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", value, ": must be in ", lo, "..", hi));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WorkerKindConfig> ParseWorkerKind(absl::string_view flag,
                                                 const std::string& value) {
  if (value == "cpu") return WorkerKindConfig::kCpu;
  if (value == "cuda") return WorkerKindConfig::kCuda;
  return config::UnknownBackendError(flag, value);
}

bool IsLoopbackAddress(const std::string& host_port) {
  std::string host = host_port.substr(0, host_port.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8, written as a dotted quad.
  std::vector<std::string> parts = absl::StrSplit(host, '.');
  if (parts.size() != 4 || parts[0] != "127") return false;
  for (const std::string& p : parts) {
    int n = -1;
    if (!absl::SimpleAtoi(p, &n) || n < 0 || n > 255) return false;
  }
  return true;
}

absl::Status ValidateConfig(const Config& c) {
  if (absl::Status s = CheckAddress("grpc_address", c.grpc_address); !s.ok()) {
    return s;
  }
  if (!c.metrics_address.empty() && c.metrics_address != "none") {
    if (absl::Status s = CheckAddress("metrics_address", c.metrics_address);
        !s.ok()) {
      return s;
    }
  }
  if (!c.http_address.empty() && c.http_address != "none") {
    if (absl::Status s = CheckAddress("http_address", c.http_address); !s.ok()) return s;
  }
  if (absl::Status s = CheckRange("threads", c.threads, 1, 1024); !s.ok()) return s;
  if (absl::Status s = CheckRange("context_length", c.context_length, 16, 1 << 20);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckRange("queue_limit", c.queue_limit, 0, kMaxQueueLimit); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckRange("max_sequences", c.batch.max_sequences, 1, kMaxSequences);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckRange("kv_cache_tokens", c.batch.kv_cache_tokens, 0, kMaxKvCacheTokens);
      !s.ok()) {
    return s;
  }
  if (c.batch.kv_cache_tokens != 0 && c.batch.kv_cache_tokens < c.context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv_cache_tokens=", c.batch.kv_cache_tokens,
        " must hold one sequence's --context_length=",
        c.context_length, " (or be 0: every sequence its whole context)"));
  }
  if (c.batch.prefill_pacing != "on" && c.batch.prefill_pacing != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--prefill_pacing=", c.batch.prefill_pacing, ": must be on or off"));
  }
  if (absl::Status s =
          CheckRange("worker_start_timeout_s", c.worker_start_timeout_s, 1, 86400);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckRange("worker_hung_timeout_s", c.worker_hung_timeout_s, 1, 86400);
      !s.ok()) {
    return s;
  }
  if (c.replace_load != "overlap" && c.replace_load != "stop_first") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--replace_load='", c.replace_load.substr(0, 64), "': must be overlap or stop_first"));
  }
  if (absl::Status s = CheckRange("drain_timeout_s", c.drain_timeout_s, 0, 3600); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckRange("drain_notice_s", c.drain_notice_s, 0, 600); !s.ok()) {
    return s;
  }
  if (absl::Status s = config::ValidateExpertConfig(c.experts); !s.ok()) return s;
  if (const std::string& p = c.experts.profile; !p.empty()) {
    // Checked here, not at the first save a minute into serving.
    const size_t slash = p.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
    struct stat st;
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("--expert_profile=", p.substr(0, 256),
                                                     ": no directory ", dir.substr(0, 256),
                                                     " to keep it in"));
    }
  }
  if (c.worker_memory_limit != 0 && c.worker_memory_limit < (16ull << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--worker_memory_limit=", c.worker_memory_limit,
        ": below 16M no worker can start; use 0 for no limit"));
  }
  if (c.cgroup_mode != "auto" && c.cgroup_mode != "v2" && c.cgroup_mode != "v1" &&
      c.cgroup_mode != "none") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cgroup_mode='", c.cgroup_mode, "': expected auto, v2, v1 or none"));
  }
  if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_cert_file='", c.tls_cert_file, "' and --tls_key_file='", c.tls_key_file,
        "': give both or neither"));
  }
  if (!c.tls_client_ca_file.empty() && c.tls_cert_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_client_ca_file='", c.tls_client_ca_file,
        "' needs --tls_cert_file and --tls_key_file"));
  }
  // Whether device N exists is the worker's to find out (the supervisor
  // never touches CUDA); this only rejects values no machine has.
  if (absl::Status s = CheckRange("device", c.device, 0, kMaxDevice); !s.ok()) return s;
  if (!IsLoopbackAddress(c.grpc_address) && !c.insecure &&
      (c.tls_cert_file.empty() || c.api_keys_file.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grpc_address='", c.grpc_address, "' is reachable from other hosts but ",
        c.tls_cert_file.empty() ? "has no TLS (--tls_cert_file)" : "has no API keys (--api_keys_file)",
        "; configure both, or pass --insecure to accept the risk"));
  }
  if (!c.http_address.empty() && c.http_address != "none" &&
      !IsLoopbackAddress(c.http_address) && !c.insecure &&
      (c.tls_cert_file.empty() || c.api_keys_file.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_address='", c.http_address, "' is reachable from other hosts but ",
        c.tls_cert_file.empty() ? "has no TLS (--tls_cert_file)" : "has no API keys (--api_keys_file)",
        "; configure both, or pass --insecure to accept the risk"));
  }
  // The metrics port has neither TLS nor keys: off loopback only on purpose.
  if (!c.metrics_address.empty() && c.metrics_address != "none" &&
      !IsLoopbackAddress(c.metrics_address) && !c.insecure) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_address='", c.metrics_address,
        "' is reachable from other hosts but the metrics port has no TLS and no API keys; "
        "keep it on loopback, or pass --insecure to accept the risk"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ReadConfigFile(
    const std::string& path, bool (*known_flag)(const std::string& name)) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config='", path, "': cannot open the file"));
  }
  std::vector<std::string> args;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty()) continue;
    const size_t eq = text.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_no, ": expected 'key = value', got '", text, "'"));
    }
    std::string key(absl::StripAsciiWhitespace(text.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(text.substr(eq + 1)));
    if (key == "config" || !known_flag(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": unknown key '", key, "'"));
    }
    args.push_back(absl::StrCat("--", key, "=", value));
  }
  return args;
}

}  // namespace sluice::daemon
