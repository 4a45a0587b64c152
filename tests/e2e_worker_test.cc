// The supervisor<->worker boundary without gRPC: daemon::WorkerProcess
// spawning the real sluice-worker, the Hello hand-off, request traffic, the
// worker's refusal of an inconsistent Hello, and exit classification.
#include <sys/stat.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/testing/goldens.h"
#include "daemon/cgroup.h"
#include "daemon/model_desc.h"
#include "daemon/worker_process.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "model/engine.h"
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
                                               const std::string& binary = "",
                                               std::vector<std::string> args = {}) {
    daemon::WorkerSpawnOptions o;
    o.binary = binary.empty() ? RunfilePath("worker/sluice-worker") : binary;
    o.args = std::move(args);
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

// Continuous batching through the real worker (issue 19) on the F32 micro
// goldens of both architectures: several greedy requests at once, each
// streaming exactly the tokens and text Generate gives it alone.
class E2eWorkerBatchTest : public E2eWorkerTest {
 protected:
  static constexpr int kContext = 64;

  // What one request streamed, and the message that ended it.
  struct Stream {
    std::vector<int32_t> ids;
    std::string text;
    std::optional<WorkerMessage> end;
  };
  // What it gives alone: Generate in this process, greedy, no eos stop.
  struct Alone {
    std::vector<int32_t> ids;
    std::string text;
    FinishReason finish = FinishReason::kLength;
  };

  void Open(const std::string& name) {
    SLUICE_REQUIRE_GOLDENS(dir);
    path_ = absl::StrCat(dir, "/", name, ".gguf");
    auto files = ModelFiles::Open(path_);
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = *std::move(files);
    auto engine = Engine::Create(*files_, {.threads = 1, .context_length = kContext});
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  // A worker of the opened golden that runs `max_sequences` at once; every
  // token costs it 2 ms more (sluice-worker-testing --test_step_delay_ms),
  // so requests sent together are still running when the next arrives.
  // kv_cache_tokens: the worker's KV pool (0: every sequence its context).
  std::unique_ptr<daemon::WorkerProcess> SpawnBatch(int max_sequences,
                                                    v1::WorkerKind kind = v1::WORKER_KIND_CPU,
                                                    int64_t kv_cache_tokens = 0) {
    v1::LoadModelRequest load;
    load.set_path(path_);
    daemon::LoadSettings settings{1, kContext, kind};
    settings.batch.max_sequences = max_sequences;
    settings.batch.kv_cache_tokens = kv_cache_tokens;
    auto desc = daemon::PrepareLoad(load, settings);
    EXPECT_TRUE(desc.ok()) << desc.status();
    if (!desc.ok()) return nullptr;
    golden_ = std::move(*desc);
    std::vector<int> fds;
    for (const ShardFd& f : golden_.files->fds()) fds.push_back(f.fd);
    // The test worker has no CUDA backend: a CUDA arm runs the production
    // worker, without the delay.
    auto w = kind == v1::WORKER_KIND_CUDA
                 ? Spawn(golden_.hello, fds)
                 : Spawn(golden_.hello, fds, RunfilePath("worker/sluice-worker-testing"),
                         {"--test_step_delay_ms=2"});
    auto ready = AfterLoad();
    EXPECT_TRUE(ready.has_value() && ready->has_ready()) << (ready ? ready->DebugString() : "");
    return w;
  }

  // The worker's answer to a StatsQuery sent now (the messages before it
  // dropped); nullopt when it did not come.
  std::optional<WorkerMessage> StatsNow(daemon::WorkerProcess& w) {
    SupervisorMessage stats;
    stats.mutable_stats_query();
    if (!w.Send(stats).ok()) return std::nullopt;
    std::optional<WorkerMessage> m;
    while ((m = inbox_.Next()) && !m->has_stats()) {
    }
    return m;
  }

  std::vector<int32_t> Prompt(int length, int seed) const {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids;
    for (int i = 0; i < length; ++i) ids.push_back(rng() % engine_->info().n_vocab);
    return ids;
  }

  Alone RunAlone(const std::vector<int32_t>& prompt, int max_tokens,
                 const std::vector<std::string>& stop = {}) const {
    Alone out;
    auto session = engine_->NewSession();
    EXPECT_TRUE(session.ok()) << session.status();
    GenerateParams p;
    p.prompt = prompt;
    p.max_tokens = max_tokens;
    p.stop = stop;
    p.stop_at_eos = false;
    auto r = Generate(**session, p, [&](int32_t id, std::string_view piece) {
      out.ids.push_back(id);
      out.text += piece;
      return true;
    });
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) out.finish = r->finish_reason;
    return out;
  }

  static SupervisorMessage GenerateMessage(uint64_t id, const std::vector<int32_t>& prompt,
                                           int max_tokens,
                                           const std::vector<std::string>& stop = {}) {
    SupervisorMessage m;
    m.set_request_id(id);
    v1::GenerateRequest* g = m.mutable_generate();
    for (int32_t t : prompt) g->mutable_token_ids()->add_ids(t);
    g->set_max_tokens(max_tokens);
    g->set_ignore_eos(true);
    g->mutable_sampling()->set_temperature(0);
    for (const std::string& s : stop) g->add_stop(s);
    return m;
  }

  // Reads until every stream of `streams` has ended; `seen` is told of
  // every message first (to send a Cancel or a StatsQuery mid-way).
  // Messages that answer no stream (Stats, tokenized) go to `others`.
  void Collect(std::map<uint64_t, Stream>* streams,
               const std::function<void(const WorkerMessage&)>& seen,
               std::vector<WorkerMessage>* others) {
    auto open = [&] {
      for (const auto& [id, s] : *streams) {
        if (!s.end.has_value()) return true;
      }
      return false;
    };
    while (open()) {
      std::optional<WorkerMessage> m = inbox_.Next();
      ASSERT_TRUE(m.has_value()) << "the worker went quiet";
      if (m->has_heartbeat()) continue;
      auto it = streams->find(m->request_id());
      if (m->has_chunk() && it != streams->end()) {
        for (int32_t t : m->chunk().token_ids()) it->second.ids.push_back(t);
        it->second.text += m->chunk().text();
      } else if ((m->has_done() || m->has_error()) && it != streams->end()) {
        it->second.end = *m;
      } else {
        others->push_back(*m);
      }
      seen(*m);
    }
  }

  std::string path_;
  std::unique_ptr<ModelFiles> files_;
  std::unique_ptr<Engine> engine_;
  daemon::ModelDesc golden_;
};

TEST_F(E2eWorkerBatchTest, ConcurrentRequestsStreamWhatTheyStreamAlone) {
  for (const char* model : {"qwen3moe-micro-f32", "qwen35moe-micro-f32"}) {
    SCOPED_TRACE(model);
    Open(model);
    if (engine_ == nullptr) return;
    constexpr int kRequests = 4;
    constexpr int kTokens = 12;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::vector<std::string>> stops(kRequests);
    std::vector<Alone> alone;
    for (int r = 0; r < kRequests; ++r) {
      prompts.push_back(Prompt(3 + 4 * r, 10 + r));
      alone.push_back(RunAlone(prompts[r], kTokens));
    }
    // Request 2 ends at a stop string from late in its own text, so the
    // stop matcher of one sequence runs beside three that have none.
    const std::string& text2 = alone[2].text;
    ASSERT_GE(text2.size(), 4u) << model;
    stops[2] = {text2.substr(text2.size() * 3 / 4, 2)};
    alone[2] = RunAlone(prompts[2], kTokens, stops[2]);
    ASSERT_EQ(alone[2].finish, FinishReason::kStop) << model;

    auto w = SpawnBatch(kRequests);
    ASSERT_NE(w, nullptr);
    std::map<uint64_t, Stream> streams;
    for (int r = 0; r < kRequests; ++r) {
      streams[r + 1];
      ASSERT_TRUE(w->Send(GenerateMessage(r + 1, prompts[r], kTokens, stops[r])).ok());
    }
    // Once every request has a token, all four are in the batch.
    bool asked = false;
    std::vector<WorkerMessage> others;
    Collect(
        &streams,
        [&](const WorkerMessage&) {
          for (const auto& [id, s] : streams) {
            if (s.ids.empty()) return;
          }
          if (asked) return;
          asked = true;
          SupervisorMessage stats;
          stats.mutable_stats_query();
          ASSERT_TRUE(w->Send(stats).ok());
        },
        &others);
    for (int r = 0; r < kRequests; ++r) {
      const Stream& s = streams[r + 1];
      SCOPED_TRACE(absl::StrCat("request ", r + 1));
      EXPECT_EQ(s.ids, alone[r].ids);
      EXPECT_EQ(s.text, alone[r].text);
      ASSERT_TRUE(s.end.has_value() && s.end->has_done()) << s.end->DebugString();
      EXPECT_EQ(s.end->done().usage().completion_tokens(), alone[r].ids.size());
      EXPECT_EQ(s.end->done().usage().prompt_tokens(), prompts[r].size());
      EXPECT_EQ(s.end->done().finish_reason(),
                r == 2 ? v1::FINISH_REASON_STOP : v1::FINISH_REASON_LENGTH);
    }
    // The stats asked for while all four ran (answered at once).
    std::optional<worker::v1::BatchStats> during;
    for (const WorkerMessage& m : others) {
      if (m.has_stats() && !during) during = m.stats().batch();
    }
    ASSERT_TRUE(during.has_value());
    EXPECT_EQ(during->max_sequences(), 4u);
    EXPECT_EQ(during->running_sequences(), 4u);
    EXPECT_EQ(during->waiting_sequences(), 0u);
    EXPECT_EQ(during->batch_size(), 4u);
    EXPECT_EQ(during->kv_blocks_total(), 4u * kContext / 16);
    EXPECT_GT(during->kv_blocks_used(), 4u);
    EXPECT_EQ(during->preemptions_total(), 0u);
    EXPECT_GE(during->prefill_cap_tokens(), 1u);
    EXPECT_LE(during->prefill_cap_tokens(), 512u);
    // Afterwards: the steps were shared (fewer than the tokens streamed),
    // and each acquired the union of its sequences' experts.
    const std::optional<WorkerMessage> after = StatsNow(*w);
    ASSERT_TRUE(after.has_value());
    const worker::v1::BatchStats& b = after->stats().batch();
    size_t streamed = 0;
    for (const Alone& a : alone) streamed += a.ids.size();
    EXPECT_EQ(b.running_sequences(), 0u);
    EXPECT_EQ(b.kv_blocks_used(), 0u);
    EXPECT_LT(b.steps_total(), streamed);
    EXPECT_GE(b.steps_total(), static_cast<uint64_t>(kTokens));
    EXPECT_GT(b.experts_acquired_last_step(), 0u);
    EXPECT_GT(b.experts_acquired_total(), b.experts_acquired_last_step());
    EXPECT_EQ(after->stats().generated_tokens_total(), streamed);
    w->Stop(absl::Seconds(10));
    ASSERT_TRUE(inbox_.WaitExit().has_value());
  }
}

TEST_F(E2eWorkerBatchTest, CancelOfOneLeavesTheOthersTokens) {
  Open("qwen35moe-micro-f32");
  if (engine_ == nullptr) return;
  constexpr int kTokens = 20;
  std::vector<std::vector<int32_t>> prompts = {Prompt(6, 1), Prompt(4, 2), Prompt(9, 3)};
  std::vector<Alone> alone;
  for (const auto& p : prompts) alone.push_back(RunAlone(p, kTokens));
  auto w = SpawnBatch(3);
  ASSERT_NE(w, nullptr);
  std::map<uint64_t, Stream> streams;
  for (int r = 0; r < 3; ++r) {
    streams[r + 1];
    ASSERT_TRUE(w->Send(GenerateMessage(r + 1, prompts[r], kTokens)).ok());
  }
  bool cancelled = false;
  std::vector<WorkerMessage> others;
  Collect(
      &streams,
      [&](const WorkerMessage&) {
        if (cancelled || streams[2].ids.size() < 3) return;
        cancelled = true;
        SupervisorMessage cancel;
        cancel.set_request_id(2);
        cancel.mutable_cancel();
        ASSERT_TRUE(w->Send(cancel).ok());
      },
      &others);
  for (uint64_t id : {1u, 3u}) {
    EXPECT_EQ(streams[id].ids, alone[id - 1].ids) << "request " << id;
    ASSERT_TRUE(streams[id].end->has_done()) << streams[id].end->DebugString();
  }
  const Stream& c = streams[2];
  ASSERT_TRUE(c.end->has_error()) << c.end->DebugString();
  EXPECT_EQ(c.end->error().code(), static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_EQ(c.end->error().message(), "cancelled by the client");
  ASSERT_LT(c.ids.size(), static_cast<size_t>(kTokens));
  EXPECT_EQ(c.ids, std::vector<int32_t>(alone[1].ids.begin(), alone[1].ids.begin() + c.ids.size()));
  EXPECT_TRUE(others.empty());
}

// The same requests one at a time and then all at once through one worker
// stream the same tokens and text: on the CPU, and on the CUDA backend where
// a GPU is present (its batch runs chunk by chunk on per-sequence sessions:
// each must keep its own KV, state and decode graph inputs).
TEST_F(E2eWorkerBatchTest, TogetherAsOneAfterAnotherOnTheSameWorker) {
  struct stat st;
  const bool gpu = stat("/dev/nvidiactl", &st) == 0;
  std::vector<std::pair<std::string, v1::WorkerKind>> arms = {
      {"qwen35moe-micro-f32", v1::WORKER_KIND_CPU}};
  if (gpu) {
    arms.push_back({"qwen35moe-micro-f32", v1::WORKER_KIND_CUDA});
    arms.push_back({"qwen3moe-micro-f32", v1::WORKER_KIND_CUDA});
  }
  for (const auto& [model, kind] : arms) {
    SCOPED_TRACE(absl::StrCat(model, " on ", v1::WorkerKind_Name(kind)));
    Open(model);
    if (engine_ == nullptr) return;
    constexpr int kRequests = 4;
    constexpr int kTokens = 16;
    auto w = SpawnBatch(kRequests, kind);
    ASSERT_NE(w, nullptr);
    ASSERT_FALSE(HasFailure()) << "the worker did not start";
    std::vector<WorkerMessage> others;
    std::map<uint64_t, Stream> alone;
    for (int r = 0; r < kRequests; ++r) {
      std::map<uint64_t, Stream> one;
      one[r + 1];
      ASSERT_TRUE(w->Send(GenerateMessage(r + 1, Prompt(2 + 5 * r, 20 + r), kTokens)).ok());
      Collect(&one, [](const WorkerMessage&) {}, &others);
      alone[r + 1] = one[r + 1];
    }
    std::map<uint64_t, Stream> together;
    for (int r = 0; r < kRequests; ++r) {
      together[100 + r];
      ASSERT_TRUE(w->Send(GenerateMessage(100 + r, Prompt(2 + 5 * r, 20 + r), kTokens)).ok());
    }
    Collect(&together, [](const WorkerMessage&) {}, &others);
    for (int r = 0; r < kRequests; ++r) {
      const Stream& a = alone[r + 1];
      const Stream& t = together[100 + r];
      ASSERT_TRUE(a.end->has_done()) << a.end->DebugString();
      ASSERT_TRUE(t.end->has_done()) << t.end->DebugString();
      EXPECT_EQ(a.ids.size(), static_cast<size_t>(kTokens));
      EXPECT_EQ(t.ids, a.ids) << "request " << r;
      EXPECT_EQ(t.text, a.text) << "request " << r;
    }
    EXPECT_TRUE(others.empty());
    w->Stop(absl::Seconds(10));
    ASSERT_TRUE(inbox_.WaitExit().has_value());
  }
}

// A KV pool of one context (--kv_cache_tokens=64: 4 blocks) under four
// requests that need 7 blocks together: the scheduler keeps them within
// the pool (waiting or preempted and recomputed) and each still streams
// what it streams alone.
TEST_F(E2eWorkerBatchTest, ASmallKvPoolServesEveryRequestAsAlone) {
  Open("qwen35moe-micro-f32");
  if (engine_ == nullptr) return;
  constexpr int kRequests = 4;
  constexpr int kTokens = 12;
  auto w = SpawnBatch(kRequests, v1::WORKER_KIND_CPU, /*kv_cache_tokens=*/kContext);
  ASSERT_NE(w, nullptr);
  std::map<uint64_t, Stream> streams;
  std::vector<Alone> alone;
  for (int r = 0; r < kRequests; ++r) {
    const std::vector<int32_t> prompt = Prompt(3 + 4 * r, 30 + r);
    alone.push_back(RunAlone(prompt, kTokens));
    streams[r + 1];
    ASSERT_TRUE(w->Send(GenerateMessage(r + 1, prompt, kTokens)).ok());
  }
  // The order in which requests streamed their first token and ended.
  std::vector<std::string> events;
  std::set<uint64_t> started;
  std::vector<WorkerMessage> others;
  Collect(
      &streams,
      [&](const WorkerMessage& m) {
        if (m.has_chunk() && started.insert(m.request_id()).second) {
          events.push_back(absl::StrCat("first ", m.request_id()));
        } else if (m.has_done()) {
          events.push_back(absl::StrCat("done ", m.request_id()));
        }
      },
      &others);
  for (int r = 0; r < kRequests; ++r) {
    SCOPED_TRACE(absl::StrCat("request ", r + 1));
    const Stream& s = streams[r + 1];
    ASSERT_TRUE(s.end->has_done()) << s.end->DebugString();
    EXPECT_EQ(s.ids, alone[r].ids);
    EXPECT_EQ(s.text, alone[r].text);
  }
  // Admission takes a prompt's blocks plus 16 positions of headroom: 2
  // blocks each for requests 1 and 2 fill the pool, so request 3 starts
  // only once one of them has ended (with the default pool all four run
  // together: ConcurrentRequestsStreamWhatTheyStreamAlone).
  auto at = [&](const std::string& e) {
    return std::find(events.begin(), events.end(), e) - events.begin();
  };
  ASSERT_EQ(events.size(), 2u * kRequests) << absl::StrJoin(events, ", ");
  EXPECT_LT(std::min(at("done 1"), at("done 2")), at("first 3")) << absl::StrJoin(events, ", ");
  const std::optional<WorkerMessage> after = StatsNow(*w);
  ASSERT_TRUE(after.has_value());
  const worker::v1::BatchStats& b = after->stats().batch();
  EXPECT_EQ(b.kv_blocks_total(), static_cast<uint32_t>(kContext / 16));
  EXPECT_EQ(b.kv_blocks_used(), 0u);
  // Only the four slots' recurrent states: every KV page was given back.
  const uint64_t recurrent = engine_->model().StateBytes(0);
  EXPECT_GT(recurrent, 0u);
  EXPECT_EQ(b.state_resident_bytes(), 4 * recurrent);
}

// A request whose deadline has passed ends at the worker's next step with
// DEADLINE_EXCEEDED and no token; the one beside it streams as alone.
TEST_F(E2eWorkerBatchTest, PassedDeadlineEndsItsRequestOnly) {
  Open("qwen35moe-micro-f32");
  if (engine_ == nullptr) return;
  const std::vector<int32_t> prompt = Prompt(7, 4);
  const Alone alone = RunAlone(prompt, 10);
  auto w = SpawnBatch(2);
  ASSERT_NE(w, nullptr);
  std::map<uint64_t, Stream> streams;
  streams[1];
  streams[2];
  ASSERT_TRUE(w->Send(GenerateMessage(1, prompt, 10)).ok());
  SupervisorMessage late = GenerateMessage(2, Prompt(5, 5), 10);
  late.set_deadline_unix_micros(absl::ToUnixMicros(absl::Now() - absl::Seconds(1)));
  ASSERT_TRUE(w->Send(late).ok());
  std::vector<WorkerMessage> others;
  Collect(&streams, [](const WorkerMessage&) {}, &others);
  EXPECT_EQ(streams[1].ids, alone.ids);
  ASSERT_TRUE(streams[1].end->has_done()) << streams[1].end->DebugString();
  EXPECT_TRUE(streams[2].ids.empty());
  ASSERT_TRUE(streams[2].end->has_error()) << streams[2].end->DebugString();
  EXPECT_EQ(streams[2].end->error().code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(streams[2].end->error().message(),
            "the deadline expired before the generation finished");
}

// A Tokenize sent while two generations run is answered between their
// steps, before either ends.
TEST_F(E2eWorkerBatchTest, TokenizeIsAnsweredBetweenSteps) {
  Open("qwen3moe-micro-f32");
  if (engine_ == nullptr) return;
  auto w = SpawnBatch(2);
  ASSERT_NE(w, nullptr);
  std::map<uint64_t, Stream> streams;
  for (uint64_t id : {1u, 2u}) {
    streams[id];
    ASSERT_TRUE(w->Send(GenerateMessage(id, Prompt(5, id), 30)).ok());
  }
  bool sent = false;
  bool answered_while_running = false;
  std::vector<WorkerMessage> others;
  Collect(
      &streams,
      [&](const WorkerMessage& m) {
        if (m.has_tokenized()) {
          answered_while_running = !streams[1].end.has_value() && !streams[2].end.has_value();
        }
        if (sent || streams[1].ids.empty() || streams[2].ids.empty()) return;
        sent = true;
        SupervisorMessage tok;
        tok.set_request_id(9);
        tok.mutable_tokenize()->set_text("hello");
        ASSERT_TRUE(w->Send(tok).ok());
      },
      &others);
  ASSERT_EQ(others.size(), 1u);
  EXPECT_EQ(others[0].request_id(), 9u);
  EXPECT_GT(others[0].tokenized().token_ids_size(), 0);
  EXPECT_TRUE(answered_while_running);
  EXPECT_EQ(streams[1].ids.size(), 30u);
  EXPECT_EQ(streams[2].ids.size(), 30u);
}

}  // namespace
}  // namespace sluice::testing
