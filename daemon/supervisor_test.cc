#include "daemon/supervisor.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "daemon/testing/tiny_model.h"

namespace sluice::daemon {
namespace {

using testing::WriteTinyModel;

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
// The hung timeout's default is the one sluiced's flag and Config use.
TEST(SupervisorTest, HungTimeoutDefaultIsTheDaemonDefault) {
  EXPECT_EQ(SupervisorOptions{}.hung_timeout, absl::Seconds(kDefaultWorkerHungTimeoutS));
}

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

SupervisorOptions FakeWorkerOptions(const std::string& mode,
                                    const std::string& fatal_model_id = "") {
  SupervisorOptions o;
  o.worker_binary = std::string(getenv("TEST_SRCDIR")) + "/sluice/daemon/fake_worker";
  o.worker_args = {"--mode=" + mode};
  if (!fatal_model_id.empty()) o.worker_args.push_back("--fatal_model_id=" + fatal_model_id);
  o.worker_kind = v1::WORKER_KIND_CUDA;
  o.device = 5;
  o.worker_start_timeout = absl::Seconds(30);
  return o;
}

TEST(SupervisorFakeWorkerTest, DeviceMemoryOfTheWorkerReachesTheSnapshot) {
  auto oom = OomContainment::Create("none", "", 0);
  ASSERT_TRUE(oom.ok());
  Metrics metrics;
  Supervisor supervisor(FakeWorkerOptions("ready"), oom->get(), &metrics, nullptr);
  v1::LoadModelRequest load;
  load.set_path(WriteTinyModel());
  auto info = supervisor.LoadModel(load);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->model.worker_kind(), v1::WORKER_KIND_CUDA);  // --backend's default
  EXPECT_EQ(info->replacement, "");
  MetricsSnapshot s = supervisor.Snapshot(absl::Seconds(10));
  EXPECT_TRUE(s.worker.up());
  EXPECT_EQ(s.device_memory.dense_bytes(), 5u << 20);
  EXPECT_EQ(s.device_memory.kv_state_bytes(), 6u << 20);
  EXPECT_EQ(s.device_memory.workspace_bytes(), 7u << 20);
  EXPECT_EQ(s.device_memory.expert_arena_bytes(), 8u << 20);
  ASSERT_TRUE(supervisor.UnloadModel(v1::UnloadModelRequest()).ok());
  s = supervisor.Snapshot();
  const worker::v1::DeviceMemory& d = s.device_memory;
  EXPECT_EQ(d.dense_bytes() + d.kv_state_bytes() + d.workspace_bytes() + d.expert_arena_bytes(),
            0u);
  supervisor.Shutdown();
}

TEST(SupervisorFakeWorkerTest, FatalStartErrorIsTheCauseAndTheModelStaysFailed) {
  auto oom = OomContainment::Create("none", "", 0);
  ASSERT_TRUE(oom.ok());
  Metrics metrics;
  std::vector<bool> serving;
  Supervisor supervisor(FakeWorkerOptions("fatal"), oom->get(), &metrics,
                        [&](bool s) { serving.push_back(s); });
  v1::LoadModelRequest load;
  load.set_path(WriteTinyModel());
  auto info = supervisor.LoadModel(load);
  // The worker's code and text, with the kind (2: CUDA) and --device it got.
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(info.status().message().find("fake worker of kind 2 on device 5: no CUDA device"),
            std::string::npos)
      << info.status();
  std::vector<v1::ModelInfo> models = supervisor.ListModels();
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].state(), v1::MODEL_STATE_FAILED);
  EXPECT_EQ(models[0].last_error(), "fake worker of kind 2 on device 5: no CUDA device");
  v1::GenerateRequest generate;
  generate.set_prompt("hi");
  auto g = supervisor.SubmitGenerate(generate);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(g.status().message().find("no CUDA device"), std::string::npos) << g.status();
  // Not retried: no restart is counted or scheduled, and health never turned on.
  absl::SleepFor(absl::Milliseconds(300));
  MetricsSnapshot s = supervisor.Snapshot();
  EXPECT_FALSE(s.worker.up());
  EXPECT_EQ(s.worker.restarts(), 0u);
  EXPECT_EQ(metrics.restarts_total(), 0u);
  EXPECT_EQ(std::count(serving.begin(), serving.end(), true), 0);
  supervisor.Shutdown();
}

// Replacement: CPU workers, and the host has room for both models.
SupervisorOptions OverlapOptions(const std::string& fatal_model_id = "") {
  SupervisorOptions o = FakeWorkerOptions("ready", fatal_model_id);
  o.worker_kind = v1::WORKER_KIND_CPU;
  o.host_memory_available = []() -> absl::StatusOr<uint64_t> { return uint64_t{1} << 30; };
  return o;
}

v1::LoadModelRequest LoadRequest(const std::string& model_id) {
  v1::LoadModelRequest load;
  load.set_path(WriteTinyModel());
  load.set_model_id(model_id);
  return load;
}

