#include "daemon/config.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "daemon/defaults.h"
#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

// ParseByteSize and the expert flags' name parsing are config/'s
// (config/config_test).

TEST(ValidateConfigTest, DefaultsAreValid) { EXPECT_TRUE(ValidateConfig(Config{}).ok()); }

TEST(ValidateConfigTest, NonLoopbackNeedsTlsAndKeysOrInsecure) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:1"));
  EXPECT_TRUE(IsLoopbackAddress("127.8.9.10:1"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:1"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:1"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:1"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:1"));
  EXPECT_FALSE(IsLoopbackAddress("127.0.0.1.example.com:1"));
  Config c;
  c.grpc_address = "0.0.0.0:50051";
  EXPECT_EQ(ValidateConfig(c).message(),
            "--grpc_address='0.0.0.0:50051' is reachable from other hosts but has no TLS "
            "(--tls_cert_file); configure both, or pass --insecure to accept the risk");
  c.tls_cert_file = "cert.pem";
  c.tls_key_file = "key.pem";
  EXPECT_EQ(ValidateConfig(c).message(),
            "--grpc_address='0.0.0.0:50051' is reachable from other hosts but has no API keys "
            "(--api_keys_file); configure both, or pass --insecure to accept the risk");
  c.api_keys_file = "keys";
  EXPECT_TRUE(ValidateConfig(c).ok());
  c = Config{};
  c.grpc_address = "0.0.0.0:50051";
  c.insecure = true;
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(ValidateConfigTest, QueueLimitHasASaneMaximum) {
  Config c;
  c.queue_limit = kMaxQueueLimit;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.queue_limit = kMaxQueueLimit + 1;
  EXPECT_EQ(ValidateConfig(c).message(), "--queue_limit=10001: must be in 0..10000");
  c = Config{};
  c.worker_hung_timeout_s = 0;
  EXPECT_EQ(ValidateConfig(c).message(), "--worker_hung_timeout_s=0: must be in 1..86400");
}

TEST(ValidateConfigTest, KvPoolHoldsOneContext) {
  Config c;
  c.context_length = 4096;
  c.batch.kv_cache_tokens = 4096;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.batch.kv_cache_tokens = 0;  // every sequence its whole context
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.batch.kv_cache_tokens = 4095;
  EXPECT_EQ(ValidateConfig(c).message(),
            "--kv_cache_tokens=4095 must hold one sequence's --context_length=4096 (or be 0: "
            "every sequence its whole context)");
  c.batch.kv_cache_tokens = -1;
  EXPECT_EQ(ValidateConfig(c).message(), "--kv_cache_tokens=-1: must be in 0..268435456");
}

TEST(ValidateConfigTest, PrefillPacingIsOnOrOff) {
  Config c;
  EXPECT_EQ(c.batch.prefill_pacing, "on");
  for (const char* v : {"on", "off"}) {
    c.batch.prefill_pacing = v;
    EXPECT_TRUE(ValidateConfig(c).ok()) << v;
  }
  c.batch.prefill_pacing = "auto";
  EXPECT_EQ(ValidateConfig(c).message(), "--prefill_pacing=auto: must be on or off");
}

