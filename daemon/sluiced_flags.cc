#include "daemon/sluiced_flags.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/byte_size.h"
#include "config/device_flag.h"
#include "config/expert_flags.h"
#include "config/flag_alias.h"
#include "daemon/defaults.h"

// The expert flags (--expert_*, --host_tier_bytes) are config/expert_flags's
// and --backend and --device are config/device_flag's, shared with the tools.
ABSL_FLAG(std::string, config, "", "Config file of 'key = value' lines (flag names).");
ABSL_FLAG(std::string, grpc_address, "127.0.0.1:50051", "gRPC listen address HOST:PORT.");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:9464",
          "Prometheus /metrics listen address HOST:PORT; 'none' disables it.");
ABSL_FLAG(std::string, http_address, "",
          "OpenAI-compatible HTTP API listen address HOST:PORT (docs/API.md); "
          "empty or 'none' disables it. Uses the gRPC port's TLS files.");
ABSL_FLAG(std::string, http_max_body_bytes, "8M",
          "Largest HTTP request body (any framing, chunked included); more is refused with 413.");
ABSL_FLAG(std::string, http_memory_budget, "256M",
          "Request bytes the HTTP port may hold at once, over all connections (each body byte "
          "counts 4: its copies and its parse); a request beyond it gets 503.");
ABSL_FLAG(int, http_header_timeout_s, 10,
          "Seconds a client has to send a whole request's headers (HTTP and metrics ports).");
ABSL_FLAG(int, http_body_timeout_s, 60, "Seconds a client has to send a whole request body.");
ABSL_FLAG(int, http_request_timeout_s, 0,
          "Seconds an HTTP generation may take in all, its wait in the queue included; past "
          "them the worker ends it (504 before the first token, an error event in a stream). "
          "0: no limit (a client that leaves still cancels its request).");
ABSL_FLAG(int, http_max_connections, 512, "Open connections the HTTP port accepts at once.");
ABSL_FLAG(int, http_max_connections_per_client, 128,
          "Open connections the HTTP port accepts from one client address.");
ABSL_FLAG(std::string, model, "", "GGUF file (any shard of a split set) to load at start.");
ABSL_FLAG(std::string, model_id, "", "Model id for --model (default: the file stem).");
ABSL_FLAG(std::vector<std::string>, model_dir, {},
          "Directory the LoadModel RPC may load from (repeatable, or comma-separated); "
          "without one, only --model is served.");
ABSL_FLAG(std::string, worker_kind, "cpu", "Deprecated: --backend (same meaning).");
ABSL_FLAG(int, threads, sluice::daemon::DefaultThreads(),
          "Compute threads per worker (default: one per physical core sluiced may run on).");
ABSL_FLAG(int, context_length, sluice::daemon::kDefaultContextLength,
          "Tokens per sequence (prompt plus generated).");
ABSL_FLAG(int, queue_limit, sluice::daemon::kDefaultQueueLimit,
          "Generate requests that may wait; more get RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_sequences, sluice::daemon::kDefaultMaxSequences,
          "Generations a worker runs at once (continuous batching; each holds a KV cache "
          "of --context_length tokens); more wait in the queue.");
ABSL_FLAG(int64_t, kv_cache_tokens, 0,
          "The worker's KV cache in positions over all its sequences (at least "
          "--context_length); sequences are admitted and preempted to stay within it, and a "
          "CPU worker's KV memory follows the positions held. 0: --max_sequences x "
          "--context_length.");
ABSL_FLAG(std::string, prefill_pacing, "on",
          "While streams decode, a long prompt is evaluated in chunks sized to keep their "
          "time between tokens within 2.5x a decode step (on), or in chunks of the whole "
          "token budget (off: the prompt's first token sooner, the streams' gaps longer).");
ABSL_FLAG(std::string, worker_memory_limit, "0",
          "Memory limit of each worker's cgroup (e.g. 8G); 0: none.");
ABSL_FLAG(std::string, cgroup_mode, "auto", "OOM containment: auto, v2, v1 or none.");
ABSL_FLAG(std::string, cgroup_path, "",
          "Cgroup directory to create worker cgroups under (default: our own).");