TEST(SupervisorReplaceTest, NewWorkerStartsBesideTheServingOneAndTakesOver) {
  auto oom = OomContainment::Create("none", "", 0);
  ASSERT_TRUE(oom.ok());
  Metrics metrics;
  std::vector<bool> serving;
  Supervisor supervisor(OverlapOptions(), oom->get(), &metrics,
                        [&](bool s) { serving.push_back(s); });
  ASSERT_TRUE(supervisor.LoadModel(LoadRequest("a")).ok());
  const uint64_t first_pid = supervisor.Snapshot().worker.pid();
  auto b = supervisor.LoadModel(LoadRequest("b"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->model.model_id(), "b");
  EXPECT_EQ(b->model.state(), v1::MODEL_STATE_READY);
  EXPECT_EQ(b->replacement, "the previous model 'a' served until 'b' was ready");
  std::vector<v1::ModelInfo> models = supervisor.ListModels();
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].model_id(), "b");
  MetricsSnapshot s = supervisor.Snapshot();
  EXPECT_TRUE(s.worker.up());
  EXPECT_NE(s.worker.pid(), first_pid);
  EXPECT_EQ(s.worker.restarts(), 0u);
  // Health never dropped during the switch.
  EXPECT_EQ(serving, std::vector<bool>{true});
  supervisor.Shutdown();
}

TEST(SupervisorReplaceTest, FailedReplacementLeavesTheServingWorkerUntouched) {
  auto oom = OomContainment::Create("none", "", 0);
  ASSERT_TRUE(oom.ok());
  Metrics metrics;
  std::vector<bool> serving;
  Supervisor supervisor(OverlapOptions(/*fatal_model_id=*/"b"), oom->get(), &metrics,
                        [&](bool s) { serving.push_back(s); });
  ASSERT_TRUE(supervisor.LoadModel(LoadRequest("a")).ok());
  const uint64_t first_pid = supervisor.Snapshot().worker.pid();
  auto b = supervisor.LoadModel(LoadRequest("b"));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("fake worker of kind 1 on device 0: no CUDA device; "
                                      "the previous model 'a' kept serving (the new worker "
                                      "started beside it)"),
            std::string::npos)
      << b.status();
  std::vector<v1::ModelInfo> models = supervisor.ListModels();
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].model_id(), "a");
  EXPECT_EQ(models[0].state(), v1::MODEL_STATE_READY);
  MetricsSnapshot s = supervisor.Snapshot();
  EXPECT_TRUE(s.worker.up());
  EXPECT_EQ(s.worker.pid(), first_pid);
  EXPECT_EQ(metrics.restarts_total(), 0u);
  EXPECT_EQ(serving, std::vector<bool>{true});
  supervisor.Shutdown();
}

// A replacement that does not start in time is killed; the serving worker
// never noticed.
TEST(SupervisorReplaceTest, ReplacementThatDoesNotStartInTimeLeavesTheServingWorker) {
  auto oom = OomContainment::Create("none", "", 0);
  ASSERT_TRUE(oom.ok());
  Metrics metrics;
  SupervisorOptions o = OverlapOptions();
  o.worker_args.push_back("--silent_model_id=b");
  o.worker_start_timeout = absl::Milliseconds(500);
  Supervisor supervisor(o, oom->get(), &metrics, nullptr);
  ASSERT_TRUE(supervisor.LoadModel(LoadRequest("a")).ok());
  const uint64_t first_pid = supervisor.Snapshot().worker.pid();
  auto b = supervisor.LoadModel(LoadRequest("b"));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("': the worker did not report ready within 500ms; the "
                                      "previous model 'a' kept serving"),
            std::string::npos)
      << b.status();
  std::vector<v1::ModelInfo> models = supervisor.ListModels();
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].model_id(), "a");
  MetricsSnapshot s = supervisor.Snapshot();
  EXPECT_TRUE(s.worker.up());
  EXPECT_EQ(s.worker.pid(), first_pid);
  supervisor.Shutdown();
}

// Where two models are not assumed to fit, the serving worker stops first
// and the outcome says why.
TEST(SupervisorReplaceTest, StopsFirstWhereTwoModelsMayNotFit) {
  auto oom = OomContainment::Create("none", "", 0);
  ASSERT_TRUE(oom.ok());
  Metrics metrics;
  {
    Supervisor cuda(FakeWorkerOptions("ready"), oom->get(), &metrics, nullptr);
    ASSERT_TRUE(cuda.LoadModel(LoadRequest("a")).ok());
    auto b = cuda.LoadModel(LoadRequest("b"));
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->replacement,
              "the previous model 'a' was stopped before 'b' started: a CUDA worker holds its "
              "whole model in device memory, so two models are not assumed to fit");
    cuda.Shutdown();
  }
  {
    SupervisorOptions o = OverlapOptions();
    o.host_memory_available = []() -> absl::StatusOr<uint64_t> { return uint64_t{100}; };
    Supervisor small(o, oom->get(), &metrics, nullptr);
    ASSERT_TRUE(small.LoadModel(LoadRequest("a")).ok());
    auto b = small.LoadModel(LoadRequest("b"));
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->replacement,
              "the previous model 'a' was stopped before 'b' started: the host has 100 bytes "
              "available and the new model's tensors take 128 bytes");
    small.Shutdown();
  }
  {
    SupervisorOptions o = OverlapOptions(/*fatal_model_id=*/"b");
    o.replace_load = ReplaceLoad::kStopFirst;
    Supervisor stop_first(o, oom->get(), &metrics, nullptr);
    ASSERT_TRUE(stop_first.LoadModel(LoadRequest("a")).ok());
    auto b = stop_first.LoadModel(LoadRequest("b"));
    EXPECT_NE(b.status().message().find("; the previous model 'a' is loaded again (it was "
                                        "stopped first: --replace_load=stop_first)"),
              std::string::npos)
        << b.status();
    stop_first.Shutdown();
  }
}

}  // namespace
}  // namespace sluice::daemon