TEST(ValidateConfigTest, ErrorsNameTheFlagAndValue) {
  Config c;
  c.grpc_address = "localhost";
  absl::Status s = ValidateConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--grpc_address='localhost'"), std::string::npos) << s;

  c = Config{};
  c.http_address = "8080";
  s = ValidateConfig(c);
  EXPECT_NE(s.message().find("--http_address='8080': expected HOST:PORT"), std::string::npos)
      << s;
  c.http_address = "none";
  EXPECT_TRUE(ValidateConfig(c).ok());

  c = Config{};
  c.threads = 0;
  s = ValidateConfig(c);
  EXPECT_NE(s.message().find("--threads=0: must be in 1..1024"), std::string::npos) << s;

  c = Config{};
  c.worker_memory_limit = 1024;
  s = ValidateConfig(c);
  EXPECT_NE(s.message().find("--worker_memory_limit=1024"), std::string::npos) << s;

  c = Config{};
  c.cgroup_mode = "v3";
  s = ValidateConfig(c);
  EXPECT_NE(s.message().find("--cgroup_mode='v3'"), std::string::npos) << s;

  c = Config{};
  c.tls_cert_file = "/etc/sluice/cert.pem";
  s = ValidateConfig(c);
  EXPECT_NE(s.message().find("give both or neither"), std::string::npos) << s;
  c.tls_key_file = "/etc/sluice/key.pem";
  EXPECT_TRUE(ValidateConfig(c).ok());
  c = Config{};
  c.tls_client_ca_file = "/etc/sluice/ca.pem";
  s = ValidateConfig(c);
  EXPECT_NE(s.message().find("needs --tls_cert_file"), std::string::npos) << s;

  c = Config{};
  c.device = -1;
  s = ValidateConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--device=-1: must be in 0..255"), std::string::npos) << s;
  c.device = 256;
  EXPECT_NE(ValidateConfig(c).message().find("--device=256: must be in 0..255"),
            std::string::npos);
}

TEST(ValidateConfigTest, AcceptsTheCudaWorkerOnAnyDevice) {
  Config c;
  c.worker_kind = WorkerKindConfig::kCuda;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.device = 7;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.device = 255;
  EXPECT_TRUE(ValidateConfig(c).ok());
}

// Both backends skip (the CUDA one in one-token passes while streaming,
// run 15 on the H100); out-of-range thresholds are refused for either.
TEST(ValidateConfigTest, BothBackendsTakeExpertSkip) {
  Config c;
  c.experts.skip_threshold = 0.05;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.worker_kind = WorkerKindConfig::kCuda;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.experts.skip_threshold = 1.5;
  EXPECT_EQ(ValidateConfig(c).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidateConfigTest, ExpertSettingsNameTheFlag) {
  Config c;
  c.experts.slots = -2;
  EXPECT_EQ(ValidateConfig(c).message(),
            "--expert_slots=-2: must be >= 0 (or -1: the fit planner chooses)");
  c.experts.slots = 16;
  c.experts.arena_fraction = 0.25;
  EXPECT_EQ(ValidateConfig(c).message(),
            "--expert_slots=16 and --expert_arena_fraction=0.25: give one of them");
  c.experts.slots = -1;
  c.experts.arena_fraction = 1.5;
  EXPECT_EQ(ValidateConfig(c).message(),
            "--expert_arena_fraction=1.5: must be in (0, 1] (0: the fit planner chooses)");
  c.experts.arena_fraction = 0.25;
  c.experts.policy = config::EvictionPolicy::kLfu;
  EXPECT_TRUE(ValidateConfig(c).ok());
  for (config::MissPolicy p :
       {config::MissPolicy::kCopy, config::MissPolicy::kHost, config::MissPolicy::kCost}) {
    c.experts.miss_policy = p;
    EXPECT_TRUE(ValidateConfig(c).ok()) << config::MissPolicyName(p);
  }
  c.experts.host_threads = -1;
  EXPECT_EQ(ValidateConfig(c).message(), "--expert_host_threads=-1: must be in 0..1024");
  c.experts.host_threads = 16;
  EXPECT_TRUE(ValidateConfig(c).ok());
  // A usage profile's directory must exist; the file need not yet.
  c.experts.profile = "/no-such-dir-sluice/experts.profile";
  EXPECT_EQ(ValidateConfig(c).message(),
            "--expert_profile=/no-such-dir-sluice/experts.profile: no directory "
            "/no-such-dir-sluice to keep it in");
  c.experts.profile = "/tmp/not-written-yet.profile";
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.experts.profile = "relative.profile";
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(ParseWorkerKindTest, CpuOrCudaElseNamesTheFlag) {
  EXPECT_EQ(*ParseWorkerKind("backend", "cpu"), WorkerKindConfig::kCpu);
  EXPECT_EQ(*ParseWorkerKind("backend", "cuda"), WorkerKindConfig::kCuda);
  auto bad = ParseWorkerKind("worker_kind", "CUDA ");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "--worker_kind='CUDA ': expected cpu or cuda");
  EXPECT_EQ(ParseWorkerKind("backend", "tpu").status().message(),
            "--backend='tpu': expected cpu or cuda");
}

bool OnlyThreadsAndModel(const std::string& name) {
  return name == "threads" || name == "model";
}

TEST(ReadConfigFileTest, TurnsLinesIntoFlags) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/sluiced.conf";
  std::ofstream(path) << "# comment\n\nthreads = 4  # trailing\nmodel=/m/x.gguf\n";
  auto args = ReadConfigFile(path, &OnlyThreadsAndModel);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(*args, (std::vector<std::string>{"--threads=4", "--model=/m/x.gguf"}));
}

