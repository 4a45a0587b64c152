// The supervisor<->worker boundary without gRPC: daemon::WorkerProcess
// spawning the real sluice-worker, the Hello hand-off, request traffic, the
// worker's refusal of an inconsistent Hello, and exit classification.
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "daemon/cgroup.h"
#include "daemon/model_desc.h"
#include "daemon/worker_process.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

using worker::v1::SupervisorMessage;
using worker::v1::WorkerMessage;

class Inbox {
 public:
  void Push(WorkerMessage m) {
    absl::MutexLock lock(&mu_);
    messages_.push_back(std::move(m));
  }
  void Exited(const daemon::WorkerExit& e) {
    absl::MutexLock lock(&mu_);
    exit_ = e;
    exited_ = true;
  }
  // The next message, or nullopt after 30 s.
  std::optional<WorkerMessage> Next() {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !messages_.empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(30))) return std::nullopt;
    WorkerMessage m = std::move(messages_.front());
    messages_.pop_front();
    return m;
  }
  std::optional<daemon::WorkerExit> WaitExit() {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return exited_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(30))) return std::nullopt;
    return exit_;
  }

 private:
  absl::Mutex mu_;
  std::deque<WorkerMessage> messages_ ABSL_GUARDED_BY(mu_);
  daemon::WorkerExit exit_ ABSL_GUARDED_BY(mu_);
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
};

class E2eWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = WriteMicroModel(MakeTempDir("e2e-worker"));
    ASSERT_TRUE(path.ok()) << path.status();
    v1::LoadModelRequest load;
    load.set_path(*path);
    auto desc = daemon::PrepareLoad(load, daemon::LoadSettings{1, 256});
    ASSERT_TRUE(desc.ok()) << desc.status();
    desc_ = std::move(*desc);
    for (const ShardFd& s : desc_.files->fds()) fds_.push_back(s.fd);
    auto oom = daemon::OomContainment::Create("none", "", 0);
    ASSERT_TRUE(oom.ok());
    oom_ = std::move(*oom);
  }

  std::unique_ptr<daemon::WorkerProcess> Spawn(const worker::v1::Hello& hello,
                                               const std::vector<int>& fds,
                                               const std::string& binary = "") {
    daemon::WorkerSpawnOptions o;
    o.binary = binary.empty() ? RunfilePath("worker/sluice-worker") : binary;
    o.oom = oom_.get();
    auto w = daemon::WorkerProcess::Spawn(
        o, hello, fds, [this](WorkerMessage m) { inbox_.Push(std::move(m)); },
        [this](const daemon::WorkerExit& e) { inbox_.Exited(e); });
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? std::move(*w) : nullptr;
  }

  // The first message after the load's progress reports, whose phases are
  // kept in load_phases_.
  std::optional<WorkerMessage> AfterLoad() {
    std::optional<WorkerMessage> m;
    while ((m = inbox_.Next()) && m->has_load_progress()) {
      load_phases_.push_back(m->load_progress().phase());
    }
    return m;
  }

  daemon::ModelDesc desc_;
  std::vector<std::string> load_phases_;
  std::vector<int> fds_;
  std::unique_ptr<daemon::OomContainment> oom_;
  Inbox inbox_;
};

TEST_F(E2eWorkerTest, ServesTokenizeGenerateStatsAndShutsDownCleanly) {
  auto w = Spawn(desc_.hello, fds_);
  ASSERT_NE(w, nullptr);
  auto ready = AfterLoad();
  ASSERT_TRUE(ready.has_value() && ready->has_ready()) << (ready ? ready->DebugString() : "");
  EXPECT_EQ(load_phases_, (std::vector<std::string>{"mapping", "building"}));
  EXPECT_EQ(ready->ready().model().vocab_size(), desc_.info.vocab_size());
  EXPECT_EQ(ready->ready().model().context_length(), 256u);

  SupervisorMessage tok;
  tok.set_request_id(7);
  tok.mutable_tokenize()->set_text("hello");
  ASSERT_TRUE(w->Send(tok).ok());
  auto tokenized = inbox_.Next();
  ASSERT_TRUE(tokenized.has_value() && tokenized->has_tokenized());
  EXPECT_EQ(tokenized->request_id(), 7u);
  EXPECT_GT(tokenized->tokenized().token_ids_size(), 0);

  SupervisorMessage gen;
  gen.set_request_id(8);
  *gen.mutable_generate() = GreedyRequest("hello", 5);
  ASSERT_TRUE(w->Send(gen).ok());
  int chunks = 0;
  std::optional<WorkerMessage> m;
  while ((m = inbox_.Next()) && m->has_chunk()) {
    EXPECT_EQ(m->request_id(), 8u);
    EXPECT_EQ(m->chunk().token_ids_size(), 1);
    ++chunks;
  }
  EXPECT_EQ(chunks, 5);
  ASSERT_TRUE(m.has_value() && m->has_done()) << (m ? m->DebugString() : "");
  EXPECT_EQ(m->done().usage().completion_tokens(), 5u);

  SupervisorMessage stats;
  stats.mutable_stats_query();
  ASSERT_TRUE(w->Send(stats).ok());
  auto s = inbox_.Next();
  ASSERT_TRUE(s.has_value() && s->has_stats());
  EXPECT_GT(s->stats().rss_file_bytes() + s->stats().rss_anon_bytes(), 0u);
  EXPECT_EQ(s->stats().generated_tokens_total(), 5u);

  w->Stop(absl::Seconds(10));
  auto exit = inbox_.WaitExit();
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->reason, daemon::WorkerExit::Reason::kExit);
  EXPECT_EQ(exit->description, "exited with code 0");
}

