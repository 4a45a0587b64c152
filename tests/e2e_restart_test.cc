// End-to-end: worker death and restart, cancellation, deadlines and the
// bounded queue. The worker is the test-only sluice-worker-testing with a
// step delay, so that streams last long enough to be interrupted.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

class E2eRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = MakeTempDir("e2e-restart");
    auto path = WriteMicroModel(dir);
    ASSERT_TRUE(path.ok()) << path.status();
    DaemonOptions options;
    options.model_path = *path;
    // Two generations in flight to the worker, one waiting in the queue.
    options.flags = {"--queue_limit=1", "--max_sequences=2"};
    options.context_length = 4096;
    options.worker_test_flags = {"--test_step_delay_ms=5"};
    auto d = Daemon::Start(options);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }
  void TearDown() override {
    if (daemon_ != nullptr) {
      const std::string log = daemon_->Log();
      EXPECT_EQ(daemon_->Stop(), 0) << log;
    }
  }

  pid_t WorkerPid() {
    std::vector<pid_t> children = ChildrenOf(daemon_->pid());
    return children.size() == 1 ? children[0] : -1;
  }

  std::unique_ptr<Daemon> daemon_;
};

// Reads health transitions from a Watch stream into `seen` until SERVING
// follows NOT_SERVING or the deadline passes.
void WatchUntilServingAgain(grpc::health::v1::Health::Stub& health,
                            std::vector<std::string>* seen, std::atomic<bool>* first) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  auto reader = health.Watch(&ctx, grpc::health::v1::HealthCheckRequest());
  grpc::health::v1::HealthCheckResponse resp;
  bool down = false;
  while (reader->Read(&resp)) {
    const std::string s = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
    seen->push_back(s);
    *first = true;
    down |= s == "NOT_SERVING";
    if (down && s == "SERVING") break;
  }
  ctx.TryCancel();
  (void)reader->Finish();
}

TEST_F(E2eRestartTest, SigkillMidStreamTwentyTimes) {
  // Let the daemon settle its own fds (gRPC pollers, first connection).
  ASSERT_TRUE(RunGenerate(daemon_->stub(), GreedyRequest("warm up", 2)).status.ok());
  const int daemon_fds_before = CountFds(daemon_->pid());
  const int own_fds_before = CountFds(getpid());
  auto health = grpc::health::v1::Health::NewStub(daemon_->channel());
  std::vector<pid_t> killed;
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    std::vector<std::string> transitions;
    std::thread watcher;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    auto reader = daemon_->stub().Generate(&ctx, GreedyRequest("a long story", 2000));
    v1::GenerateResponse resp;
    ASSERT_TRUE(reader->Read(&resp)) << daemon_->Log();
    ASSERT_TRUE(resp.has_chunk());
    const pid_t worker = WorkerPid();
    ASSERT_GT(worker, 0);
    std::atomic<bool> first{false};
    watcher = std::thread([&] { WatchUntilServingAgain(*health, &transitions, &first); });
    // The watcher's first message is the current status (SERVING); wait for
    // it so that the NOT_SERVING transition cannot be missed.
    while (!first) std::this_thread::yield();
    ASSERT_EQ(kill(worker, SIGKILL), 0);
    killed.push_back(worker);
    while (reader->Read(&resp)) {
    }
    grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_NE(status.error_message().find("killed by signal 9 (SIGKILL)"), std::string::npos)
        << status.error_message();
    EXPECT_NE(status.error_message().find(absl::StrCat("pid ", worker)), std::string::npos)
        << status.error_message();
    watcher.join();
    ASSERT_GE(transitions.size(), 3u);
    EXPECT_EQ(transitions.front(), "SERVING");
    EXPECT_NE(std::find(transitions.begin(), transitions.end(), "NOT_SERVING"),
              transitions.end());
    EXPECT_EQ(transitions.back(), "SERVING");
    Generation next = RunGenerate(daemon_->stub(), GreedyRequest("after the crash", 3));
    ASSERT_TRUE(next.status.ok()) << next.status.error_message();
    EXPECT_EQ(next.final.usage().completion_tokens(), 3u);
  }
  // Exactly one live worker, not one of the killed ones, no zombies.
  std::vector<pid_t> children = ChildrenOf(daemon_->pid());
  ASSERT_EQ(children.size(), 1u);
  EXPECT_EQ(std::find(killed.begin(), killed.end(), children[0]), killed.end());
  EXPECT_NE(ProcessState(children[0]), 'Z');
  for (pid_t k : killed) EXPECT_EQ(ProcessState(k), 0) << "pid " << k << " lingers";
  EXPECT_EQ(CountFds(daemon_->pid()), daemon_fds_before);
  EXPECT_EQ(CountFds(getpid()), own_fds_before);
  const std::string metrics = daemon_->HttpGet("/metrics");
  EXPECT_NE(metrics.find("sluice_worker_restarts_total{reason=\"signal\"} 20\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_worker_up 1\n"), std::string::npos);
}

