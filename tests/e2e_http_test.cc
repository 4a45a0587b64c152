// End-to-end: the OpenAI-compatible HTTP API of sluiced. The official openai
// npm client (tests/openai, installed by tests/openai/install.sh) runs its
// requests against the daemon and compares texts with the gRPC API's for the
// same seeds; curl checks the SSE framing, error statuses and that a client
// leaving mid-stream frees the worker. The worker runs with the test-only
// step delay so that streams last long enough to be interrupted.
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/testing/skip.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

using Json = nlohmann::json;
constexpr char kModel[] = "micro-qwen35moe";

// sluiced serving the micro model (context 4,096) with `flags`, its worker
// taking at least `step_delay_ms` a step (the worker's test flag).
absl::StatusOr<std::unique_ptr<Daemon>> StartMicroDaemon(const std::string& dir_name,
                                                         std::vector<std::string> flags,
                                                         int step_delay_ms) {
  auto path = WriteMicroModel(MakeTempDir(dir_name));
  if (!path.ok()) return path.status();
  DaemonOptions options;
  options.model_path = *path;
  options.context_length = 4096;
  options.flags = std::move(flags);
  options.worker_test_flags = {absl::StrCat("--test_step_delay_ms=", step_delay_ms)};
  return Daemon::Start(options);
}

