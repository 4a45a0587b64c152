// End-to-end: API keys (--api_keys_file). Every RPC without a valid key is
// refused and counted, admin-only RPCs are refused for a generate key,
// health stays open, and the clients send keys from --api_key_file.
#include <unistd.h>

#include <climits>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/api_keys.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

class E2eKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("e2e-keys");
    auto path = WriteMicroModel(dir_);
    ASSERT_TRUE(path.ok()) << path.status();
    model_ = *path;
    std::ofstream(dir_ + "/keys") << "# test keys\n"
                                  << daemon::Sha256Hex("gen-key") << " generate\n"
                                  << daemon::Sha256Hex("admin-key") << " admin\n";
    std::ofstream(dir_ + "/gen.key") << "gen-key\n";
    DaemonOptions options;
    options.model_path = model_;
    options.flags = {"--api_keys_file=" + dir_ + "/keys"};
    auto d = Daemon::Start(options);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  // Calls every RPC of sluice.v1.Sluice with `key` (none when empty) and
  // returns their status codes in a fixed order.
  std::vector<grpc::StatusCode> CallEverything(const std::string& key) {
    v1::Sluice::Stub& stub = daemon_->stub();
    std::vector<grpc::StatusCode> codes;
    auto ctx = [&](grpc::ClientContext* c) {
      c->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
      if (!key.empty()) c->AddMetadata("authorization", "Bearer " + key);
    };
    {
      grpc::ClientContext c;
      ctx(&c);
      v1::ListModelsResponse r;
      codes.push_back(stub.ListModels(&c, v1::ListModelsRequest(), &r).error_code());
    }
    {
      grpc::ClientContext c;
      ctx(&c);
      v1::TokenizeRequest req;
      req.set_text("hello");
      v1::TokenizeResponse r;
      codes.push_back(stub.Tokenize(&c, req, &r).error_code());
    }
    {
      grpc::ClientContext c;
      ctx(&c);
      v1::GetMetricsResponse r;
      codes.push_back(stub.GetMetrics(&c, v1::GetMetricsRequest(), &r).error_code());
    }
    {
      grpc::ClientContext c;
      ctx(&c);
      auto reader = stub.Generate(&c, GreedyRequest("hi", 2));
      v1::GenerateResponse r;
      while (reader->Read(&r)) {
      }
      codes.push_back(reader->Finish().error_code());
    }
    {
      grpc::ClientContext c;
      ctx(&c);
      v1::LoadModelRequest req;
      req.set_path(model_);
      v1::LoadModelResponse r;
      codes.push_back(stub.LoadModel(&c, req, &r).error_code());
    }
    {
      // A model id that is not loaded: with the right key this is NOT_FOUND,
      // so the model stays loaded for later calls.
      grpc::ClientContext c;
      ctx(&c);
      v1::UnloadModelRequest req;
      req.set_model_id("not-loaded");
      v1::UnloadModelResponse r;
      codes.push_back(stub.UnloadModel(&c, req, &r).error_code());
    }
    return codes;
  }

  std::string dir_, model_;
  std::unique_ptr<Daemon> daemon_;
};

using C = grpc::StatusCode;

TEST_F(E2eKeysTest, EveryRpcWithoutAValidKeyIsRefusedAndCounted) {
  EXPECT_EQ(CallEverything(""), std::vector<C>(6, C::UNAUTHENTICATED));
  EXPECT_EQ(CallEverything("wrong-key"), std::vector<C>(6, C::UNAUTHENTICATED));
  EXPECT_EQ(CallEverything("gen-key"),
            (std::vector<C>{C::OK, C::OK, C::OK, C::OK, C::PERMISSION_DENIED,
                            C::PERMISSION_DENIED}));
  EXPECT_EQ(CallEverything("admin-key"),
            (std::vector<C>{C::OK, C::OK, C::OK, C::OK, C::OK, C::NOT_FOUND}));
  EXPECT_EQ(daemon_->Health(), "SERVING");  // health needs no key
  const std::string metrics = daemon_->HttpGet("/metrics");
  EXPECT_NE(metrics.find("sluice_auth_failures_total{code=\"unauthenticated\"} 12\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_auth_failures_total{code=\"permission_denied\"} 2\n"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(daemon_->Stop(), 0) << daemon_->Log();
}

// The OpenAI-compatible HTTP port checks the same keys: 401 in OpenAI's
// error shape without a valid key, the completion with one; counted too.
TEST_F(E2eKeysTest, HttpApiChecksTheSameKeys) {
  const std::string url =
      absl::StrCat("http://127.0.0.1:", daemon_->http_port(), "/v1/completions");
  const std::string body = R"({"prompt": "hi", "max_tokens": 2, "temperature": 0})";
  auto post = [&](const std::string& key) {
    std::vector<std::string> argv = {"/usr/bin/curl", "-sS", "-w", "\n%{http_code}",
                                     "-H", "Content-Type: application/json",
                                     "-d", body, url};
    if (!key.empty()) {
      argv.insert(argv.begin() + 2, {"-H", "Authorization: Bearer " + key});
    }
    return RunCommand(argv, {}, "/dev/null", absl::Seconds(30));
  };
  CommandResult none = post("");
  EXPECT_NE(none.out.find("\n401"), std::string::npos) << none.out << none.err;
  EXPECT_NE(none.out.find("\"error\""), std::string::npos) << none.out;
  EXPECT_EQ(none.out.find("gen-key"), std::string::npos);
  CommandResult wrong = post("wrong-key");
  EXPECT_NE(wrong.out.find("\n401"), std::string::npos) << wrong.out;
  CommandResult ok = post("gen-key");
  EXPECT_NE(ok.out.find("\n200"), std::string::npos) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("\"text_completion\""), std::string::npos) << ok.out;
  const std::string metrics = daemon_->HttpGet("/metrics");
  EXPECT_NE(metrics.find("sluice_auth_failures_total{code=\"unauthenticated\"} 2\n"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(daemon_->Stop(), 0) << daemon_->Log();
}

// The official openai npm client (tests/openai) with the keys on.
TEST_F(E2eKeysTest, OfficialOpenAiClientSendsItsKey) {
  char real[PATH_MAX];
  const std::string script = RunfilePath("tests/openai/openai_keys_test.mjs");
  ASSERT_NE(realpath(script.c_str(), real), nullptr) << script;
  const std::string dir = std::string(real).substr(0, std::string(real).rfind('/'));
  ASSERT_EQ(access((dir + "/node_modules/openai/package.json").c_str(), R_OK), 0)
      << "run tests/openai/install.sh (make test and tests/run_all.sh do)";
  const std::string node = FindOnPath("node");
  ASSERT_FALSE(node.empty()) << "node is not on PATH (make deps installs nodejs)";
  CommandResult r = RunCommand(
      {node, "--test-reporter=tap", real},
      {{"SLUICE_HTTP_BASE", absl::StrCat("http://127.0.0.1:", daemon_->http_port(), "/v1")},
       {"SLUICE_API_KEY", "gen-key"}},
      "/dev/null", absl::Seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << daemon_->Log();
  EXPECT_NE(r.out.find("\n# pass 2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n# fail 0\n"), std::string::npos) << r.out;
  EXPECT_EQ(daemon_->Stop(), 0) << daemon_->Log();
}

TEST_F(E2eKeysTest, RefusalsNameTheProblemWithoutEchoingTheKey) {
  grpc::ClientContext c;
  c.AddMetadata("authorization", "Bearer secret-guess-123");
  v1::ListModelsResponse r;
  const grpc::Status s = daemon_->stub().ListModels(&c, v1::ListModelsRequest(), &r);
  EXPECT_EQ(s.error_code(), C::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(), "invalid API key");
  grpc::ClientContext c2;
  c2.AddMetadata("authorization", "Bearer gen-key");
  v1::LoadModelRequest req;
  req.set_path(model_);
  v1::LoadModelResponse lr;
  const grpc::Status denied = daemon_->stub().LoadModel(&c2, req, &lr);
  EXPECT_EQ(denied.error_code(), C::PERMISSION_DENIED);
  EXPECT_EQ(denied.error_message(), "this call needs an admin API key");
}

TEST_F(E2eKeysTest, ClientsSendTheKeyFromApiKeyFile) {
  const std::string ctl = RunfilePath("clients/sluicectl");
  CommandResult without = RunCommand({ctl, "--addr=" + daemon_->address(), "models"});
  EXPECT_EQ(without.exit_code, 1);
  EXPECT_NE(without.err.find("UNAUTHENTICATED"), std::string::npos) << without.err;
  CommandResult with = RunCommand({ctl, "--addr=" + daemon_->address(),
                                   "--api_key_file=" + dir_ + "/gen.key", "models"});
  EXPECT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(with.out.rfind("micro-qwen35moe\t", 0), 0u) << with.out;
  CommandResult py = RunCommand({"/usr/bin/python3", RunfilePath("clients/python/sluice_client.py"),
                                 "--addr", daemon_->address(), "--api_key_file",
                                 dir_ + "/gen.key", "models"},
                                {{"PYTHONDONTWRITEBYTECODE", "1"}});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  EXPECT_EQ(py.out.rfind("micro-qwen35moe ", 0), 0u) << py.out << py.err;
  CommandResult py_without =
      RunCommand({"/usr/bin/python3", RunfilePath("clients/python/sluice_client.py"), "--addr",
                  daemon_->address(), "models"},
                 {{"PYTHONDONTWRITEBYTECODE", "1"}});
  EXPECT_EQ(py_without.exit_code, 1);
  EXPECT_NE(py_without.err.find("UNAUTHENTICATED"), std::string::npos) << py_without.err;
}

TEST(E2eKeysStartTest, NonLoopbackPlaintextOrKeylessRefusesToStart) {
  CommandResult r = RunCommand({RunfilePath("daemon/sluiced"),
                                "--worker_binary=" + RunfilePath("worker/sluice-worker"),
                                "--grpc_address=0.0.0.0:0", "--metrics_address=none"},
                               {}, "/dev/null", absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--grpc_address='0.0.0.0:0' is reachable from other hosts but has no TLS"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--insecure"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sluice::testing