ABSL_FLAG(std::string, worker_binary, "",
          "Path of sluice-worker (default: beside sluiced, or ../worker/).");
ABSL_FLAG(int, worker_start_timeout_s, sluice::daemon::kDefaultWorkerStartTimeoutS,
          "Seconds a worker may take to load a model.");
ABSL_FLAG(int, worker_hung_timeout_s, sluice::daemon::kDefaultWorkerHungTimeoutS,
          "Seconds a ready worker may stay silent (it heartbeats when idle) or make no "
          "progress on a request before it is killed as hung and restarted.");
ABSL_FLAG(std::string, replace_load, "overlap",
          "How LoadModel replaces a loaded model: overlap (the new model's worker starts "
          "while the old one serves, switching when it is ready; CPU workers whose new model "
          "fits in the host's available memory) or stop_first (one model resident at a time).");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain for TLS on the gRPC port (with --tls_key_file).");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key for --tls_cert_file.");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA bundle; when set, clients must present a certificate it signed.");
ABSL_FLAG(std::string, api_keys_file, "",
          "API keys: lines of '<sha256 hex of the key> <generate|admin>'; clients send "
          "'authorization: Bearer <key>'. Empty: every call is allowed.");
ABSL_FLAG(bool, insecure, false,
          "Allow a non-loopback --grpc_address or --http_address without TLS or without "
          "API keys, and a non-loopback --metrics_address (it has neither).");
ABSL_FLAG(int, drain_timeout_s, sluice::daemon::kDefaultDrainTimeoutS,
          "On SIGTERM, seconds to let running and waiting generations finish.");
ABSL_FLAG(int, drain_notice_s, 0,
          "On SIGTERM, the least seconds the ports stay open (health NOT_SERVING, new "
          "requests UNAVAILABLE) so a balancer takes the replica out before they close; "
          "set it above the balancer's health-check interval times its fall count.");
ABSL_FLAG(std::string, port_file, "",
          "Once serving, write 'grpc=PORT', 'metrics=PORT' and 'http=PORT' lines here.");

namespace sluice::daemon {

namespace {

bool KnownFlag(const std::string& name) { return absl::FindCommandLineFlag(name) != nullptr; }

// absl keeps only the last of a repeated flag; a repeatable one is merged
// into a single comma-separated occurrence.
std::vector<std::string> MergeRepeatedFlag(const std::vector<std::string>& args,
                                           const std::string& name) {
  const std::string prefix = "--" + name + "=";
  std::vector<std::string> out;
  std::vector<std::string> values;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind(prefix, 0) == 0) {
      values.push_back(args[i].substr(prefix.size()));
    } else if (args[i] == "--" + name && i + 1 < args.size()) {
      values.push_back(args[++i]);
    } else {
      out.push_back(args[i]);
    }
  }
  if (!values.empty()) out.push_back(prefix + absl::StrJoin(values, ","));
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandConfig(int argc, char** argv) {
  std::vector<std::string> args = {argv[0]};
  std::string path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--config=", 0) == 0) path = a.substr(9);
    if (a == "--config" && i + 1 < argc) path = argv[i + 1];
  }
  if (!path.empty()) {
    auto file_args = ReadConfigFile(path, &KnownFlag);
    if (!file_args.ok()) return file_args.status();
    args.insert(args.end(), file_args->begin(), file_args->end());
  }
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  return MergeRepeatedFlag(args, "model_dir");
}

