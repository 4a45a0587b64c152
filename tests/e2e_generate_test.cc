// End-to-end: generation over gRPC against the in-process engine, concurrent
// streams, tokenize, request errors, a corrupt model, and the queue limit.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "model/engine.h"
#include "clients/proto/reflection.pb.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

constexpr int kContext = 512;

class E2eGenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("e2e-generate"));
    auto path = WriteMicroModel(*dir_);
    ASSERT_TRUE(path.ok()) << path.status();
    model_path_ = new std::string(*path);
    DaemonOptions options;
    options.model_path = *path;
    options.context_length = kContext;
    options.flags = {"--queue_limit=16"};
    auto d = Daemon::Start(options);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
    auto files = ModelFiles::Open(*path);
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = files->release();
    auto engine = Engine::Create(*files_, EngineOptions{.threads = 1, .context_length = kContext});
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = engine->release();
  }
  static void TearDownTestSuite() {
    if (daemon_ != nullptr) {
      const std::string log = daemon_->Log();
      EXPECT_EQ(daemon_->Stop(), 0) << log;
    }
    delete daemon_;
    delete engine_;
    delete files_;
  }
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    ASSERT_NE(engine_, nullptr);
  }

  // The in-process engine's tokens for the same request.
  static std::vector<int32_t> Reference(const std::string& prompt, int max_tokens,
                                        const SamplerParams& sampler) {
    auto made = engine_->NewSession();
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return {};
    std::unique_ptr<Session> session = *std::move(made);
    GenerateParams p;
    p.prompt = engine_->tokenizer().Encode(prompt, false);
    p.sampler = sampler;
    p.max_tokens = max_tokens;
    p.stop_at_eos = false;
    std::vector<int32_t> ids;
    auto r = Generate(*session, p, [&](int32_t id, std::string_view) {
      ids.push_back(id);
      return true;
    });
    EXPECT_TRUE(r.ok()) << r.status();
    return ids;
  }

  static std::string* dir_;
  static std::string* model_path_;
  static Daemon* daemon_;
  static ModelFiles* files_;
  static Engine* engine_;
};

std::string* E2eGenerateTest::dir_ = nullptr;
std::string* E2eGenerateTest::model_path_ = nullptr;
Daemon* E2eGenerateTest::daemon_ = nullptr;
ModelFiles* E2eGenerateTest::files_ = nullptr;
Engine* E2eGenerateTest::engine_ = nullptr;

// GenerateDone carries the request's id: the field, else the call's
// x-request-id metadata, else one the daemon makes; the log line has it.
TEST_F(E2eGenerateTest, EveryGenerationHasARequestId) {
  v1::GenerateRequest own = GreedyRequest("id", 1);
  own.set_request_id("mine-1");
  EXPECT_EQ(RunGenerate(daemon_->stub(), own).final.request_id(), "mine-1");
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-request-id", "from-meta:2");
    auto reader = daemon_->stub().Generate(&ctx, GreedyRequest("id", 1));
    v1::GenerateResponse resp;
    std::string id;
    while (reader->Read(&resp)) {
      if (resp.has_done()) id = resp.done().request_id();
    }
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_EQ(id, "from-meta:2");
  }
  const std::string made = RunGenerate(daemon_->stub(), GreedyRequest("id", 1)).final.request_id();
  EXPECT_EQ(made.rfind("sluiced-", 0), 0u) << made;
  EXPECT_NE(RunGenerate(daemon_->stub(), GreedyRequest("id", 1)).final.request_id(), made);
  v1::GenerateRequest bad = GreedyRequest("id", 1);
  bad.set_request_id("no spaces");
  const Generation refused = RunGenerate(daemon_->stub(), bad);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.status.error_message(),
            "GenerateRequest.request_id: 'no spaces' must be 1 to 128 characters of "
            "[A-Za-z0-9._:-]");
  EXPECT_NE(daemon_->Log().find("sluiced: request mine-1: FINISH_REASON_LENGTH, "),
            std::string::npos);
}

TEST_F(E2eGenerateTest, HealthIsServingWithTheModelLoaded) {
  EXPECT_EQ(daemon_->Health(), "SERVING");
  auto health = grpc::health::v1::Health::NewStub(daemon_->channel());
  grpc::ClientContext health_ctx;
  grpc::health::v1::HealthCheckRequest named;
  named.set_service("sluice.v1.Sluice");
  grpc::health::v1::HealthCheckResponse status;
  ASSERT_TRUE(health->Check(&health_ctx, named, &status).ok());
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  grpc::ClientContext ctx;
  v1::ListModelsResponse resp;
  ASSERT_TRUE(daemon_->stub().ListModels(&ctx, v1::ListModelsRequest(), &resp).ok());
  ASSERT_EQ(resp.models_size(), 1);
  EXPECT_EQ(resp.models(0).model_id(), "micro-qwen35moe");
  EXPECT_EQ(resp.models(0).architecture(), "qwen35moe");
  EXPECT_EQ(resp.models(0).state(), v1::MODEL_STATE_READY);
  EXPECT_EQ(resp.models(0).vocab_size(),
            static_cast<uint32_t>(engine_->tokenizer().n_vocab()));
  EXPECT_EQ(resp.models(0).context_length(), static_cast<uint32_t>(kContext));
}

