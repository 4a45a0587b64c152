#include "daemon/supervisor.h"

#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

TEST(RestartBackoffTest, DoublesFromInitialUpToTheCap) {
  const absl::Duration initial = absl::Milliseconds(100);
  const absl::Duration max = absl::Seconds(30);
  EXPECT_EQ(RestartBackoff(1, initial, max), absl::Milliseconds(100));
  EXPECT_EQ(RestartBackoff(2, initial, max), absl::Milliseconds(200));
  EXPECT_EQ(RestartBackoff(5, initial, max), absl::Milliseconds(1600));
  EXPECT_EQ(RestartBackoff(9, initial, max), absl::Milliseconds(25600));
  EXPECT_EQ(RestartBackoff(10, initial, max), absl::Seconds(30));
  EXPECT_EQ(RestartBackoff(1000, initial, max), absl::Seconds(30));
}

// With no model loaded the supervisor answers requests without any worker.
TEST(SupervisorTest, RequestsWithoutAModelFailClearly) {
  auto oom = OomContainment::Create("none", "", 0);
  ASSERT_TRUE(oom.ok());
  Metrics metrics;
  bool serving = true;
  Supervisor supervisor(SupervisorOptions{}, oom->get(), &metrics,
                        [&](bool s) { serving = s; });
  v1::GenerateRequest generate;
  generate.set_prompt("hi");
  auto g = supervisor.SubmitGenerate(generate);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(g.status().message(), "no model is loaded; call LoadModel first");
  EXPECT_EQ(supervisor.SubmitGenerate(v1::GenerateRequest()).status().message(),
            "GenerateRequest.input: set one of prompt, token_ids or chat");
  EXPECT_EQ(supervisor.SubmitTokenize(v1::TokenizeRequest()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(supervisor.UnloadModel(v1::UnloadModelRequest()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(supervisor.ListModels().empty());
  v1::LoadModelRequest load;
  auto loaded = supervisor.LoadModel(load);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded.status().message(), "LoadModel: path is empty");
  // A CUDA worker is accepted here (the worker finds out whether it can run);
  // a file that cannot be opened fails before any worker and leaves no model.
  load.set_path("/nonexistent/x.gguf");
  load.set_worker_kind(v1::WORKER_KIND_CUDA);
  loaded = supervisor.LoadModel(load);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find("LoadModel path='/nonexistent/x.gguf'"),
            std::string::npos)
      << loaded.status();
  EXPECT_TRUE(supervisor.ListModels().empty());
  load.set_worker_kind(static_cast<v1::WorkerKind>(9));
  EXPECT_EQ(supervisor.LoadModel(load).status().message(),
            "LoadModel: worker_kind=9 is unknown");
  MetricsSnapshot s = supervisor.Snapshot();
  EXPECT_FALSE(s.worker.up());
  EXPECT_EQ(s.requests_waiting, 0u);
  EXPECT_EQ(s.oom_mode, "none");
  EXPECT_TRUE(supervisor.Responsive(absl::Seconds(1)));
  supervisor.Shutdown();
}

}  // namespace
}  // namespace sluice::daemon
