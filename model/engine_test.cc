#include "model/engine.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "model/testing/mkmodel.h"

namespace sluice {
namespace {

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* dir = std::getenv("TEST_TMPDIR");
    const std::string path =
        absl::StrCat(dir != nullptr ? dir : "/tmp", "/engine_test.gguf");
    mkmodel::Options o;
    o.arch = mkmodel::Arch::kQwen35Moe;
    o.shape = *mkmodel::NamedShape(o.arch, "micro");
    o.seed = 11;
    ASSERT_TRUE(mkmodel::WriteModel(o, path).ok());
    auto files = ModelFiles::Open(path);
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = files->release();
  }
  static void TearDownTestSuite() { delete files_; }

  std::unique_ptr<Engine> MakeEngine(int context_length) {
    auto engine = Engine::Create(*files_, {.threads = 2,
                                           .context_length = context_length});
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  // Greedy generation collecting the ids and the streamed text.
  struct Run {
    GenerateResult result;
    std::vector<int32_t> ids;
    std::string text;
  };
  Run Greedy(Engine& engine, GenerateParams params, int cancel_after = -1) {
    Run run;
    auto made = engine.NewSession();
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return run;
    std::unique_ptr<Session> session = *std::move(made);
    auto r = Generate(*session, params, [&](int32_t id, std::string_view piece) {
      run.ids.push_back(id);
      run.text.append(piece);
      return cancel_after < 0 || static_cast<int>(run.ids.size()) < cancel_after;
    });
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) run.result = *r;
    return run;
  }

  // Twelve tokens after "The license", not stopping at EOS.
  static GenerateParams TwelveTokens(const Engine& engine) {
    GenerateParams p;
    p.prompt = engine.tokenizer().Encode("The license", false);
    p.max_tokens = 12;
    p.stop_at_eos = false;
    return p;
  }

  static ModelFiles* files_;
};

ModelFiles* EngineTest::files_ = nullptr;

TEST_F(EngineTest, CreateRejectsBadOptions) {
  auto engine = Engine::Create(*files_, {.threads = 0});
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.status().message(), "engine: threads = 0 must be >= 1");
  engine = Engine::Create(*files_, {.threads = 1, .context_length = 0});
  EXPECT_EQ(engine.status().message(),
            "engine: context_length = 0 must be >= 1");
}

TEST_F(EngineTest, InfoAndTokenizer) {
  auto engine = MakeEngine(64);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->info().arch, "qwen35moe");
  EXPECT_EQ(engine->info().n_vocab, engine->tokenizer().n_vocab());
  EXPECT_EQ(engine->SessionStateBytes(), engine->model().StateBytes(64));
}

TEST_F(EngineTest, SessionPositionsAndContextOverflow) {
  auto engine = MakeEngine(8);
  ASSERT_NE(engine, nullptr);
  auto made = engine->NewSession();
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<Session> session = *std::move(made);
  std::vector<float> logits;
  ASSERT_TRUE(session->Prefill({1, 2, 3, 4, 5, 6}, &logits).ok());
  EXPECT_EQ(logits.size(), static_cast<size_t>(engine->info().n_vocab));
  EXPECT_EQ(session->position(), 6);
  ASSERT_TRUE(session->Decode(7, &logits).ok());
  ASSERT_TRUE(session->Decode(8, &logits).ok());
  const absl::Status s = session->Decode(9, &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(),
            "context length exceeded: 8 tokens held + 1 new > context length 8");
  session->Reset();
  EXPECT_EQ(session->position(), 0);
  std::vector<float> all;
  ASSERT_TRUE(session->PrefillAll({1, 2, 3}, &all).ok());
  EXPECT_EQ(all.size(), static_cast<size_t>(3 * engine->info().n_vocab));
}

TEST_F(EngineTest, GenerateStopsAtMaxTokensAndStreamsTheDecodedText) {
  auto engine = MakeEngine(64);
  ASSERT_NE(engine, nullptr);
  const GenerateParams p = TwelveTokens(*engine);
  const Run run = Greedy(*engine, p);
  EXPECT_EQ(run.result.finish_reason, FinishReason::kLength);
  EXPECT_EQ(run.result.generated_tokens, 12);
  EXPECT_EQ(run.result.prompt_tokens, static_cast<int>(p.prompt.size()));
  ASSERT_EQ(run.ids.size(), 12u);
  TokenStreamDecoder reference(engine->tokenizer(), false);
  std::string expected;
  for (int32_t id : run.ids) expected += reference.Push(id);
  expected += reference.Flush();
  EXPECT_EQ(run.text, expected);
  EXPECT_GT(run.result.ttft_s, 0);
  EXPECT_GT(run.result.decode_tok_per_s, 0);
  // Greedy is deterministic.
  EXPECT_EQ(Greedy(*engine, p).ids, run.ids);
}

TEST_F(EngineTest, GenerateStopStringEndsAndIsNotEmitted) {
  auto engine = MakeEngine(64);
  ASSERT_NE(engine, nullptr);
  GenerateParams p = TwelveTokens(*engine);
  const Run full = Greedy(*engine, p);
  ASSERT_GE(full.text.size(), 6u);
  // Stop at a 2-byte string found in the middle of the full output.
  const size_t at = full.text.size() / 2;
  p.stop = {"zzzz-not-there", full.text.substr(at, 2)};
  const Run stopped = Greedy(*engine, p);
  EXPECT_EQ(stopped.result.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find(p.stop[1])));
  EXPECT_LT(stopped.result.generated_tokens, 12);
}

TEST_F(EngineTest, GenerateCancelAndContextLimit) {
  auto engine = MakeEngine(10);
  ASSERT_NE(engine, nullptr);
  GenerateParams p;
  p.prompt = {1, 2, 3, 4, 5, 6};
  p.max_tokens = 20;
  p.stop_at_eos = false;
  const Run cancelled = Greedy(*engine, p, /*cancel_after=*/2);
  EXPECT_EQ(cancelled.result.finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(cancelled.result.generated_tokens, 2);
  // 6 prompt tokens in a context of 10: 4 more fit, and the token sampled
  // from the last row is returned without being fed back.
  const Run limited = Greedy(*engine, p);
  EXPECT_EQ(limited.result.finish_reason, FinishReason::kLength);
  EXPECT_EQ(limited.result.generated_tokens, 5);
}

TEST_F(EngineTest, GenerateRejectsBadParams) {
  auto engine = MakeEngine(8);
  ASSERT_NE(engine, nullptr);
  auto made = engine->NewSession();
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<Session> session = *std::move(made);
  GenerateParams p;
  auto r = Generate(*session, p, [](int32_t, std::string_view) { return true; });
  EXPECT_EQ(r.status().message(), "generate: empty prompt");
  p.prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  r = Generate(*session, p, [](int32_t, std::string_view) { return true; });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
  p.prompt = {1};
  p.sampler.top_p = 1.5f;
  r = Generate(*session, p, [](int32_t, std::string_view) { return true; });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice
