// End-to-end: a deepseek2 model (mkmodel's micro shape: multi-head latent
// attention, YaRN, a dense lead block, sigmoid group routing with the
// selection bias, a shared expert) served by sluiced's CPU worker over gRPC
// and the OpenAI HTTP API, its KV bytes per token as `sluicectl plan` and the
// engine report them.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/sluicectl.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "model/engine.h"
#include "model/testing/mkmodel.h"
#include "nlohmann/json.hpp"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

constexpr int kContext = 512;
constexpr char kModelId[] = "micro-deepseek2";

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

absl::StatusOr<std::string> WriteDeepseek2(const std::string& dir) {
  mkmodel::Options o;
  o.arch = mkmodel::Arch::kDeepseek2;
  auto shape = mkmodel::NamedShape(o.arch, "micro");
  if (!shape.ok()) return shape.status();
  o.shape = *shape;
  o.seed = 7;
  const std::string path = dir + "/" + kModelId + ".gguf";
  auto written = mkmodel::WriteModel(o, path);
  if (!written.ok()) return written.status();
  return path;
}

// (kv_lora_rank + rope dims) x blocks x sizeof(float) of mkmodel's micro.
uint64_t ExpectedKvBytesPerToken() {
  const mkmodel::ModelShape s = *mkmodel::NamedShape(mkmodel::Arch::kDeepseek2, "micro");
  return uint64_t{s.kv_lora_rank + s.rope_dims} * s.n_layer * sizeof(float);
}

class E2eDeepseek2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto path = WriteDeepseek2(MakeTempDir("e2e-deepseek2"));
    ASSERT_TRUE(path.ok()) << path.status();
    model_path_ = new std::string(*path);
    DaemonOptions options;
    options.model_path = *path;
    options.context_length = kContext;
    auto d = Daemon::Start(options);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    if (daemon_ != nullptr) {
      const std::string log = daemon_->Log();
      EXPECT_EQ(daemon_->Stop(), 0) << log;
    }
    delete daemon_;
    delete model_path_;
  }
  void SetUp() override { ASSERT_NE(daemon_, nullptr); }

  static std::string* model_path_;
  static Daemon* daemon_;
};

std::string* E2eDeepseek2Test::model_path_ = nullptr;
Daemon* E2eDeepseek2Test::daemon_ = nullptr;

// The worker's greedy tokens are the in-process engine's.
TEST_F(E2eDeepseek2Test, GeneratesOverGrpcAsTheEngineDoes) {
  grpc::ClientContext ctx;
  v1::ListModelsResponse models;
  ASSERT_TRUE(daemon_->stub().ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
  ASSERT_EQ(models.models_size(), 1);
  EXPECT_EQ(models.models(0).architecture(), "deepseek2");
  EXPECT_EQ(models.models(0).state(), v1::MODEL_STATE_READY);

  const Generation g = RunGenerate(daemon_->stub(), GreedyRequest("The license", 24));
  ASSERT_TRUE(g.status.ok()) << g.status.error_message() << daemon_->Log();
  ASSERT_TRUE(g.done);
  ASSERT_EQ(g.token_ids.size(), 24u);

  auto files = ModelFiles::Open(*model_path_);
  ASSERT_TRUE(files.ok()) << files.status();
  auto engine = Engine::Create(**files, EngineOptions{.threads = 1, .context_length = kContext});
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto session = (*engine)->NewSession();
  ASSERT_TRUE(session.ok()) << session.status();
  GenerateParams p;
  p.prompt = (*engine)->tokenizer().Encode("The license", false);
  p.max_tokens = 24;
  p.stop_at_eos = false;
  std::vector<int32_t> want;
  ASSERT_TRUE(Generate(**session, p, [&](int32_t id, std::string_view) {
                want.push_back(id);
                return true;
              }).ok());
  EXPECT_EQ(g.token_ids, want);
  // One latent row per token and block (the worker's session holds kContext).
  EXPECT_EQ((*engine)->SessionStateBytes(), ExpectedKvBytesPerToken() * kContext);
}

// The OpenAI completions endpoint gives the gRPC API's greedy text.
TEST_F(E2eDeepseek2Test, GeneratesOverTheOpenAiHttpApi) {
  const Generation g = RunGenerate(daemon_->stub(), GreedyRequest("Hello", 12));
  ASSERT_TRUE(g.status.ok()) << g.status.error_message();
  CommandResult r = RunCommand(
      {"/usr/bin/curl", "-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
       "--data-raw",
       absl::StrCat(R"({"model": ")", kModelId,
                    R"(", "prompt": "Hello", "max_tokens": 12, "temperature": 0,
                       "ignore_eos": true})"),
       absl::StrCat("http://127.0.0.1:", daemon_->http_port(), "/v1/completions")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t nl = r.out.rfind('\n');
  ASSERT_NE(nl, std::string::npos) << r.out;
  EXPECT_EQ(r.out.substr(nl + 1), "200") << r.out;
  const nlohmann::json body = nlohmann::json::parse(r.out.substr(0, nl), nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << r.out;
  EXPECT_EQ(body["model"], kModelId);
  EXPECT_EQ(body["choices"][0]["text"], g.text) << r.out;
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length") << r.out;
  EXPECT_EQ(body["usage"]["completion_tokens"], 12) << r.out;
}

// `sluicectl plan` reports the KV bytes per token: (kv_lora_rank + rope
// dims) x blocks x 4, one latent row per token, no per-head keys or values.
TEST_F(E2eDeepseek2Test, PlanReportsLatentKvBytesPerToken) {
  std::ostringstream out, err;
  ASSERT_EQ(ctl::Run({"plan", *model_path_, "--device_memory=8G", "--host_memory=16G",
                      "--context_length=512"},
                     out, err),
            0)
      << err.str();
  const uint64_t per_token = ExpectedKvBytesPerToken();
  ASSERT_EQ(per_token, (32u + 16) * 4 * 4);
  EXPECT_TRUE(Contains(out.str(), absl::StrCat("KV ", per_token, " B/token x 512")))
      << out.str();
  EXPECT_TRUE(Contains(out.str(), "routed experts         48 (")) << out.str();  // 3 MoE blocks
}

}  // namespace
}  // namespace sluice::testing
