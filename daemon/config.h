// sluiced configuration: command-line flags, optionally preceded by a config
// file of the same keys.
//
// The config file (--config=PATH) holds one `key = value` per line, where key
// is a flag name without the dashes; '#' starts a comment. Flags given on the
// command line override the file. Every value is validated by
// ValidateConfig(); errors name the flag (or file and line) and the value.
#ifndef SLUICE_DAEMON_CONFIG_H_
#define SLUICE_DAEMON_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "config/expert_config.h"
#include "daemon/defaults.h"

namespace sluice::daemon {

enum class WorkerKindConfig { kCpu, kCuda };

// Every waiting request holds a gRPC handler thread (a small stack, no CPU
// while it waits); beyond this many a deeper queue only adds latency.
inline constexpr int kMaxQueueLimit = 10000;
// Each sequence holds a KV cache of the whole context on the worker.
inline constexpr int kMaxSequences = 256;
// kMaxSequences of the longest context (2^20 positions).
inline constexpr int64_t kMaxKvCacheTokens = int64_t{kMaxSequences} << 20;

struct Config {
  std::string grpc_address = "127.0.0.1:50051";
  std::string metrics_address = "127.0.0.1:9464";  // "" or "none": disabled
  std::string http_address;  // OpenAI-compatible HTTP API; "" or "none": disabled
  std::string model_path;  // "" : start with no model
  std::string model_id;    // "" : the file stem
  // --backend; named as the API's LoadModelRequest.worker_kind, which it
  // is the default of.
  WorkerKindConfig worker_kind = WorkerKindConfig::kCpu;
  int device = 0;  // --device: CUDA device ordinal of the worker (cuda only)
  int threads = DefaultThreads();
  int context_length = kDefaultContextLength;
  int queue_limit = kDefaultQueueLimit;  // requests waiting, not counting those running
  BatchSettings batch;  // --max_sequences, --kv_cache_tokens, --prefill_pacing
  uint64_t worker_memory_limit = 0; // bytes; 0: no limit
  std::string cgroup_mode = "auto"; // auto | v2 | v1 | none
  std::string cgroup_path;          // "" : discovered from /proc/self/cgroup
  std::string worker_binary;        // "" : next to the sluiced binary
  int worker_start_timeout_s = kDefaultWorkerStartTimeoutS;
  int worker_hung_timeout_s = kDefaultWorkerHungTimeoutS;   // silent or stuck this long: killed as hung
  // How LoadModel replaces a loaded model: "overlap" (the new worker starts
  // beside the serving one where memory allows) or "stop_first".
  std::string replace_load = "overlap";
  int drain_timeout_s = kDefaultDrainTimeoutS;  // SIGTERM: let requests finish this long
  // SIGTERM: the ports stay open at least this long, refusing new requests
  // with UNAVAILABLE, so that a balancer sees health fail before they close.
  int drain_notice_s = 0;
  std::string port_file;            // write bound ports here once serving
  // TLS for the gRPC port: both files (PEM) or neither (plaintext). With a
  // client CA, clients must present a certificate it signed.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  std::string api_keys_file;        // "" : no API keys (every call allowed)
  // Allows a non-loopback --grpc_address in plaintext or without API keys.
  bool insecure = false;
  // The expert slot cache of CUDA workers (--expert_*, --host_tier_bytes;
  // worker::v1::WorkerConfig).
  config::ExpertConfig experts;
};

// True for 127.0.0.0/8, ::1 and "localhost" (the host part of HOST:PORT).
bool IsLoopbackAddress(const std::string& host_port);

// The value of --backend (`flag`: "backend", or its old name "worker_kind"):
// "cpu" or "cuda"; InvalidArgument naming `flag` and the value.
absl::StatusOr<WorkerKindConfig> ParseWorkerKind(absl::string_view flag,
                                                 const std::string& value);

// Checks ranges and formats (host:port addresses, threads, ...; the expert
// settings with config::ValidateExpertConfig).
absl::Status ValidateConfig(const Config& config);

// Reads a config file into "--key=value" arguments. `known_flag` is asked
// whether a key names a flag. Errors name the file, line and key.
absl::StatusOr<std::vector<std::string>> ReadConfigFile(
    const std::string& path, bool (*known_flag)(const std::string& name));

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_CONFIG_H_
