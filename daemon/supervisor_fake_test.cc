// The supervisor in-process: fake workers the test plays (daemon/testing/
// fake_worker_connection.h) and a fake clock it moves, so restarts, hung
// workers and switch-over are tested without processes or sleeps.
// (supervisor_test runs the real WorkerProcess on a fake worker binary.)
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/supervisor.h"
#include "daemon/testing/fake_clock.h"
#include "daemon/testing/fake_worker_connection.h"
#include "daemon/testing/tiny_model.h"
#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

using testing::FakeClock;
using testing::FakeWorker;
using testing::FakeWorkerLauncher;
using testing::WriteTinyModel;
using worker::v1::SupervisorMessage;
using worker::v1::WorkerMessage;
using Event = RequestHandle::Event;

class SupervisorOnFakesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto oom = OomContainment::Create("none", "", 0);
    ASSERT_TRUE(oom.ok());
    oom_ = std::move(*oom);
  }
  void TearDown() override {
    if (supervisor_ != nullptr) supervisor_->Shutdown();
  }

  // CPU workers, room for two models (so replacements start beside), one
  // generation in flight at a time.
  void Start(absl::Duration hung_timeout = absl::Seconds(10)) {
    SupervisorOptions o;
    o.launcher = &launcher_;
    o.clock = &clock_;
    o.worker_kind = v1::WORKER_KIND_CPU;
    o.batch.max_sequences = 1;
    o.hung_timeout = hung_timeout;
    o.host_memory_available = []() -> absl::StatusOr<uint64_t> { return uint64_t{1} << 30; };
    supervisor_ = std::make_unique<Supervisor>(o, oom_.get(), &metrics_,
                                               [this](bool s) { serving_.push_back(s); });
  }

  // LoadModel blocks until the worker is ready: it runs on a thread while
  // this one plays launch number `launch` and says Ready.
  absl::StatusOr<LoadOutcome> LoadReady(const std::string& model_id, int launch) {
    v1::LoadModelRequest load;
    load.set_path(WriteTinyModel());
    load.set_model_id(model_id);
    absl::StatusOr<LoadOutcome> outcome = absl::UnknownError("not run");
    std::thread loader([&] { outcome = supervisor_->LoadModel(load); });
    absl::StatusOr<std::shared_ptr<FakeWorker>> worker = launcher_.WaitForLaunch(launch);
    if (worker.ok()) (*worker)->Ready();
    loader.join();
    return outcome;
  }

  std::shared_ptr<FakeWorker> Worker(int launch) {
    absl::StatusOr<std::shared_ptr<FakeWorker>> worker = launcher_.WaitForLaunch(launch);
    EXPECT_TRUE(worker.ok()) << worker.status();
    return worker.ok() ? *worker : nullptr;
  }

  std::shared_ptr<RequestHandle> Generate(const std::string& prompt) {
    v1::GenerateRequest request;
    request.set_prompt(prompt);
    absl::StatusOr<std::shared_ptr<RequestHandle>> h = supervisor_->SubmitGenerate(request);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? *h : nullptr;
  }

  // The generate message the worker got for request `id`.
  static absl::StatusOr<SupervisorMessage> SentGenerate(FakeWorker& w, uint64_t id) {
    return w.WaitForSent([id](const SupervisorMessage& m) {
      return m.has_generate() && m.request_id() == id;
    });
  }

  // The events already delivered to `h` (the fakes deliver synchronously).
  static std::vector<Event> Events(RequestHandle& h) {
    std::vector<Event> events;
    Event e;
    while (h.Next(&e, absl::ZeroDuration())) events.push_back(e);
    return events;
  }

  FakeClock clock_;
  FakeWorkerLauncher launcher_;
  std::unique_ptr<OomContainment> oom_;
  Metrics metrics_;
  std::vector<bool> serving_;
  std::unique_ptr<Supervisor> supervisor_;
};

WorkerMessage Chunk(uint64_t id, const std::string& text, int token) {
  WorkerMessage msg;
  msg.set_request_id(id);
  msg.mutable_chunk()->set_text(text);
  msg.mutable_chunk()->add_token_ids(token);
  return msg;
}