TEST(ReadConfigFileTest, UnknownKeyNamesFileAndLine) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/bad.conf";
  std::ofstream(path) << "threads = 2\nthreadz = 4\n";
  auto args = ReadConfigFile(path, &OnlyThreadsAndModel);
  EXPECT_EQ(args.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(args.status().message().find(path + ":2: unknown key 'threadz'"),
            std::string::npos)
      << args.status();
  std::ofstream(path) << "threads 2\n";
  EXPECT_NE(ReadConfigFile(path, &OnlyThreadsAndModel).status().message().find(":1: expected"),
            std::string::npos);
  EXPECT_FALSE(ReadConfigFile(path + ".missing", &OnlyThreadsAndModel).ok());
}

// deploy/sluiced.conf is the documented configuration: a value there that
// differs from the code's default would be a second source of truth.
TEST(ShippedConfigTest, RestatesTheDefaults) {
  const std::string path = std::string(getenv("TEST_SRCDIR")) + "/sluice/deploy/sluiced.conf";
  auto args = ReadConfigFile(path, [](const std::string&) { return true; });
  ASSERT_TRUE(args.ok()) << args.status();
  const Config d;
  const std::map<std::string, std::string> defaults = {
      {"grpc_address", d.grpc_address},
      {"metrics_address", d.metrics_address},
      {"backend", "cpu"},
      {"context_length", std::to_string(kDefaultContextLength)},
      {"queue_limit", std::to_string(kDefaultQueueLimit)},
      {"worker_memory_limit", std::to_string(d.worker_memory_limit)},
      {"cgroup_mode", d.cgroup_mode},
      {"worker_start_timeout_s", std::to_string(kDefaultWorkerStartTimeoutS)},
      {"drain_timeout_s", std::to_string(kDefaultDrainTimeoutS)},
  };
  int checked = 0;
  for (const std::string& arg : *args) {
    const size_t eq = arg.find('=');
    ASSERT_NE(eq, std::string::npos) << arg;
    const std::string key = arg.substr(2, eq - 2);
    EXPECT_NE(key, "threads") << "its default is per machine (one per physical core)";
    auto it = defaults.find(key);
    if (it == defaults.end()) continue;
    EXPECT_EQ(arg.substr(eq + 1), it->second) << key;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(defaults.size()));
}

TEST(DefaultsTest, ConfigTakesThreadsFromTheMachine) {
  EXPECT_GE(DefaultThreads(), 1);
  EXPECT_EQ(Config{}.threads, DefaultThreads());
  EXPECT_EQ(Config{}.worker_start_timeout_s, kDefaultWorkerStartTimeoutS);
}

// The hung timeout is written once (supervisor_test checks SupervisorOptions).
TEST(DefaultsTest, ConfigTakesTheHungTimeoutDefault) {
  EXPECT_EQ(Config{}.worker_hung_timeout_s, kDefaultWorkerHungTimeoutS);
}

}  // namespace
}  // namespace sluice::daemon