class E2eHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One generation at a time, so that one waits behind it.
    auto d = StartMicroDaemon("e2e-http", {"--queue_limit=1", "--max_sequences=1"}, 5);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    if (daemon_ == nullptr) return;  // SetUpTestSuite failed and said why
    const std::string log = daemon_->Log();
    EXPECT_EQ(daemon_->Stop(), 0) << log;
    delete daemon_;
  }

  static std::string Url(const std::string& path) {
    return absl::StrCat("http://127.0.0.1:", daemon_->http_port(), path);
  }

  // curl -sS with `args`; a JSON `body` is POSTed.
  static CommandResult Curl(std::vector<std::string> args, const std::string& body = "",
                            absl::Duration timeout = absl::Seconds(60)) {
    args.insert(args.begin(), {"/usr/bin/curl", "-sS"});
    if (!body.empty()) {
      args.insert(args.end(), {"-H", "Content-Type: application/json", "--data-raw", body});
    }
    return RunCommand(args, {}, "/dev/null", timeout);
  }

  // The value of an unlabelled or fully labelled sample on /metrics, or -1.
  static double Metric(const std::string& sample) {
    return MetricSample(daemon_->HttpGet("/metrics"), sample);
  }

  // Polls Metric(sample) until it equals `want`; false after `timeout`.
  static bool WaitForMetric(const std::string& sample, double want, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (Metric(sample) != want) {
      if (absl::Now() >= deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }

  static Generation Grpc(const v1::GenerateRequest& request) {
    Generation g = RunGenerate(daemon_->stub(), request);
    EXPECT_TRUE(g.status.ok()) << g.status.error_message();
    return g;
  }

  static Daemon* daemon_;
};

Daemon* E2eHttpTest::daemon_ = nullptr;

v1::GenerateRequest ChatRequest(int max_tokens) {
  v1::GenerateRequest r;
  auto* chat = r.mutable_chat();
  auto* system = chat->add_messages();
  system->set_role("system");
  system->set_content("Be brief.");
  auto* user = chat->add_messages();
  user->set_role("user");
  user->set_content("Hello!");
  r.set_max_tokens(max_tokens);
  r.set_ignore_eos(true);
  r.mutable_sampling()->set_temperature(0);
  return r;
}

TEST_F(E2eHttpTest, OfficialOpenAiClientMatchesTheGrpcApi) {
  char real[PATH_MAX];
  const std::string script = RunfilePath("tests/openai/openai_test.mjs");
  ASSERT_NE(realpath(script.c_str(), real), nullptr) << script;
  const std::string dir = std::string(real).substr(0, std::string(real).rfind('/'));
  ASSERT_EQ(access((dir + "/node_modules/openai/package.json").c_str(), R_OK), 0)
      << "the openai npm package is not installed in " << dir
      << "/node_modules; run tests/openai/install.sh (make test and tests/run_all.sh do)";
  const std::string node = FindOnPath("node");
  ASSERT_FALSE(node.empty()) << "node is not on PATH (make deps installs nodejs)";

  // What the gRPC API answers to the requests the script makes.
  Generation greedy = Grpc(ChatRequest(8));
  v1::GenerateRequest seeded = ChatRequest(24);
  seeded.mutable_sampling()->set_temperature(0.8f);
  seeded.mutable_sampling()->set_seed(7);
  Generation stream = Grpc(seeded);
  Generation completion = Grpc(GreedyRequest("The sluice gate", 6));
  ASSERT_EQ(stream.final.usage().completion_tokens(), 24u);
  const std::string expect_path = MakeTempDir("openai-node") + "/expected.json";
  std::ofstream(expect_path) << Json{
      {"model", kModel},
      {"chat_greedy_text", greedy.text},
      {"chat_prompt_tokens", greedy.final.usage().prompt_tokens()},
      {"chat_stream_text", stream.text},
      {"completion_text", completion.text}}.dump();

  CommandResult r = RunCommand(
      {node, "--test-reporter=tap", real},
      {{"SLUICE_HTTP_BASE", Url("/v1")}, {"SLUICE_EXPECT", expect_path}}, "/dev/null",
      absl::Seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << daemon_->Log();
  EXPECT_NE(r.out.find("\n# pass 10\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n# fail 0\n"), std::string::npos) << r.out;
}

// The Vercel AI SDK and LangChain JS (tests/openai/frameworks_test.mjs):
// tools, structured outputs and the Responses API as frameworks send them.
TEST_F(E2eHttpTest, AgentFrameworksGetValidToolCallsAndObjects) {
  char real[PATH_MAX];
  const std::string script = RunfilePath("tests/openai/frameworks_test.mjs");
  ASSERT_NE(realpath(script.c_str(), real), nullptr) << script;
  const std::string dir = std::string(real).substr(0, std::string(real).rfind('/'));
  for (const char* package : {"ai", "@ai-sdk/openai", "@langchain/openai", "zod"}) {
    ASSERT_EQ(access((dir + "/node_modules/" + package + "/package.json").c_str(), R_OK), 0)
        << package << " is not installed in " << dir
        << "/node_modules; run tests/openai/install.sh (make test and tests/run_all.sh do)";
  }
  const std::string node = FindOnPath("node");
  ASSERT_FALSE(node.empty()) << "node is not on PATH (make deps installs nodejs)";
  CommandResult r = RunCommand({node, "--test-reporter=tap", real},
                               {{"SLUICE_HTTP_BASE", Url("/v1")}, {"SLUICE_MODEL", kModel}},
                               "/dev/null", absl::Seconds(180));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << daemon_->Log();
  EXPECT_NE(r.out.find("\n# pass 5\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n# fail 0\n"), std::string::npos) << r.out;
}

// Each event is "data: {json}\n\n"; the last is "data: [DONE]".
TEST_F(E2eHttpTest, CurlSeesServerSentEventsFraming) {
  const std::string headers = MakeTempDir("sse") + "/headers";
  CommandResult r = Curl(
      {"-N", "-D", headers, Url("/v1/chat/completions")},
      absl::StrCat(R"({"model": ")", kModel, R"(", "messages": [{"role": "system", "content":
          "Be brief."}, {"role": "user", "content": "Hello!"}], "max_tokens": 4,
          "temperature": 0, "ignore_eos": true, "stream": true,
          "stream_options": {"include_usage": true}})"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(headers);
  const std::string head((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Type: text/event-stream\r\n"), std::string::npos) << head;
  ASSERT_GE(r.out.size(), 2u);
  EXPECT_EQ(r.out.substr(r.out.size() - 2), "\n\n");
  std::vector<std::string> events = absl::StrSplit(r.out, "\n\n", absl::SkipEmpty());
  ASSERT_GE(events.size(), 4u) << r.out;
  EXPECT_EQ(events.back(), "data: [DONE]");
  std::string text;
  Json final, usage;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_EQ(events[i].rfind("data: {", 0), 0u) << events[i];
    ASSERT_EQ(events[i].find('\n'), std::string::npos) << events[i];
    Json chunk = Json::parse(events[i].substr(6));
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    if (i == 0) {
      EXPECT_EQ(chunk["choices"][0]["delta"]["role"], "assistant");
    }
    if (chunk["choices"].empty()) {
      usage = chunk["usage"];
      continue;
    }
    text += chunk["choices"][0]["delta"].value("content", "");
    if (!chunk["choices"][0]["finish_reason"].is_null()) final = chunk;
  }
  EXPECT_EQ(final["choices"][0]["finish_reason"], "length") << r.out;
  EXPECT_TRUE(final["sluice"]["timings"].contains("decode_ms")) << final;
  EXPECT_EQ(usage["completion_tokens"], 4) << r.out;
  EXPECT_EQ(text, Grpc(ChatRequest(4)).text);
}

TEST_F(E2eHttpTest, ClientLeavingMidStreamFreesTheWorker) {
  const double cancelled_before = Metric("sluice_requests_total{outcome=\"cancelled\"}");
  // 2000 tokens at >= 5 ms each would take >= 10 s; curl leaves after 2 s.
  CommandResult r = Curl({"-N", "--max-time", "2", Url("/v1/completions")},
                         R"({"prompt": "leave me", "max_tokens": 2000, "temperature": 0,
                             "ignore_eos": true, "stream": true})");
  EXPECT_EQ(r.exit_code, 28) << r.err;  // curl: operation timed out
  EXPECT_EQ(r.out.rfind("data: {", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("[DONE]"), std::string::npos);
  const absl::Time left = absl::Now();
  EXPECT_TRUE(WaitForMetric("sluice_requests_total{outcome=\"cancelled\"}", cancelled_before + 1,
                            absl::Seconds(3)));
  EXPECT_TRUE(WaitForMetric("sluice_requests_running", 0, absl::Seconds(1)));
  std::cout << "the generation ended " << absl::FormatDuration(absl::Now() - left)
            << " after curl left (metrics polled every 10 ms)" << std::endl;
  CommandResult next = Curl({"-w", "\n%{http_code}", Url("/v1/completions")},
                            R"({"prompt": "next", "max_tokens": 2, "ignore_eos": true})");
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_NE(next.out.find("\"finish_reason\":\"length\""), std::string::npos) << next.out;
  EXPECT_EQ(next.out.substr(next.out.size() - 3), "200");
  EXPECT_LT(absl::Now() - left, absl::Seconds(5));
}

// Without a stream nothing is written until the end, so only the poll of the
// client's socket can notice it leaving.
TEST_F(E2eHttpTest, ClientLeavingAWaitingNonStreamedRequestCancelsIt) {
  const double cancelled_before = Metric("sluice_requests_total{outcome=\"cancelled\"}");
  CommandResult r = Curl({"--max-time", "1", Url("/v1/completions")},
                         R"({"prompt": "leave me", "max_tokens": 2000, "ignore_eos": true})");
  EXPECT_EQ(r.exit_code, 28) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(WaitForMetric("sluice_requests_total{outcome=\"cancelled\"}", cancelled_before + 1,
                            absl::Seconds(3)));
  EXPECT_TRUE(WaitForMetric("sluice_requests_running", 0, absl::Seconds(1)));
}

TEST_F(E2eHttpTest, ErrorsHaveOpenAiShapesAndStatuses) {
  auto status_of = [](const CommandResult& r) {
    return r.out.substr(r.out.rfind('\n') + 1);
  };
  auto error_of = [](const CommandResult& r) {
    return Json::parse(r.out.substr(0, r.out.rfind('\n')))["error"];
  };
  CommandResult unknown = Curl({"-w", "\n%{http_code}", Url("/v1/chat/completions")},
                               R"({"model": "nope", "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_EQ(status_of(unknown), "404") << unknown.out;
  EXPECT_EQ(error_of(unknown)["code"], "model_not_found");
  CommandResult role = Curl({"-w", "\n%{http_code}", Url("/v1/chat/completions")},
                            R"({"messages": [{"role": "robot", "content": "x"}], "stream": true})");
  EXPECT_EQ(status_of(role), "400") << role.out;
  EXPECT_NE(error_of(role)["message"].get<std::string>().find("role \"robot\""),
            std::string::npos);
  CommandResult health = Curl({"-w", "\n%{http_code}", Url("/health")});
  EXPECT_EQ(health.out, "{\"status\":\"ok\"}\n200");

  // queue_limit 1: one running, one waiting, the third is refused with 429.
  std::thread running([] {
    Curl({"-N", "--max-time", "4", Url("/v1/completions")},
         R"({"prompt": "a", "max_tokens": 2000, "ignore_eos": true, "stream": true})");
  });
  EXPECT_TRUE(WaitForMetric("sluice_requests_running", 1, absl::Seconds(10)));
  std::thread waiting([] {
    Curl({Url("/v1/completions")}, R"({"prompt": "b", "max_tokens": 2, "ignore_eos": true})");
  });
  EXPECT_TRUE(WaitForMetric("sluice_requests_waiting", 1, absl::Seconds(10)));
  CommandResult full = Curl({"-w", "\n%{http_code}", Url("/v1/completions")},
                            R"({"prompt": "c", "max_tokens": 2})");
  EXPECT_EQ(status_of(full), "429") << full.out;
  EXPECT_EQ(error_of(full)["type"], "rate_limit_error");
  EXPECT_NE(error_of(full)["message"].get<std::string>().find("request queue is full"),
            std::string::npos);
  running.join();
  waiting.join();
}

// --http_request_timeout_s: a generation past it ends in the worker, as a
// gRPC client's deadline ends one: 504 without a stream, an error event
// with one, and the worker is free at once; one within it is answered.
TEST(E2eHttpDeadlineTest, AGenerationPastTheRequestTimeoutEndsThere) {
  auto d = StartMicroDaemon("e2e-http-deadline",
                            {"--http_request_timeout_s=1", "--max_sequences=1"}, 10);
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string url = absl::StrCat("http://127.0.0.1:", (*d)->http_port(), "/v1/completions");
  auto post = [&url](const std::string& body) {
    return RunCommand({"/usr/bin/curl", "-sS", "-N", "--max-time", "30", "-w", "\n%{http_code}",
                       "-H", "Content-Type: application/json", "--data-raw", body, url});
  };
  // 1,000 tokens at >= 10 ms each would take >= 10 s.
  absl::Time t0 = absl::Now();
  CommandResult plain = post(R"({"prompt": "long", "max_tokens": 1000, "ignore_eos": true})");
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  const size_t nl = plain.out.rfind('\n');
  ASSERT_NE(nl, std::string::npos) << plain.out;
  EXPECT_EQ(plain.out.substr(nl + 1), "504") << plain.out;
  EXPECT_EQ(Json::parse(plain.out.substr(0, nl))["error"]["code"], "deadline_exceeded")
      << plain.out;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(6));
  t0 = absl::Now();
  CommandResult stream =
      post(R"({"prompt": "long", "max_tokens": 1000, "ignore_eos": true, "stream": true})");
  EXPECT_EQ(stream.exit_code, 0) << stream.err;
  EXPECT_EQ(stream.out.rfind("data: {", 0), 0u) << stream.out;  // tokens came first
  EXPECT_NE(stream.out.find("\"code\":\"deadline_exceeded\""), std::string::npos) << stream.out;
  EXPECT_EQ(stream.out.find("[DONE]"), std::string::npos) << stream.out;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(6));
  // Within the limit: answered whole (5 tokens, ~50 ms).
  CommandResult quick = post(R"({"prompt": "quick", "max_tokens": 5, "ignore_eos": true})");
  EXPECT_EQ(quick.exit_code, 0) << quick.err;
  EXPECT_NE(quick.out.find("\"finish_reason\":\"length\""), std::string::npos) << quick.out;
  EXPECT_EQ(quick.out.substr(quick.out.size() - 3), "200") << quick.out;
  EXPECT_EQ((*d)->Stop(), 0) << (*d)->Log();
}