// Both generations in flight to the worker (max_sequences 2) and the one
// waiting behind them end with UNAVAILABLE naming the death.
TEST_F(E2eRestartTest, WorkerDeathFailsEveryRequestInFlight) {
  grpc::ClientContext first_ctx, second_ctx, waiting_ctx;
  auto first = daemon_->stub().Generate(&first_ctx, GreedyRequest("first", 2000));
  auto second = daemon_->stub().Generate(&second_ctx, GreedyRequest("second", 2000));
  v1::GenerateResponse resp;
  ASSERT_TRUE(first->Read(&resp));
  ASSERT_TRUE(second->Read(&resp));
  auto waiting = daemon_->stub().Generate(&waiting_ctx, GreedyRequest("third", 2));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (daemon_->HttpGet("/metrics").find("sluice_requests_waiting 1\n") == std::string::npos) {
    ASSERT_LT(absl::Now(), deadline) << "the third request never queued";
  }
  EXPECT_NE(daemon_->HttpGet("/metrics").find("sluice_requests_running 2\n"), std::string::npos);
  const pid_t worker = WorkerPid();
  ASSERT_GT(worker, 0);
  ASSERT_EQ(kill(worker, SIGKILL), 0);
  for (auto* reader : {first.get(), second.get(), waiting.get()}) {
    while (reader->Read(&resp)) {
    }
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_NE(status.error_message().find(absl::StrCat("worker (pid ", worker,
                                                       ") killed by signal 9 (SIGKILL)")),
              std::string::npos)
        << status.error_message();
  }
  ASSERT_TRUE(daemon_->WaitForHealth("SERVING", absl::Seconds(10)));
  Generation next = RunGenerate(daemon_->stub(), GreedyRequest("after the crash", 3));
  ASSERT_TRUE(next.status.ok()) << next.status.error_message();
}

TEST_F(E2eRestartTest, CancelStopsTheGenerationWithinAStep) {
  grpc::ClientContext ctx;
  auto reader = daemon_->stub().Generate(&ctx, GreedyRequest("cancel me", 2000));
  v1::GenerateResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  ctx.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // 2000 tokens at >= 5 ms each would take >= 10 s; a stopped worker serves
  // the next request at once.
  const absl::Time start = absl::Now();
  Generation next = RunGenerate(daemon_->stub(), GreedyRequest("next", 2));
  ASSERT_TRUE(next.status.ok()) << next.status.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_NE(daemon_->HttpGet("/metrics").find("sluice_requests_total{outcome=\"cancelled\"} 1\n"),
            std::string::npos);
}

TEST_F(E2eRestartTest, DeadlineIsHonoured) {
  const absl::Time start = absl::Now();
  Generation g = RunGenerate(daemon_->stub(), GreedyRequest("slow", 2000), absl::Milliseconds(300));
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_GT(g.chunks, 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  Generation next = RunGenerate(daemon_->stub(), GreedyRequest("next", 2));
  EXPECT_TRUE(next.status.ok()) << next.status.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));
  // Issue 11, item 9: an expired deadline is counted as such, not as a
  // client cancel.
  const std::string metrics = daemon_->HttpGet("/metrics");
  EXPECT_NE(metrics.find("sluice_requests_total{outcome=\"deadline_exceeded\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find("sluice_requests_total{outcome=\"cancelled\"} 1\n"), std::string::npos)
      << metrics;
}

