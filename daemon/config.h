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
#include "daemon/defaults.h"

namespace sluice::daemon {

enum class WorkerKindConfig { kCpu, kCuda };

// Every waiting request holds a gRPC handler thread (a small stack, no CPU
// while it waits); beyond this many a deeper queue only adds latency.
inline constexpr int kMaxQueueLimit = 10000;

// Where a CUDA worker keeps routed experts (EngineOptions::experts); the
// worker's fit planner fills in what is left unset and refuses what does
// not fit.
struct ExpertSettings {
  int64_t slots = -1;           // --expert_slots; -1: the planner chooses
  double arena_fraction = 0;    // --expert_arena_fraction; 0: the planner chooses
  std::string policy = "lru";   // --expert_policy: lru or lfu
  uint64_t host_tier_bytes = 0; // --host_tier_bytes; 0: the planner chooses
  bool prefetch = false;        // --expert_prefetch
  // --expert_miss_policy: where decode misses are computed: copy (into
  // slots; bit-identical logits), host (the host CPU) or cost (split by the
  // worker's learnt cost model; memory/miss_split.h).
  std::string miss_policy = "copy";
  int host_threads = 0;         // --expert_host_threads; 0: one per hardware thread
};

// The names memory::ParseMissPolicy accepts. The supervisor may not depend
// on memory/ (layers.bzl), so it checks the same three names itself; the
// worker parses them again with memory::ParseMissPolicy.
bool IsMissPolicyName(const std::string& name);

// Checks ranges: slots >= -1, a fraction in [0, 1], not both a slot count
// and a fraction, a known eviction and miss policy, host threads in
// 0..1024. Errors name the flag and the value.
absl::Status ValidateExpertSettings(const ExpertSettings& e);

struct Config {
  std::string grpc_address = "127.0.0.1:50051";
  std::string metrics_address = "127.0.0.1:9464";  // "" or "none": disabled
  std::string http_address;  // OpenAI-compatible HTTP API; "" or "none": disabled
  std::string model_path;  // "" : start with no model
  std::string model_id;    // "" : the file stem
  WorkerKindConfig worker_kind = WorkerKindConfig::kCpu;
  int device = 0;  // CUDA device ordinal of the worker (worker_kind cuda only)
  int threads = DefaultThreads();
  int context_length = kDefaultContextLength;
  int queue_limit = kDefaultQueueLimit;  // requests waiting, not counting the running one
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
  // The expert slot cache of CUDA workers (worker::v1::WorkerConfig).
  ExpertSettings experts;
};

// True for 127.0.0.0/8, ::1 and "localhost" (the host part of HOST:PORT).
bool IsLoopbackAddress(const std::string& host_port);

// Parses "123", "64K", "512M", "8G", "1T" (powers of 1024; optional
// trailing 'B' or 'iB'). InvalidArgument naming `what` and the value.
absl::StatusOr<uint64_t> ParseByteSize(const std::string& what,
                                       const std::string& value);

// "cpu" or "cuda"; InvalidArgument naming --worker_kind and the value.
absl::StatusOr<WorkerKindConfig> ParseWorkerKind(const std::string& value);

// Checks ranges and formats (host:port addresses, threads, ...).
absl::Status ValidateConfig(const Config& config);

// Reads a config file into "--key=value" arguments. `known_flag` is asked
// whether a key names a flag. Errors name the file, line and key.
absl::StatusOr<std::vector<std::string>> ReadConfigFile(
    const std::string& path, bool (*known_flag)(const std::string& name));

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_CONFIG_H_