// The HTTP port takes the gRPC port's TLS files: HTTPS with them, no
// plaintext beside it.
TEST(E2eHttpTlsTest, HttpsWithTheGrpcCertificateAndNoPlaintext) {
  if (access("/usr/bin/openssl", X_OK) != 0) SLUICE_SKIP("openssl is not installed");
  const std::string dir = MakeTempDir("e2e-http-tls");
  CommandResult gen = WriteSelfSignedCert(dir);
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  DaemonOptions options;
  options.flags = {"--tls_cert_file=" + dir + "/cert.pem", "--tls_key_file=" + dir + "/key.pem"};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string host = absl::StrCat("127.0.0.1:", (*d)->http_port());
  EXPECT_NE((*d)->Log().find("OpenAI-compatible HTTP API on https://127.0.0.1:"),
            std::string::npos)
      << (*d)->Log();
  // No model is loaded: the daemon answers, over TLS, that no worker is ready.
  CommandResult https = RunCommand({"/usr/bin/curl", "-sS", "--cacert", dir + "/cert.pem", "-w",
                                    "\n%{http_code}", "https://" + host + "/v1/models"});
  EXPECT_EQ(https.exit_code, 0) << https.err;
  EXPECT_EQ(https.out, "{\"object\":\"list\",\"data\":[]}\n200");
  CommandResult plain =
      RunCommand({"/usr/bin/curl", "-sS", "--max-time", "5", "http://" + host + "/v1/models"});
  EXPECT_NE(plain.exit_code, 0) << plain.out;
  EXPECT_EQ(plain.out, "");
  EXPECT_EQ((*d)->Stop(), 0);
}

}  // namespace
}  // namespace sluice::testing