TEST_F(SupervisorOnFakesTest, GenerateStreamsTheWorkersTokensBackAndEndsWithDone) {
  Start();
  ASSERT_TRUE(LoadReady("a", 0).ok());
  std::shared_ptr<FakeWorker> w = Worker(0);
  std::shared_ptr<RequestHandle> h = Generate("hi");
  ASSERT_NE(h, nullptr);
  absl::StatusOr<SupervisorMessage> sent = SentGenerate(*w, h->id());
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(sent->generate().prompt(), "hi");
  EXPECT_EQ(sent->generate().request_id(), absl::StrCat("sluiced-", h->id()));

  clock_.Advance(absl::Milliseconds(30));
  w->Deliver(Chunk(h->id(), "Hel", 11));
  w->Deliver(Chunk(h->id(), "lo", 12));
  WorkerMessage done;
  done.set_request_id(h->id());
  done.mutable_done()->set_finish_reason(v1::FINISH_REASON_STOP);
  done.mutable_done()->mutable_usage()->set_prompt_tokens(1);
  done.mutable_done()->mutable_usage()->set_completion_tokens(2);
  w->Deliver(done);

  std::vector<Event> events = Events(*h);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, Event::Type::kChunk);
  EXPECT_EQ(events[0].chunk.text(), "Hel");
  EXPECT_EQ(events[1].chunk.text(), "lo");
  EXPECT_EQ(events[1].chunk.token_ids(0), 12);
  ASSERT_EQ(events[2].type, Event::Type::kDone);
  EXPECT_EQ(events[2].done.request_id(), absl::StrCat("sluiced-", h->id()));
  EXPECT_EQ(events[2].done.usage().completion_tokens(), 2u);
  // Sent at once, first token 30 ms later on the fake clock.
  EXPECT_EQ(events[2].done.timings().queue_ms(), 0.0);
  EXPECT_EQ(events[2].done.timings().time_to_first_token_ms(), 30.0);
  EXPECT_EQ(supervisor_->Snapshot(absl::ZeroDuration()).requests_running, 0u);
}

TEST_F(SupervisorOnFakesTest, CancelReachesTheWorkerOnceAndAWaitingRequestNeverDoes) {
  Start();
  ASSERT_TRUE(LoadReady("a", 0).ok());
  std::shared_ptr<FakeWorker> w = Worker(0);
  std::shared_ptr<RequestHandle> running = Generate("one");
  std::shared_ptr<RequestHandle> waiting = Generate("two");  // max_sequences is 1
  ASSERT_TRUE(SentGenerate(*w, running->id()).ok());

  supervisor_->Cancel(waiting);
  std::vector<Event> events = Events(*waiting);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].status, absl::CancelledError("cancelled while waiting in the queue"));

  supervisor_->Cancel(running);
  supervisor_->Cancel(running);  // idempotent
  int cancels = 0;
  for (const SupervisorMessage& m : w->Sent()) {
    if (m.has_cancel()) {
      ++cancels;
      EXPECT_EQ(m.request_id(), running->id());
    }
    EXPECT_FALSE(m.has_generate() && m.request_id() == waiting->id());
  }
  EXPECT_EQ(cancels, 1);
  // The worker acknowledges after its step; that ends the request.
  WorkerMessage ack;
  ack.set_request_id(running->id());
  ack.mutable_error()->set_code(static_cast<int>(absl::StatusCode::kCancelled));
  ack.mutable_error()->set_message("cancelled");
  w->Deliver(ack);
  events = Events(*running);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].status, absl::CancelledError("cancelled"));
}

TEST_F(SupervisorOnFakesTest, SwitchOverMovesTheCandidateToServing) {
  Start();
  ASSERT_TRUE(LoadReady("a", 0).ok());
  std::shared_ptr<FakeWorker> a = Worker(0);
  std::shared_ptr<RequestHandle> on_a = Generate("on a");
  ASSERT_TRUE(SentGenerate(*a, on_a->id()).ok());

  absl::StatusOr<LoadOutcome> b = LoadReady("b", 1);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->replacement, "the previous model 'a' served until 'b' was ready");
  // The request on the old model ends; the old worker was told to shut down.
  std::vector<Event> events = Events(*on_a);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].status, absl::UnavailableError("model 'a' was replaced by 'b'"));
  EXPECT_TRUE(a->WaitForSent([](const SupervisorMessage& m) { return m.has_shutdown(); }).ok());
  // The candidate serves now: its pid, its model, its requests.
  std::shared_ptr<FakeWorker> w = Worker(1);
  MetricsSnapshot s = supervisor_->Snapshot(absl::ZeroDuration());
  EXPECT_TRUE(s.worker.up());
  EXPECT_EQ(s.worker.pid(), static_cast<uint64_t>(w->pid()));
  std::vector<v1::ModelInfo> models = supervisor_->ListModels();
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].model_id(), "b");
  EXPECT_EQ(models[0].state(), v1::MODEL_STATE_READY);
  std::shared_ptr<RequestHandle> on_b = Generate("on b");
  EXPECT_TRUE(SentGenerate(*w, on_b->id()).ok());
  // The old worker's exit, after the switch, changes nothing.
  EXPECT_TRUE(a->exited());
  EXPECT_EQ(serving_, std::vector<bool>{true});
  EXPECT_EQ(metrics_.restarts_total(), 0u);
}

