// End-to-end: a CUDA worker where it cannot run (this CI machine has no GPU;
// a binary without the CUDA backend fails the same way). Its start must fail
// with the worker's own message naming the cause, the daemon must stay up
// serving health NOT_SERVING, and the failure must not be retried in a loop.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

bool HasGpu() {
  struct stat st;
  return stat("/dev/nvidiactl", &st) == 0;
}

// The causes a CUDA worker can give on a machine it cannot use: no backend
// compiled in, no driver or device, no such device ordinal.
bool NamesACudaCause(const std::string& message) {
  static const std::regex kCause(
      "no cuda backend|cuda error|cudaerror|no cuda device|no cuda-capable device|"
      "does not exist|insufficient driver");
  return std::regex_search(absl::AsciiStrToLower(message), kCause);
}

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(E2eCudaWorkerTest, StartWithoutAGpuFailsNamingTheCauseAndTheDaemonStaysUp) {
  if (HasGpu()) GTEST_SKIP() << "a GPU is present; this test is about a machine without one";
  const std::string dir = MakeTempDir("e2e-cuda");
  auto model = WriteMicroModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  DaemonOptions options;
  options.model_path = *model;
  options.flags = {"--backend=cuda", "--device", "0"};
  const absl::Time start = absl::Now();
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  Daemon& daemon = **d;
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << daemon.Log();
  EXPECT_EQ(daemon.Health(), "NOT_SERVING");

  grpc::ClientContext ctx;
  v1::ListModelsResponse models;
  ASSERT_TRUE(daemon.stub().ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
  ASSERT_EQ(models.models_size(), 1);
  const v1::ModelInfo& info = models.models(0);
  EXPECT_EQ(info.state(), v1::MODEL_STATE_FAILED);
  EXPECT_EQ(info.worker_kind(), v1::WORKER_KIND_CUDA);
  std::cout << "last_error: " << info.last_error() << std::endl;
  // The worker's own text, not just "exited with code 2".
  EXPECT_TRUE(Contains(info.last_error(), "cuda worker on device 0: ")) << info.last_error();
  EXPECT_TRUE(NamesACudaCause(info.last_error())) << info.last_error();

  Generation g = RunGenerate(daemon.stub(), GreedyRequest("Hello", 4));
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(Contains(g.status.error_message(), "cuda worker on device 0: "))
      << g.status.error_message();

  const std::string log = daemon.Log();
  EXPECT_TRUE(Contains(log, "failed to start: LoadModel path='")) << log;
  EXPECT_TRUE(Contains(log, "serving with health NOT_SERVING")) << log;

  // No crash loop: a retry would have started within the 100 ms back-off.
  absl::SleepFor(absl::Milliseconds(600));
  EXPECT_TRUE(ChildrenOf(daemon.pid()).empty());
  EXPECT_EQ(kill(daemon.pid(), 0), 0);
  EXPECT_EQ(daemon.Health(), "NOT_SERVING");
  const std::string metrics = daemon.HttpGet("/metrics");
  for (const char* line : {"sluice_worker_up 0\n",
                           "sluice_worker_restarts_total{reason=\"exit\"} 0\n",
                           "sluice_device_memory_bytes{kind=\"dense\"} 0\n"}) {
    EXPECT_TRUE(Contains(metrics, line)) << "missing: " << line << "\nin:\n" << metrics;
  }
  EXPECT_EQ(daemon.Stop(), 0) << daemon.Log();
}

// LoadModel may ask for a CUDA worker on a CPU daemon: it reaches the worker
// (on the daemon's --device) and fails there; a CPU load afterwards serves.
TEST(E2eCudaWorkerTest, LoadModelAsksForACudaWorkerAndRecoversWithCpu) {
  if (HasGpu()) GTEST_SKIP() << "a GPU is present; this test is about a machine without one";
  const std::string dir = MakeTempDir("e2e-cuda");
  auto model = WriteMicroModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  DaemonOptions options;
  options.flags = {"--device=3"};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  Daemon& daemon = **d;

  v1::LoadModelRequest load;
  load.set_path(*model);
  load.set_worker_kind(v1::WORKER_KIND_CUDA);
  v1::LoadModelResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = daemon.stub().LoadModel(&ctx, load, &resp);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.error_message(), "cuda worker on device 3: ")) << s.error_message();
  EXPECT_TRUE(NamesACudaCause(s.error_message())) << s.error_message();
  EXPECT_EQ(daemon.Health(), "NOT_SERVING");
  EXPECT_TRUE(ChildrenOf(daemon.pid()).empty());

  load.set_worker_kind(v1::WORKER_KIND_CPU);
  grpc::ClientContext ctx2;
  s = daemon.stub().LoadModel(&ctx2, load, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.model().worker_kind(), v1::WORKER_KIND_CPU);
  EXPECT_EQ(daemon.Health(), "SERVING");
  EXPECT_EQ(daemon.Stop(), 0) << daemon.Log();
}

}  // namespace
}  // namespace sluice::testing