TEST_F(E2eWorkerTest, TableThatDisagreesWithTheShardsIsFatal) {
  worker::v1::Hello hello = desc_.hello;
  hello.mutable_tensors(0)->set_file_offset(hello.tensors(0).file_offset() + 32);
  auto w = Spawn(hello, fds_);
  ASSERT_NE(w, nullptr);
  auto m = inbox_.Next();
  ASSERT_TRUE(m.has_value() && m->has_fatal());
  EXPECT_EQ(m->fatal().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(m->fatal().message().find("disagrees with the supervisor's table"), std::string::npos)
      << m->fatal().message();
  auto exit = inbox_.WaitExit();
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->description, "exited with code 2");
}

// The supervisor checks --expert_miss_policy by name; the worker parses the
// Hello's again with memory::ParseMissPolicy, before any planning.
TEST_F(E2eWorkerTest, UnknownMissPolicyInTheHelloIsFatal) {
  worker::v1::Hello hello = desc_.hello;
  hello.mutable_config()->set_kind(v1::WORKER_KIND_CUDA);
  hello.mutable_config()->set_expert_miss_policy("fastest");
  auto w = Spawn(hello, fds_);
  ASSERT_NE(w, nullptr);
  auto m = AfterLoad();
  EXPECT_EQ(load_phases_, std::vector<std::string>{"mapping"}) << "mapped, then refused";
  ASSERT_TRUE(m.has_value() && m->has_fatal());
  EXPECT_EQ(m->fatal().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(m->fatal().message(),
            "Hello.config.expert_miss_policy: unknown expert miss policy \"fastest\" "
            "(copy, host or cost)");
}

TEST_F(E2eWorkerTest, MissingFdsAreFatal) {
  auto w = Spawn(desc_.hello, {});
  ASSERT_NE(w, nullptr);
  auto m = inbox_.Next();
  ASSERT_TRUE(m.has_value() && m->has_fatal());
  EXPECT_NE(m->fatal().message().find("announced 1 shards but carried 0 fds"), std::string::npos)
      << m->fatal().message();
}

TEST_F(E2eWorkerTest, SigkillIsClassifiedAsASignal) {
  auto w = Spawn(desc_.hello, fds_);
  ASSERT_NE(w, nullptr);
  auto ready = AfterLoad();
  ASSERT_TRUE(ready.has_value() && ready->has_ready());
  w->Kill();
  auto exit = inbox_.WaitExit();
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->reason, daemon::WorkerExit::Reason::kSignal);
  EXPECT_EQ(exit->code, 9);
  EXPECT_EQ(exit->description, "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(daemon::ExitReasonLabel(exit->reason), "signal");
}

// Issue 11 defect 2: PR_SET_PDEATHSIG is tied to the forking thread, so a
// worker spawned by a short-lived thread (a gRPC handler) used to be killed
// when that thread exited.
TEST_F(E2eWorkerTest, WorkerOutlivesTheThreadThatSpawnedIt) {
  std::unique_ptr<daemon::WorkerProcess> w;
  std::thread spawner([&] { w = Spawn(desc_.hello, fds_); });
  spawner.join();
  ASSERT_NE(w, nullptr);
  auto ready = AfterLoad();
  ASSERT_TRUE(ready.has_value() && ready->has_ready()) << (ready ? ready->DebugString() : "");
  absl::SleepFor(absl::Milliseconds(300));  // a SIGKILL would have landed by now
  SupervisorMessage tok;
  tok.set_request_id(9);
  tok.mutable_tokenize()->set_text("still alive");
  ASSERT_TRUE(w->Send(tok).ok());
  std::optional<WorkerMessage> m;
  while ((m = inbox_.Next()) && m->has_heartbeat()) {
  }
  ASSERT_TRUE(m.has_value() && m->has_tokenized()) << (m ? m->DebugString() : "no message");
  EXPECT_EQ(m->request_id(), 9u);
  w->Stop(absl::Seconds(10));
  auto exit = inbox_.WaitExit();
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->description, "exited with code 0");
}

TEST_F(E2eWorkerTest, MissingBinaryIsExit127) {
  auto w = Spawn(desc_.hello, fds_, "/nonexistent/sluice-worker");
  ASSERT_NE(w, nullptr);
  auto exit = inbox_.WaitExit();
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->description, "exited with code 127 (could not exec the worker binary)");
}

}  // namespace
}  // namespace sluice::testing
