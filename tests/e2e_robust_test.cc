// End-to-end regression tests of issue 11's defects: the channel wedge under
// large concurrent Tokenize calls and hung-worker detection.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"
#include "worker/worker_testing.h"

namespace sluice::testing {
namespace {

std::unique_ptr<Daemon> StartDaemon(const std::vector<std::string>& flags,
                                    const std::vector<std::string>& worker_test_flags = {},
                                    const std::map<std::string, std::string>& env = {}) {
  auto path = WriteMicroModel(MakeTempDir("e2e-robust"));
  EXPECT_TRUE(path.ok()) << path.status();
  if (!path.ok()) return nullptr;
  DaemonOptions options;
  options.model_path = *path;
  options.flags = flags;
  options.env = env;
  options.worker_test_flags = worker_test_flags;
  options.context_length = 4096;
  auto d = Daemon::Start(options);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::move(*d) : nullptr;
}

std::unique_ptr<v1::Sluice::Stub> BigMessageStub(Daemon& d) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return v1::Sluice::NewStub(
      grpc::CreateCustomChannel(d.address(), grpc::InsecureChannelCredentials(), args));
}

// Issue 11 defect 1: three concurrent ~300 KB Tokenize calls used to wedge
// both processes in a socket send for good.
TEST(E2eRobustTest, ConcurrentLargeTokenizeCallsDoNotWedgeTheDaemon) {
  auto d = StartDaemon({});
  ASSERT_NE(d, nullptr);
  auto stub = BigMessageStub(*d);
  std::vector<grpc::Status> statuses(3);
  std::vector<int> token_counts(3, 0);
  std::vector<std::thread> callers;
  for (int i = 0; i < 3; ++i) {
    callers.emplace_back([&, i] {
      v1::TokenizeRequest request;
      request.set_text(std::string(300 << 10, static_cast<char>('a' + i)));
      v1::TokenizeResponse response;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      statuses[i] = stub->Tokenize(&ctx, request, &response);
      token_counts[i] = response.token_ids_size();
    });
  }
  for (std::thread& t : callers) t.join();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_message();
    EXPECT_GT(token_counts[i], 0) << i;
  }
  Generation after = RunGenerate(d->stub(), GreedyRequest("after the big ones", 3),
                                 absl::Seconds(20));
  EXPECT_TRUE(after.status.ok()) << after.status.error_message() << d->Log();
  EXPECT_EQ(after.final.usage().completion_tokens(), 3u);
  EXPECT_NE(d->HttpGet("/metrics").find("sluice_worker_up 1"), std::string::npos);
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

pid_t OnlyChild(pid_t parent) {
  std::vector<pid_t> children = ChildrenOf(parent);
  return children.size() == 1 ? children[0] : -1;
}

// A LoadModel of `path` running on its own thread from construction.
struct LoadCall {
  LoadCall(Daemon& d, const std::string& path)
      : thread([this, &d, path] {
          grpc::ClientContext ctx;
          ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
          v1::LoadModelRequest request;
          request.set_path(path);
          status = d.stub().LoadModel(&ctx, request, &response);
          done = true;
        }) {}
  grpc::Status Finish() {
    thread.join();
    return status;
  }

