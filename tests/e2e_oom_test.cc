// End-to-end: a worker that exceeds its cgroup memory limit is killed by the
// kernel, the kill is reported as an OOM kill, and the daemon keeps serving.
// Uses the memory hog of the test-only sluice-worker-testing
// (--test_hog_memory and the prompt worker::kHogMemoryPrompt of
// worker/worker_testing.h). Runs through cgroup v1 on the development
// and CI machines and v2 where a delegated subtree exists; skips (with a
// message) only where no memory cgroup is writable.
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/skip.h"
#include "daemon/cgroup.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"
#include "worker/worker_testing.h"

namespace sluice::testing {
namespace {

TEST(E2eOomTest, CgroupLimitKillIsReportedAndTheDaemonKeepsServing) {
  auto probe = daemon::OomContainment::Create("auto", "", 256u << 20);
  ASSERT_TRUE(probe.ok()) << probe.status();
  if ((*probe)->mode() == daemon::OomMode::kNone) {
    SLUICE_SKIP("no writable memory cgroup here: " + (*probe)->description());
  }
  const std::string mode(daemon::OomModeName((*probe)->mode()));
  const std::string dir = MakeTempDir("e2e-oom");
  auto path = WriteMicroModel(dir);
  ASSERT_TRUE(path.ok()) << path.status();
  DaemonOptions options;
  options.model_path = *path;
  options.flags = {"--worker_memory_limit=256M"};
  options.worker_test_flags = {"--test_hog_memory"};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  Daemon& daemon = **d;

  std::string metrics = daemon.HttpGet("/metrics");
  EXPECT_NE(metrics.find(absl::StrCat("sluice_oom_containment_mode{mode=\"", mode, "\"} 1\n")),
            std::string::npos)
      << metrics;

  // The worker lives in a cgroup of its own.
  std::vector<pid_t> workers = ChildrenOf(daemon.pid());
  ASSERT_EQ(workers.size(), 1u);
  std::ifstream cgroup(absl::StrCat("/proc/", workers[0], "/cgroup"));
  std::string cgroups((std::istreambuf_iterator<char>(cgroup)), std::istreambuf_iterator<char>());
  EXPECT_NE(cgroups.find(absl::StrCat("/sluice-worker-", daemon.pid(), "-1\n")),
            std::string::npos)
      << cgroups;

  v1::GenerateRequest hog = GreedyRequest(worker::kHogMemoryPrompt, 4);
  Generation g = RunGenerate(daemon.stub(), hog);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::UNAVAILABLE) << daemon.Log();
  EXPECT_NE(g.status.error_message().find("killed by the kernel OOM killer"), std::string::npos)
      << g.status.error_message();
  EXPECT_NE(g.status.error_message().find(mode), std::string::npos) << g.status.error_message();

  ASSERT_TRUE(daemon.WaitForHealth("SERVING", absl::Seconds(30))) << daemon.Log();
  Generation next = RunGenerate(daemon.stub(), GreedyRequest("after the OOM", 3));
  ASSERT_TRUE(next.status.ok()) << next.status.error_message();
  EXPECT_EQ(next.final.usage().completion_tokens(), 3u);

  metrics = daemon.HttpGet("/metrics");
  EXPECT_NE(metrics.find("sluice_worker_restarts_total{reason=\"oom_kill\"} 1\n"),
            std::string::npos)
      << metrics;
  grpc::ClientContext ctx;
  v1::ListModelsResponse models;
  ASSERT_TRUE(daemon.stub().ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
  ASSERT_EQ(models.models_size(), 1);
  EXPECT_NE(models.models(0).last_error().find("OOM killer"), std::string::npos);

  // The dead worker's cgroup was removed; the live one's exists.
  const std::string log = daemon.Log();
  const size_t under = log.find(" under ");
  ASSERT_NE(under, std::string::npos) << log;
  const std::string base = log.substr(under + 7, log.find(',', under) - under - 7);
  struct stat st;
  EXPECT_NE(stat(absl::StrCat(base, "/sluice-worker-", daemon.pid(), "-1").c_str(), &st), 0);
  EXPECT_EQ(stat(absl::StrCat(base, "/sluice-worker-", daemon.pid(), "-2").c_str(), &st), 0);
  EXPECT_EQ(daemon.Stop(), 0) << daemon.Log();
  EXPECT_NE(stat(absl::StrCat(base, "/sluice-worker-", daemon.pid(), "-2").c_str(), &st), 0);
}

}  // namespace
}  // namespace sluice::testing