TEST_F(E2eGenerateTest, ServerReflectionListsTheServices) {
  namespace refl = sluice::testing::reflection;
  const grpc::internal::RpcMethod method(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING, daemon_->channel());
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<refl::ServerReflectionRequest,
                                           refl::ServerReflectionResponse>>
      stream(grpc::internal::ClientReaderWriterFactory<
             refl::ServerReflectionRequest,
             refl::ServerReflectionResponse>::Create(daemon_->channel().get(), method, &ctx));
  refl::ServerReflectionRequest req;
  req.set_list_services("*");
  ASSERT_TRUE(stream->Write(req));
  stream->WritesDone();
  refl::ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  std::vector<std::string> names;
  for (const auto& s : resp.list_services_response().service()) names.push_back(s.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "sluice.v1.Sluice"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.health.v1.Health"), names.end());
  while (stream->Read(&resp)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(E2eGenerateTest, WorkerRunsWithOomScoreAdj1000) {
  std::vector<pid_t> workers = ChildrenOf(daemon_->pid());
  ASSERT_EQ(workers.size(), 1u);
  std::ifstream adj(absl::StrCat("/proc/", workers[0], "/oom_score_adj"));
  int score = 0;
  adj >> score;
  EXPECT_EQ(score, 1000);
}

TEST_F(E2eGenerateTest, GreedyMatchesInProcessEngine) {
  const std::vector<int32_t> want = Reference("Hello sluice", 24, SamplerParams{});
  Generation g = RunGenerate(daemon_->stub(), GreedyRequest("Hello sluice", 24));
  ASSERT_TRUE(g.status.ok()) << g.status.error_message();
  EXPECT_EQ(g.token_ids, want);
  ASSERT_TRUE(g.done);
  EXPECT_EQ(g.final.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(g.final.usage().completion_tokens(), 24u);
  EXPECT_EQ(g.final.usage().prompt_tokens(),
            engine_->tokenizer().Encode("Hello sluice", false).size());
  EXPECT_EQ(g.chunks, 24);
  EXPECT_GT(g.final.timings().time_to_first_token_ms(), 0);
  EXPECT_EQ(g.text, engine_->tokenizer().Decode(want));
}

TEST_F(E2eGenerateTest, SeededSamplingMatchesInProcessEngine) {
  SamplerParams sp;
  sp.temperature = 0.9f;
  sp.top_k = 20;
  sp.top_p = 0.95f;
  sp.seed = 1234;
  const std::vector<int32_t> want = Reference("The river", 20, sp);
  v1::GenerateRequest req = GreedyRequest("The river", 20);
  req.mutable_sampling()->set_temperature(0.9f);
  req.mutable_sampling()->set_top_k(20);
  req.mutable_sampling()->set_top_p(0.95f);
  req.mutable_sampling()->set_seed(1234);
  Generation g = RunGenerate(daemon_->stub(), req);
  ASSERT_TRUE(g.status.ok()) << g.status.error_message();
  EXPECT_EQ(g.token_ids, want);
}

TEST_F(E2eGenerateTest, EightConcurrentClientsGetCompleteCorrectStreams) {
  constexpr int kClients = 8;
  std::vector<std::vector<int32_t>> want(kClients);
  std::vector<v1::GenerateRequest> reqs(kClients);
  for (int i = 0; i < kClients; ++i) {
    SamplerParams sp;
    sp.temperature = 0.8f;
    sp.seed = 100 + i;
    want[i] = Reference(absl::StrCat("client ", i), 12, sp);
    reqs[i] = GreedyRequest(absl::StrCat("client ", i), 12);
    reqs[i].mutable_sampling()->set_temperature(0.8f);
    reqs[i].mutable_sampling()->set_seed(100 + i);
  }
  std::vector<Generation> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      // One channel per client, as separate processes would have.
      auto channel = grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials());
      auto stub = v1::Sluice::NewStub(channel);
      got[i] = RunGenerate(*stub, reqs[i]);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    ASSERT_TRUE(got[i].status.ok()) << i << ": " << got[i].status.error_message();
    EXPECT_TRUE(got[i].done) << i;
    EXPECT_EQ(got[i].token_ids, want[i]) << "client " << i;
    EXPECT_EQ(got[i].final.usage().completion_tokens(), 12u) << i;
  }
}

TEST_F(E2eGenerateTest, TokenizeMatchesInProcessTokenizer) {
  grpc::ClientContext ctx;
  v1::TokenizeRequest req;
  req.set_text("Hello, world! <|im_start|>");
  req.set_parse_special(true);
  v1::TokenizeResponse resp;
  ASSERT_TRUE(daemon_->stub().Tokenize(&ctx, req, &resp).ok());
  const std::vector<int32_t> want = engine_->tokenizer().Encode(req.text(), true);
  EXPECT_EQ(std::vector<int32_t>(resp.token_ids().begin(), resp.token_ids().end()), want);
  ASSERT_EQ(resp.pieces_size(), resp.token_ids_size());
  EXPECT_EQ(resp.pieces(resp.pieces_size() - 1), "<|im_start|>");
}

TEST_F(E2eGenerateTest, NonAsciiTextTokenizesAndGenerates) {
  const std::string text = "h\xc3\xa9llo \xf0\x9f\x98\x80 \xe6\xb0\xb4";  // héllo 😀 水
  grpc::ClientContext ctx;
  v1::TokenizeRequest req;
  req.set_text(text);
  v1::TokenizeResponse resp;
  grpc::Status s = daemon_->stub().Tokenize(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(std::vector<int32_t>(resp.token_ids().begin(), resp.token_ids().end()),
            engine_->tokenizer().Encode(text, false));
  std::string joined;
  for (const std::string& b : resp.piece_bytes()) joined += b;
  EXPECT_EQ(joined, text);
  ASSERT_EQ(resp.pieces_size(), resp.token_ids_size());
  EXPECT_EQ(resp.pieces(0), "h");
  Generation g = RunGenerate(daemon_->stub(), GreedyRequest(text, 6));
  ASSERT_TRUE(g.status.ok()) << g.status.error_message();
  EXPECT_EQ(g.token_ids, Reference(text, 6, SamplerParams{}));
  EXPECT_EQ(daemon_->Health(), "SERVING");
}

TEST_F(E2eGenerateTest, ChatAndTokenIdInputsWork) {
  v1::GenerateRequest req = GreedyRequest("", 4);
  v1::ChatMessage* m = req.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  Generation g = RunGenerate(daemon_->stub(), req);
  ASSERT_TRUE(g.status.ok()) << g.status.error_message();
  EXPECT_EQ(g.final.usage().completion_tokens(), 4u);

  v1::GenerateRequest ids = GreedyRequest("", 5);
  for (int32_t id : engine_->tokenizer().Encode("Hello sluice", false)) {
    ids.mutable_token_ids()->add_ids(id);
  }
  Generation by_ids = RunGenerate(daemon_->stub(), ids);
  ASSERT_TRUE(by_ids.status.ok());
  EXPECT_EQ(by_ids.token_ids, Reference("Hello sluice", 5, SamplerParams{}));
}

TEST_F(E2eGenerateTest, BadRequestsAreRejectedWithClearMessages) {
  v1::GenerateRequest out_of_vocab = GreedyRequest("", 4);
  out_of_vocab.mutable_token_ids()->add_ids(1);
  out_of_vocab.mutable_token_ids()->add_ids(999999);
  Generation g = RunGenerate(daemon_->stub(), out_of_vocab);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(g.status.error_message().find("token_ids.ids[1]=999999"), std::string::npos)
      << g.status.error_message();

  v1::GenerateRequest bad_top_p = GreedyRequest("x", 4);
  bad_top_p.mutable_sampling()->set_top_p(0);
  g = RunGenerate(daemon_->stub(), bad_top_p);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(g.status.error_message().find("top_p"), std::string::npos)
      << g.status.error_message();

  v1::GenerateRequest wrong_model = GreedyRequest("x", 4);
  wrong_model.set_model_id("nope");
  g = RunGenerate(daemon_->stub(), wrong_model);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(g.status.error_message().find("model_id 'nope' is not loaded"), std::string::npos);

  v1::GenerateRequest no_input;
  g = RunGenerate(daemon_->stub(), no_input);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(E2eGenerateTest, CorruptGgufIsInvalidArgumentAndTheModelKeepsServing) {
  const std::string corrupt = *dir_ + "/corrupt.gguf";
  {
    std::ifstream in(*model_path_, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(corrupt, std::ios::binary);
    out.write(bytes.data(), 4000);  // the header, cut inside the tensor infos or data
  }
  const std::string garbage = *dir_ + "/garbage.gguf";
  std::ofstream(garbage) << "this is not a gguf file at all";
  for (const std::string& path : {corrupt, garbage, *dir_ + "/missing.gguf"}) {
    grpc::ClientContext ctx;
    v1::LoadModelRequest req;
    req.set_path(path);
    v1::LoadModelResponse resp;
    grpc::Status s = daemon_->stub().LoadModel(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << path;
    EXPECT_NE(s.error_message().find(path), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(daemon_->Health(), "SERVING");
  Generation g = RunGenerate(daemon_->stub(), GreedyRequest("still here", 3));
  EXPECT_TRUE(g.status.ok()) << g.status.error_message();
  EXPECT_EQ(g.final.usage().completion_tokens(), 3u);
}

}  // namespace
}  // namespace sluice::testing
