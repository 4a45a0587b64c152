// End-to-end: sluicectl, the Python client and the Prometheus scrape
// (checked by promtool) against one live daemon.
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

class E2eClientsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("e2e-clients"));
    auto path = WriteMicroModel(*dir_);
    ASSERT_TRUE(path.ok()) << path.status();
    model_path_ = new std::string(*path);
    DaemonOptions options;
    options.model_path = *path;
    auto d = Daemon::Start(options);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    if (daemon_ != nullptr) {
      const std::string log = daemon_->Log();
      EXPECT_EQ(daemon_->Stop(), 0) << log;
    }
    delete daemon_;
  }
  void SetUp() override { ASSERT_NE(daemon_, nullptr); }

  CommandResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {RunfilePath("clients/sluicectl"), "--addr=" + daemon_->address(),
                               "--timeout=60"});
    return RunCommand(args);
  }

  static std::string* dir_;
  static std::string* model_path_;
  static Daemon* daemon_;
};

std::string* E2eClientsTest::dir_ = nullptr;
std::string* E2eClientsTest::model_path_ = nullptr;
Daemon* E2eClientsTest::daemon_ = nullptr;

TEST_F(E2eClientsTest, SluicectlHealthModelsTokenizeMetrics) {
  CommandResult r = Ctl({"health"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");

  r = Ctl({"models"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("micro-qwen35moe\tMODEL_STATE_READY\tqwen35moe\tshards=1", 0), 0u)
      << r.out;

  r = Ctl({"tokenize", "Hello", "world"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  grpc::ClientContext ctx;
  v1::TokenizeRequest req;
  req.set_text("Hello world");
  v1::TokenizeResponse want;
  ASSERT_TRUE(daemon_->stub().Tokenize(&ctx, req, &want).ok());
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), static_cast<size_t>(want.token_ids_size())) << r.out;
  EXPECT_EQ(lines[0], absl::StrCat(want.token_ids(0), "\t\"", want.pieces(0), "\""));

  r = Ctl({"metrics"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# TYPE sluice_requests_running gauge\n"), std::string::npos) << r.out;
}

TEST_F(E2eClientsTest, SluicectlGenerateStreamsTheSameTextAsTheApi) {
  Generation want = RunGenerate(daemon_->stub(), GreedyRequest("Once upon", 7));
  ASSERT_TRUE(want.status.ok());
  CommandResult r = Ctl({"generate", "Once", "upon", "--max_tokens=7", "--ignore_eos",
                         "--temperature=0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, want.text + "\n");
  EXPECT_NE(r.err.find("[FINISH_REASON_LENGTH] prompt_tokens="), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("completion_tokens=7"), std::string::npos) << r.err;

  r = Ctl({"generate", "--json", "--max_tokens", "3", "--ignore_eos", "--seed=5",
           "--temperature=0.7", "--top_k=10", "Once upon"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_EQ(lines[0].rfind("{\"chunk\":{\"token_ids\":[", 0), 0u) << lines[0];
  EXPECT_NE(lines[3].find("\"finish_reason\":\"FINISH_REASON_LENGTH\""), std::string::npos)
      << lines[3];

  r = Ctl({"generate", "--chat", "--system=be brief", "--max_tokens=2", "--ignore_eos", "hi"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("completion_tokens=2"), std::string::npos) << r.err;

  r = Ctl({"generate", "--top_p=0", "x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("INVALID_ARGUMENT"), std::string::npos) << r.err;
}

TEST_F(E2eClientsTest, PythonClientTestsPass) {
  ASSERT_EQ(access("/usr/bin/python3", X_OK), 0) << "Debian's /usr/bin/python3 is required";
  CommandResult r = RunCommand(
      {"/usr/bin/python3", RunfilePath("clients/python/sluice_client_test.py")},
      {{"SLUICE_ADDR", daemon_->address()}, {"SLUICE_MODEL_ID", "micro-qwen35moe"},
       {"PYTHONDONTWRITEBYTECODE", "1"}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("Ran 9 tests"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\nOK"), std::string::npos) << r.err;
}

TEST_F(E2eClientsTest, PromtoolAcceptsTheScrape) {
  ASSERT_TRUE(RunGenerate(daemon_->stub(), GreedyRequest("scrape me", 4)).status.ok());
  const std::string text = daemon_->HttpGet("/metrics");
  ASSERT_EQ(text.rfind("# HELP", 0), 0u) << text;
  for (const char* family :
       {"sluice_requests_running", "sluice_requests_waiting", "sluice_prompt_tokens_total",
        "sluice_generated_tokens_total", "sluice_time_to_first_token_seconds_count",
        "sluice_inter_token_latency_seconds_count", "sluice_worker_up",
        "sluice_worker_restarts_total", "sluice_worker_rss_anon_bytes",
        "sluice_worker_rss_file_bytes", "sluice_worker_swap_bytes",
        "sluice_host_swap_used_bytes", "sluice_host_page_cache_bytes",
        "sluice_worker_major_faults_total", "sluice_expert_slots_capacity",
        "sluice_expert_slot_hits_total",
        "sluice_expert_slot_misses_total", "sluice_expert_slot_evictions_total",
        "sluice_expert_slot_exhausted_total", "sluice_expert_slot_forced_total",
        "sluice_expert_bytes_streamed_total", "sluice_expert_slot_host_computed_total",
        "sluice_expert_bytes_host_computed_total", "sluice_expert_miss_policy",
        "sluice_expert_copy_bytes_per_second_estimate",
        "sluice_expert_host_bytes_per_second_estimate", "sluice_oom_containment_mode"}) {
    EXPECT_NE(text.find(absl::StrCat("\n", family)), std::string::npos) << family;
  }
  EXPECT_EQ(text.find("sluice_worker_rss_anon_bytes 0\n"), std::string::npos)
      << "the worker's RSS was not reported";
  const char* promtool = "/usr/bin/promtool";
  if (access(promtool, X_OK) != 0) {
    const char* ci = getenv("CI");
    ASSERT_FALSE(ci != nullptr && std::string(ci) == "true")
        << "promtool (Debian package prometheus) is required in CI";
    SLUICE_SKIP("promtool not installed (apt-get install prometheus)");
  }
  const std::string scrape = *dir_ + "/scrape.txt";
  std::ofstream(scrape) << text;
  CommandResult r = RunCommand({promtool, "check", "metrics"}, {}, scrape);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\n" << text;
  EXPECT_EQ(r.out + r.err, "") << text;
}

TEST_F(E2eClientsTest, ZzSluicectlUnloadAndLoad) {
  CommandResult r = Ctl({"load", *dir_ + "/nope.gguf"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("INVALID_ARGUMENT"), std::string::npos) << r.err;

  r = Ctl({"unload"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Ctl({"models"});
  EXPECT_EQ(r.out, "no model loaded\n");
  r = Ctl({"health"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "NOT_SERVING\n");
  r = Ctl({"generate", "x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("FAILED_PRECONDITION"), std::string::npos) << r.err;

  r = Ctl({"load", *model_path_, "--model_id=again", "--context_length=256"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("again\tMODEL_STATE_READY\tqwen35moe", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("context=256"), std::string::npos) << r.out;
  EXPECT_EQ(Ctl({"health"}).out, "SERVING\n");
}

}  // namespace
}  // namespace sluice::testing