absl::StatusOr<Config> ConfigFromFlags(const std::function<void(const std::string&)>& log) {
  Config c;
  c.grpc_address = absl::GetFlag(FLAGS_grpc_address);
  c.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  c.http_address = absl::GetFlag(FLAGS_http_address);
  c.model_path = absl::GetFlag(FLAGS_model);
  c.model_id = absl::GetFlag(FLAGS_model_id);
  // A bad value is named by the flag it came in, the old one included.
  auto backend = config::ResolveRenamedFlag(FLAGS_backend, FLAGS_worker_kind, log);
  if (!backend.ok()) return backend.status();
  const bool old_name = config::FlagGiven(absl::GetFlagReflectionHandle(FLAGS_worker_kind));
  auto kind = ParseWorkerKind(old_name ? "worker_kind" : "backend", *backend);
  if (!kind.ok()) return kind.status();
  c.worker_kind = *kind;
  auto device = config::ParseDeviceOrdinal(config::DeviceFlagText());
  if (!device.ok()) return device.status();
  c.device = *device;
  c.threads = absl::GetFlag(FLAGS_threads);
  c.context_length = absl::GetFlag(FLAGS_context_length);
  c.queue_limit = absl::GetFlag(FLAGS_queue_limit);
  c.batch.max_sequences = absl::GetFlag(FLAGS_max_sequences);
  c.batch.kv_cache_tokens = absl::GetFlag(FLAGS_kv_cache_tokens);
  c.batch.prefill_pacing = absl::GetFlag(FLAGS_prefill_pacing);
  auto limit = config::ParseByteSize("--worker_memory_limit", absl::GetFlag(FLAGS_worker_memory_limit));
  if (!limit.ok()) return limit.status();
  c.worker_memory_limit = *limit;
  c.cgroup_mode = absl::GetFlag(FLAGS_cgroup_mode);
  c.cgroup_path = absl::GetFlag(FLAGS_cgroup_path);
  c.worker_binary = absl::GetFlag(FLAGS_worker_binary);
  c.worker_start_timeout_s = absl::GetFlag(FLAGS_worker_start_timeout_s);
  c.worker_hung_timeout_s = absl::GetFlag(FLAGS_worker_hung_timeout_s);
  c.replace_load = absl::GetFlag(FLAGS_replace_load);
  c.port_file = absl::GetFlag(FLAGS_port_file);
  c.drain_timeout_s = absl::GetFlag(FLAGS_drain_timeout_s);
  c.drain_notice_s = absl::GetFlag(FLAGS_drain_notice_s);
  c.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  c.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  c.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  c.api_keys_file = absl::GetFlag(FLAGS_api_keys_file);
  c.insecure = absl::GetFlag(FLAGS_insecure);
  auto experts = config::ExpertConfigFromFlags();
  if (!experts.ok()) return experts.status();
  c.experts = *experts;
  if (absl::Status s = ValidateConfig(c); !s.ok()) return s;
  return c;
}

absl::StatusOr<HttpLimits> HttpLimitsFromFlags() {
  HttpLimits l;
  auto body = config::ParseByteSize("--http_max_body_bytes", absl::GetFlag(FLAGS_http_max_body_bytes));
  if (!body.ok()) return body.status();
  auto budget = config::ParseByteSize("--http_memory_budget", absl::GetFlag(FLAGS_http_memory_budget));
  if (!budget.ok()) return budget.status();
  l.framing.max_body_bytes = *body;
  l.memory_budget = *budget;
  l.header_timeout = absl::Seconds(std::max(1, absl::GetFlag(FLAGS_http_header_timeout_s)));
  l.body_timeout = absl::Seconds(std::max(1, absl::GetFlag(FLAGS_http_body_timeout_s)));
  l.max_connections = std::max(1, absl::GetFlag(FLAGS_http_max_connections));
  l.max_connections_per_client =
      std::max(1, absl::GetFlag(FLAGS_http_max_connections_per_client));
  if (l.memory_budget < kBudgetPerByte * l.framing.max_body_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_memory_budget=", l.memory_budget, " cannot hold one request of "
        "--http_max_body_bytes=", l.framing.max_body_bytes, " (it needs ", kBudgetPerByte,
        " bytes per body byte)"));
  }
  return l;
}

std::vector<std::string> ModelDirsFromFlags() { return absl::GetFlag(FLAGS_model_dir); }

absl::StatusOr<absl::Duration> HttpRequestTimeoutFromFlags() {
  const int s = absl::GetFlag(FLAGS_http_request_timeout_s);
  if (s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_request_timeout_s=", s, ": seconds must be 0 (no limit) or more"));
  }
  return s == 0 ? absl::InfiniteDuration() : absl::Seconds(s);
}

absl::Duration HttpHeaderTimeoutFromFlags() {
  return absl::Seconds(absl::GetFlag(FLAGS_http_header_timeout_s));
}

}  // namespace sluice::daemon