  std::atomic<bool> done{false};
  grpc::Status status;
  v1::LoadModelResponse response;
  std::thread thread;  // last: starts once the fields above exist
};

// Generates "the old model" greedily, one request after another, until
// `load` returns; the results in order.
std::vector<Generation> GenerateWhileLoading(Daemon& d, LoadCall& load) {
  std::vector<Generation> results;
  while (!load.done) {
    results.push_back(RunGenerate(d.stub(), GreedyRequest("the old model", 4)));
  }
  return results;
}

// How many of `results` are the old model's (`old_tokens`). They must come
// first; after them only the one request cut at the switch (`switch_error`,
// UNAVAILABLE) and requests served by the new model (`new_tokens`) may
// follow. With empty `switch_error` every result must be the old model's.
int OldModelServed(const std::vector<Generation>& results,
                   const std::vector<int32_t>& old_tokens, const std::string& switch_error,
                   const std::vector<int32_t>& new_tokens) {
  size_t i = 0;
  while (i < results.size() && results[i].status.ok() && results[i].token_ids == old_tokens) ++i;
  const int old_served = static_cast<int>(i);
  if (i < results.size() && !switch_error.empty() && !results[i].status.ok()) {
    EXPECT_EQ(results[i].status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(results[i].status.error_message(), switch_error);
    ++i;
  }
  for (; i < results.size(); ++i) {
    EXPECT_TRUE(results[i].status.ok() && !switch_error.empty() &&
                results[i].token_ids == new_tokens)
        << "request " << i << " of " << results.size() << ": "
        << results[i].status.error_message();
  }
  return old_served;
}

// Issue 11 defect 3: a SIGSTOPped worker used to go unnoticed, health staying
// SERVING and requests hanging forever.
TEST(E2eRobustTest, StoppedWorkerIsKilledAsHungAndRestarted) {
  auto d = StartDaemon({"--worker_hung_timeout_s=1"}, {"--test_step_delay_ms=5"});
  ASSERT_NE(d, nullptr);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  auto reader = d->stub().Generate(&ctx, GreedyRequest("a long story", 2000));
  v1::GenerateResponse resp;
  ASSERT_TRUE(reader->Read(&resp)) << d->Log();
  const pid_t worker = OnlyChild(d->pid());
  ASSERT_GT(worker, 0);
  const absl::Time stopped = absl::Now();
  ASSERT_EQ(kill(worker, SIGSTOP), 0);
  while (reader->Read(&resp)) {
  }
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(status.error_message().find(absl::StrCat("worker (pid ", worker, ") was hung (")),
            std::string::npos)
      << status.error_message();
  EXPECT_LT(absl::Now() - stopped, absl::Seconds(10));
  // A Tokenize without a deadline is served by the restarted worker.
  ASSERT_TRUE(d->WaitForHealth("SERVING", absl::Seconds(20))) << d->Log();
  v1::TokenizeRequest tok;
  tok.set_text("hello");
  v1::TokenizeResponse tokenized;
  grpc::ClientContext tctx;
  EXPECT_TRUE(d->stub().Tokenize(&tctx, tok, &tokenized).ok());
  EXPECT_GT(tokenized.token_ids_size(), 0);
  EXPECT_NE(OnlyChild(d->pid()), worker);
  const std::string metrics = d->HttpGet("/metrics");
  EXPECT_NE(metrics.find("sluice_worker_restarts_total{reason=\"hung\"} 1\n"), std::string::npos)
      << metrics;
  const std::string log = d->Log();
  EXPECT_NE(log.find("is hung: "), std::string::npos) << log;
  // The death is logged once, with its cause.
  const std::string death = absl::StrCat("sluiced: worker (pid ", worker, ") was hung (");
  const size_t first = log.find(death);
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(death, first + 1), std::string::npos) << log;
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

// An idle worker heartbeats, so a short hung timeout does not kill it.
TEST(E2eRobustTest, IdleWorkerIsNotMistakenForAHungOne) {
  auto d = StartDaemon({"--worker_hung_timeout_s=1"});
  ASSERT_NE(d, nullptr);
  const pid_t worker = OnlyChild(d->pid());
  absl::SleepFor(absl::Milliseconds(2500));
  EXPECT_EQ(OnlyChild(d->pid()), worker);
  Generation g = RunGenerate(d->stub(), GreedyRequest("still here", 2));
  EXPECT_TRUE(g.status.ok()) << g.status.error_message();
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

// Issue 11 defect 5: gRPC (and httplib) set SO_REUSEPORT, so a second daemon
// shared a busy port instead of failing.
TEST(E2eRobustTest, SecondDaemonOnABusyPortExitsOne) {
  auto d = StartDaemon({});
  ASSERT_NE(d, nullptr);
  const std::string sluiced = RunfilePath("daemon/sluiced");
  const std::string worker = "--worker_binary=" + RunfilePath("worker/sluice-worker");
  CommandResult grpc_clash = RunCommand(
      {sluiced, "--grpc_address=" + d->address(), "--metrics_address=none", worker}, {},
      "/dev/null", absl::Seconds(30));
  EXPECT_EQ(grpc_clash.exit_code, 1) << grpc_clash.err;
  EXPECT_NE(grpc_clash.err.find("fatal: cannot listen on --grpc_address=" + d->address()),
            std::string::npos)
      << grpc_clash.err;
  const std::string metrics = absl::StrCat("127.0.0.1:", d->metrics_port());
  CommandResult metrics_clash = RunCommand(
      {sluiced, "--grpc_address=127.0.0.1:0", "--metrics_address=" + metrics, worker}, {},
      "/dev/null", absl::Seconds(30));
  EXPECT_EQ(metrics_clash.exit_code, 1) << metrics_clash.err;
  EXPECT_NE(metrics_clash.err.find("fatal: cannot listen on --metrics_address=" + metrics),
            std::string::npos)
      << metrics_clash.err;
  EXPECT_EQ(d->Health(), "SERVING");
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

// Issue 11 defect 9: eight slow connections starved /metrics.
TEST(E2eRobustTest, SlowMetricsClientsDoNotStarveOthers) {
  auto d = StartDaemon({});
  ASSERT_NE(d, nullptr);
  std::vector<int> slow;
  for (int i = 0; i < 16; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(d->metrics_port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(write(fd, "GET /metr", 9), 9);  // and never the rest
    slow.push_back(fd);
  }
  const absl::Time start = absl::Now();
  const std::string body = d->HttpGet("/metrics");
  EXPECT_NE(body.find("sluice_worker_up 1"), std::string::npos) << body;
  // The old server's 8 threads were all held until its 5 s read timeout.
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  for (int fd : slow) close(fd);
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

// Issue 11 defect 6: LoadModel read any path: it leaked the first bytes of
// /etc/shadow, blocked on a FIFO and accepted a NUL byte.
TEST(E2eRobustTest, LoadModelIsConfinedToTheModelDirectories) {
  auto d = StartDaemon({});
  ASSERT_NE(d, nullptr);
  auto load = [&](const std::string& path) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    v1::LoadModelRequest request;
    request.set_path(path);
    v1::LoadModelResponse response;
    return d->stub().LoadModel(&ctx, request, &response);
  };
  const grpc::Status shadow = load("/etc/shadow");
  EXPECT_EQ(shadow.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(shadow.error_message(),
            "LoadModel path='/etc/shadow': not a model file inside a --model_dir");
  EXPECT_EQ(load("/nonexistent/x.gguf").error_message(),
            "LoadModel path='/nonexistent/x.gguf': not a model file inside a --model_dir");
  const std::string dir = MakeTempDir("e2e-robust-fifo");
  ASSERT_EQ(mkfifo((dir + "/model.gguf").c_str(), 0644), 0);
  const absl::Time start = absl::Now();
  const grpc::Status fifo = load(dir + "/model.gguf");
  EXPECT_EQ(fifo.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(fifo.error_message().find("': not a regular file"), std::string::npos)
      << fifo.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  const grpc::Status nul = load(std::string("/tmp/a\0b", 8));
  EXPECT_EQ(nul.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(nul.error_message(), "LoadModel: path contains a NUL byte");
  // A text file inside: refused without quoting its bytes.
  std::ofstream(dir + "/secret.gguf") << "root:$6$saltsaltsalt$hash";
  const grpc::Status text = load(dir + "/secret.gguf");
  EXPECT_EQ(text.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(text.error_message().find("saltsalt"), std::string::npos) << text.error_message();
  EXPECT_EQ(text.error_message().find("0x746f6f72"), std::string::npos) << text.error_message();
  // The loaded model still serves.
  EXPECT_TRUE(RunGenerate(d->stub(), GreedyRequest("still serving", 2)).status.ok());
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

// Issue 11 defect 9: a replacement LoadModel whose worker fails to start used
// to leave no model loaded. The new worker now starts beside the serving one
// (a CPU worker whose model fits the host's available memory): the old model
// answers throughout the failed load with its single-client tokens, its
// worker is never stopped, and the error says so with the worker's own reason.
TEST(E2eRobustTest, FailedReplacementLoadLeavesTheOldModelServing) {
  auto d = StartDaemon({}, {"--test_start_delay_ms=1500"});
  ASSERT_NE(d, nullptr);
  const pid_t worker = OnlyChild(d->pid());
  ASSERT_GT(worker, 0);
  const Generation single = RunGenerate(d->stub(), GreedyRequest("the old model", 4));
  ASSERT_TRUE(single.status.ok()) << single.status.error_message();
  const std::string dir = MakeTempDir("e2e-robust-replace");
  auto good = WriteMicroModel(dir);
  ASSERT_TRUE(good.ok());
  std::ifstream in(*good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find("qwen35moe");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 9, "qwen99moe");
  const std::string bad = dir + "/unknown-arch.gguf";
  std::ofstream(bad, std::ios::binary) << bytes;

  LoadCall load(*d, bad);
  const std::vector<Generation> during = GenerateWhileLoading(*d, load);
  const grpc::Status s = load.Finish();
  // Every request during the load (1.5 s or more) got the old model's tokens.
  EXPECT_EQ(OldModelServed(during, single.token_ids, "", {}), static_cast<int>(during.size()));
  EXPECT_GE(during.size(), 2u);
  EXPECT_FALSE(s.ok());
  // Issue 20: the field and the rule, not the file's bytes.
  EXPECT_NE(s.error_message().find("general.architecture = \"(withheld)\" is not supported"),
            std::string::npos)
      << s.error_message();
  EXPECT_EQ(s.error_message().find("qwen99moe"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("; the previous model 'micro-qwen35moe' kept serving (the "
                                   "new worker started beside it)"),
            std::string::npos)
      << s.error_message();
  EXPECT_EQ(d->Health(), "SERVING");
  EXPECT_EQ(OnlyChild(d->pid()), worker);
  Generation after = RunGenerate(d->stub(), GreedyRequest("the old model", 4));
  EXPECT_EQ(after.token_ids, single.token_ids);
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

// A replacement that succeeds: the old model serves (single-client tokens)
// until the new one is ready, then the new one serves.
TEST(E2eRobustTest, ReplacementLoadServesTheOldModelUntilTheNewOneIsReady) {
  auto d = StartDaemon({}, {"--test_start_delay_ms=1500"});
  ASSERT_NE(d, nullptr);
  const pid_t worker = OnlyChild(d->pid());
  const Generation single = RunGenerate(d->stub(), GreedyRequest("the old model", 4));
  ASSERT_TRUE(single.status.ok()) << single.status.error_message();
  auto tiny = WriteTinyModel(MakeTempDir("e2e-robust-replace-ok"));
  ASSERT_TRUE(tiny.ok()) << tiny.status();

  LoadCall load(*d, *tiny);
  const std::vector<Generation> during = GenerateWhileLoading(*d, load);
  const grpc::Status s = load.Finish();
  ASSERT_TRUE(s.ok()) << s.error_message() << d->Log();
  EXPECT_EQ(load.response.model().model_id(), "tiny-qwen35moe");
  EXPECT_EQ(load.response.replacement(),
            "the previous model 'micro-qwen35moe' served until 'tiny-qwen35moe' was ready");
  const pid_t replaced = OnlyChild(d->pid());
  EXPECT_NE(replaced, worker);
  EXPECT_GT(replaced, 0);
  Generation after = RunGenerate(d->stub(), GreedyRequest("the old model", 4));
  ASSERT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(after.final.usage().completion_tokens(), 4u);
  EXPECT_NE(after.token_ids, single.token_ids);  // another model, other weights
  // The old model served the requests during the load (1.5 s or more); then
  // at most one was cut at the switch, and the rest had the new model's tokens.
  EXPECT_GE(OldModelServed(during, single.token_ids,
                           "model 'micro-qwen35moe' was replaced by 'tiny-qwen35moe'",
                           after.token_ids),
            2);
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

// Issue 11 defect 10: the production worker honoured test hooks from the
// environment it inherited from sluiced. It now gets a clean environment and
// has no hooks.
TEST(E2eRobustTest, ProductionWorkerHasACleanEnvironmentAndNoTestHooks) {
  auto d = StartDaemon({}, {},
                       {{"SLUICE_WORKER_TEST_HOOKS", "1"}, {"SLUICE_SECRET_FOR_TEST", "s3cret"},
                        {"TZ", "UTC"}});
  ASSERT_NE(d, nullptr);
  const pid_t worker = OnlyChild(d->pid());
  ASSERT_GT(worker, 0);
  std::ifstream in(absl::StrCat("/proc/", worker, "/environ"), std::ios::binary);
  std::string environ((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(environ.rfind(std::string("PATH=/usr/local/bin:/usr/bin:/bin\0", 34), 0), 0u)
      << environ;
  EXPECT_NE(environ.find(std::string("\0TZ=UTC\0", 8)), std::string::npos) << environ;
  EXPECT_EQ(environ.find("SLUICE_"), std::string::npos) << environ;
  EXPECT_EQ(environ.find("TEST_"), std::string::npos) << environ;
  // The hog prompt of the test worker is just a prompt to the production one.
  Generation g = RunGenerate(d->stub(), GreedyRequest(worker::kHogMemoryPrompt, 2));
  EXPECT_TRUE(g.status.ok()) << g.status.error_message();
  EXPECT_EQ(OnlyChild(d->pid()), worker);
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

}  // namespace
}  // namespace sluice::testing