TEST_F(SupervisorOnFakesTest, WorkerDeathFailsInFlightRequestsAndRestartsAfterTheBackoff) {
  Start();
  ASSERT_TRUE(LoadReady("a", 0).ok());
  std::shared_ptr<FakeWorker> w = Worker(0);
  std::shared_ptr<RequestHandle> running = Generate("one");
  std::shared_ptr<RequestHandle> waiting = Generate("two");
  ASSERT_TRUE(SentGenerate(*w, running->id()).ok());

  w->Exit({WorkerExit::Reason::kSignal, 9, "killed by signal 9 (SIGKILL)"});
  const absl::Status lost = absl::UnavailableError(
      "worker (pid 1000) killed by signal 9 (SIGKILL); the request did not complete");
  for (const std::shared_ptr<RequestHandle>& h : {running, waiting}) {
    std::vector<Event> events = Events(*h);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].status, lost);
  }
  std::vector<v1::ModelInfo> models = supervisor_->ListModels();
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].state(), v1::MODEL_STATE_RESTARTING);
  EXPECT_EQ(models[0].last_error(), "worker (pid 1000) killed by signal 9 (SIGKILL)");
  EXPECT_EQ(metrics_.restarts_total(), 1u);
  EXPECT_EQ(serving_, (std::vector<bool>{true, false}));

  // The first back-off is 100 ms of the supervisor's clock.
  clock_.Advance(absl::Milliseconds(100));
  std::shared_ptr<FakeWorker> again = Worker(1);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->hello().config().heartbeat_interval_ms(), 1000u);
  again->Ready();
  EXPECT_EQ(serving_, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(supervisor_->ListModels()[0].state(), v1::MODEL_STATE_READY);
  std::shared_ptr<RequestHandle> after = Generate("three");
  EXPECT_TRUE(SentGenerate(*again, after->id()).ok());
}

TEST_F(SupervisorOnFakesTest, SilentWorkerIsKilledAsHungAndItsRequestFails) {
  Start(/*hung_timeout=*/absl::Seconds(2));
  ASSERT_TRUE(LoadReady("a", 0).ok());
  std::shared_ptr<FakeWorker> w = Worker(0);
  std::shared_ptr<RequestHandle> h = Generate("one");
  ASSERT_TRUE(SentGenerate(*w, h->id()).ok());

  clock_.Advance(absl::Seconds(1));
  WorkerMessage heartbeat;
  heartbeat.mutable_heartbeat();
  w->Deliver(heartbeat);  // alive, but the request makes no progress
  clock_.Advance(absl::Seconds(1));
  absl::StatusOr<std::string> why = w->WaitKilled();
  ASSERT_TRUE(why.ok()) << why.status();
  EXPECT_EQ(*why, absl::StrCat("no progress on request ", h->id(), " for 2s"));
  // Not serving from the moment it was judged hung, before its exit.
  EXPECT_EQ(serving_, (std::vector<bool>{true, false}));
  EXPECT_FALSE(supervisor_->Snapshot(absl::ZeroDuration()).worker.up());

  w->Exit({WorkerExit::Reason::kHung, 9, "was hung (" + *why + ") and was killed"});
  std::vector<Event> events = Events(*h);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].status,
            absl::UnavailableError(absl::StrCat("worker (pid 1000) was hung (", *why,
                                                ") and was killed; the request did not "
                                                "complete")));
}

TEST_F(SupervisorOnFakesTest, WorkerThatDoesNotStartInTimeFailsTheLoad) {
  Start();
  v1::LoadModelRequest load;
  load.set_path(WriteTinyModel());
  absl::StatusOr<LoadOutcome> outcome = absl::UnknownError("not run");
  std::thread loader([&] { outcome = supervisor_->LoadModel(load); });
  std::shared_ptr<FakeWorker> w = Worker(0);
  ASSERT_NE(w, nullptr);
  clock_.Advance(absl::Seconds(kDefaultWorkerStartTimeoutS));
  absl::StatusOr<std::string> killed = w->WaitKilled();
  EXPECT_TRUE(killed.ok()) << killed.status();
  w->Exit({WorkerExit::Reason::kSignal, 9, "killed by signal 9 (SIGKILL)"});
  loader.join();
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(outcome.status().message(),
            absl::StrCat("LoadModel path='", load.path(), "': the worker did not report ready "
                         "within ",
                         absl::FormatDuration(absl::Seconds(kDefaultWorkerStartTimeoutS))));
  std::vector<v1::ModelInfo> models = supervisor_->ListModels();
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].state(), v1::MODEL_STATE_FAILED);
}

}  // namespace
}  // namespace sluice::daemon
