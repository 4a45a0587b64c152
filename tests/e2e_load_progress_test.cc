// End-to-end, issue 25: a model load shows its progress in ListModels, in
// the metrics, in the daemon's log and in `sluicectl load`.
#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

TEST(E2eLoadProgressTest, ALoadIsVisibleWhileItRunsAndGoneAfter) {
  const std::string dir = MakeTempDir("e2e-load-progress");
  auto model = WriteMicroModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  DaemonOptions options;
  // The worker waits 1.5 s before it reads its Hello: a slow load to watch.
  options.worker_test_flags = {"--test_start_delay_ms=1500"};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();

  CommandResult load;
  std::atomic<bool> loaded{false};
  std::thread loader([&] {
    load = RunCommand({RunfilePath("clients/sluicectl"), "--addr=" + (*d)->address(), "load",
                       *model, "--model_id=watched"});
    loaded = true;
  });
  v1::LoadProgress seen;
  std::string metrics;
  while (!loaded && seen.model_id().empty()) {
    grpc::ClientContext ctx;
    v1::ListModelsResponse resp;
    ASSERT_TRUE((*d)->stub().ListModels(&ctx, v1::ListModelsRequest(), &resp).ok());
    if (resp.has_loading()) {
      seen = resp.loading();
      metrics = (*d)->HttpGet("/metrics");
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  loader.join();
  EXPECT_EQ(load.exit_code, 0) << load.err;
  // While loading: the supervisor has validated the files; the worker has
  // not reported yet.
  EXPECT_EQ(seen.model_id(), "watched");
  EXPECT_EQ(seen.path(), *model);
  EXPECT_EQ(seen.phase(), "validating");
  EXPECT_GT(seen.total_bytes(), 0u);
  EXPECT_EQ(seen.done_bytes(), seen.total_bytes());
  EXPECT_TRUE(absl::StrContains(metrics, "sluice_load_phase{phase=\"validating\"} 1\n"))
      << metrics;
  // sluicectl, not on a terminal, printed the phase as a line on stderr.
  EXPECT_TRUE(absl::StrContains(load.err, "loading: validating ")) << load.err;
  EXPECT_TRUE(absl::StrContains(load.out, "watched")) << load.out;
  // The worker's phases reached the log, and the end.
  const std::string log = (*d)->Log();
  EXPECT_TRUE(absl::StrContains(log, "loading model 'watched': mapping ")) << log;
  EXPECT_TRUE(absl::StrContains(log, "loading model 'watched': building")) << log;
  EXPECT_TRUE(absl::StrContains(log, "load of model 'watched' ended after ")) << log;
  // Loaded: nothing in progress any more.
  grpc::ClientContext ctx;
  v1::ListModelsResponse after;
  ASSERT_TRUE((*d)->stub().ListModels(&ctx, v1::ListModelsRequest(), &after).ok());
  EXPECT_FALSE(after.has_loading());
  ASSERT_EQ(after.models_size(), 1);
  EXPECT_EQ(after.models(0).state(), v1::MODEL_STATE_READY);
  metrics = (*d)->HttpGet("/metrics");
  EXPECT_TRUE(absl::StrContains(metrics, "sluice_load_phase{phase=\"validating\"} 0\n"));
  EXPECT_TRUE(absl::StrContains(metrics, "sluice_load_phase_total_bytes 0\n"));
  EXPECT_EQ((*d)->Stop(), 0);
}

}  // namespace
}  // namespace sluice::testing