TEST_F(E2eRestartTest, FullQueueIsResourceExhausted) {
  // Two running at once on the worker (max_sequences 2), one waiting
  // (queue_limit 1): the fourth is refused.
  grpc::ClientContext running_ctx, second_ctx, waiting_ctx;
  auto running = daemon_->stub().Generate(&running_ctx, GreedyRequest("first", 2000));
  v1::GenerateResponse resp;
  ASSERT_TRUE(running->Read(&resp));
  auto second = daemon_->stub().Generate(&second_ctx, GreedyRequest("second", 2000));
  ASSERT_TRUE(second->Read(&resp));
  {
    // Both on the worker at once, in one batch (the worker's own figures).
    const std::string metrics = daemon_->HttpGet("/metrics");
    EXPECT_NE(metrics.find("sluice_requests_running 2\n"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("sluice_worker_sequences{state=\"running\"} 2\n"), std::string::npos)
        << metrics;
    EXPECT_NE(metrics.find("sluice_worker_batch_size 2\n"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("sluice_worker_max_sequences 2\n"), std::string::npos) << metrics;
  }
  auto waiting = daemon_->stub().Generate(&waiting_ctx, GreedyRequest("third", 2));
  // The waiting request is queued once the gauge says so.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (daemon_->HttpGet("/metrics").find("sluice_requests_waiting 1\n") == std::string::npos) {
    ASSERT_LT(absl::Now(), deadline) << "the second request never queued";
  }
  Generation fourth = RunGenerate(daemon_->stub(), GreedyRequest("fourth", 2));
  EXPECT_EQ(fourth.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(fourth.status.error_message().find("request queue is full: 1 requests waiting"),
            std::string::npos)
      << fourth.status.error_message();
  running_ctx.TryCancel();
  (void)running->Finish();
  second_ctx.TryCancel();
  (void)second->Finish();
  while (waiting->Read(&resp)) {
  }
  EXPECT_TRUE(waiting->Finish().ok());
}

TEST_F(E2eRestartTest, SigtermDrainsTheRunningGeneration) {
  grpc::ClientContext ctx;
  auto reader = daemon_->stub().Generate(&ctx, GreedyRequest("finish me", 150));
  v1::GenerateResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  ASSERT_EQ(kill(daemon_->pid(), SIGTERM), 0);
  ASSERT_TRUE(daemon_->WaitForHealth("NOT_SERVING", absl::Seconds(10)));
  Generation refused = RunGenerate(daemon_->stub(), GreedyRequest("too late", 2));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(refused.status.error_message(), "sluiced is shutting down");
  int chunks = 1;
  bool done = false;
  while (reader->Read(&resp)) {
    chunks += resp.has_chunk() ? 1 : 0;
    done |= resp.has_done();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(done);
  EXPECT_EQ(chunks, 150);
}

// A restart that the new worker refuses with a start error (here: the file
// was rewritten in place to an architecture it cannot build, as a lost GPU
// would make a CUDA worker refuse) is deterministic: the model goes FAILED
// with the worker's message and no further worker is started.
TEST(E2eRestartFailureTest, DeterministicStartErrorAfterACrashIsNotRetried) {
  const std::string dir = MakeTempDir("e2e-restart-fail");
  auto path = WriteMicroModel(dir);
  ASSERT_TRUE(path.ok()) << path.status();
  DaemonOptions options;
  options.model_path = *path;
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  Daemon& daemon = **d;
  ASSERT_EQ(daemon.Health(), "SERVING");
  {
    // Same inode: the supervisor's descriptors (which the next worker gets)
    // see the change.
    std::fstream f(*path, std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t at = bytes.find("qwen35moe");
    ASSERT_NE(at, std::string::npos);
    f.seekp(static_cast<std::streamoff>(at));
    f.write("qwen99moe", 9);
    ASSERT_TRUE(f.good());
  }
  std::vector<pid_t> workers = ChildrenOf(daemon.pid());
  ASSERT_EQ(workers.size(), 1u);
  ASSERT_EQ(kill(workers[0], SIGKILL), 0);

  v1::ModelInfo info;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    grpc::ClientContext ctx;
    v1::ListModelsResponse resp;
    ASSERT_TRUE(daemon.stub().ListModels(&ctx, v1::ListModelsRequest(), &resp).ok());
    ASSERT_EQ(resp.models_size(), 1);
    info = resp.models(0);
    if (info.state() == v1::MODEL_STATE_FAILED) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(info.state(), v1::MODEL_STATE_FAILED) << info.last_error() << daemon.Log();
  EXPECT_NE(info.last_error().find(") failed to start: "), std::string::npos) << info.last_error();
  // The worker's message names the architecture the file holds: the log
  // keeps it, clients get the rule (issue 20, item 6).
  EXPECT_EQ(info.last_error().find("qwen99moe"), std::string::npos) << info.last_error();
  EXPECT_NE(info.last_error().find("(withheld)"), std::string::npos) << info.last_error();
  EXPECT_NE(daemon.Log().find("qwen99moe"), std::string::npos);
  EXPECT_NE(info.last_error().find("not restarted"), std::string::npos) << info.last_error();
  // A retry would come within the back-off (100 ms, then 200 ms).
  absl::SleepFor(absl::Milliseconds(600));
  EXPECT_TRUE(ChildrenOf(daemon.pid()).empty());
  EXPECT_EQ(daemon.Health(), "NOT_SERVING");
  Generation g = RunGenerate(daemon.stub(), GreedyRequest("Hello", 2));
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(g.status.error_message().find("qwen99moe"), std::string::npos)
      << g.status.error_message();
  EXPECT_NE(g.status.error_message().find("(withheld)"), std::string::npos)
      << g.status.error_message();
  const std::string metrics = daemon.HttpGet("/metrics");
  EXPECT_NE(metrics.find("sluice_worker_restarts_total{reason=\"signal\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_worker_restarts_total{reason=\"exit\"} 0\n"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(daemon.Stop(), 0) << daemon.Log();
}

}  // namespace
}  // namespace sluice::testing
