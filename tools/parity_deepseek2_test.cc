// deepseek2 (multi-head latent attention, YaRN, sigmoid routing with the
// selection bias in groups, a dense lead block, a shared expert) against
// llama.cpp: the goldens of ../shared/goldens-deepseek2 (found through
// SLUICE_GOLDENS_DEEPSEEK2, base/testing/goldens.h; skipped when absent,
// failed under CI=true). The F32 gate on every prompt on the CPU, the
// measured error printed, and greedy decoding giving the golden tokens.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "base/testing/goldens.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "model/engine.h"
#include "nlohmann/json.hpp"
#include "tools/parity_lib.h"

namespace sluice::parity {
namespace {

constexpr char kModel[] = "deepseek2-micro-f32";

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  return nlohmann::json::parse(text, nullptr, false);
}

TEST(Deepseek2ParityTest, PassesTheF32GateOnEveryPrompt) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  Options options;
  options.threads = 2;
  auto report = RunParity(dir + "/" + kModel + ".gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::fputs(FormatReport({*report}).c_str(), stdout);
  EXPECT_TRUE(report->all_f32);
  ASSERT_EQ(report->prompts.size(), 3u);
  for (const PromptReport& p : report->prompts) {
    std::printf("measured %s: max |dlogit|/std = %.6f (gate %.3f), rms %.6f, top-1 %d/%d\n",
                p.name.c_str(), p.max, Gates{}.f32_max, p.rms, p.top1, p.rows);
    EXPECT_TRUE(p.passed) << p.name << ": max=" << p.max << " rms=" << p.rms
                          << " top1=" << p.top1 << "/" << p.rows;
    EXPECT_LE(p.max, Gates{}.f32_max) << p.name;
    EXPECT_EQ(p.top1, p.rows) << p.name;
  }
  EXPECT_TRUE(report->passed);
}

// Free-running greedy decoding (not teacher-forced) from each prompt gives
// llama.cpp's 32 tokens.
TEST(Deepseek2ParityTest, GreedyDecodeGivesTheGoldenTokens) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  const std::string stem = dir + "/" + kModel;
  auto files = ModelFiles::Open(stem + ".gguf");
  ASSERT_TRUE(files.ok()) << files.status();
  auto engine = Engine::Create(**files, EngineOptions{.threads = 2, .context_length = 256});
  ASSERT_TRUE(engine.ok()) << engine.status();
  const nlohmann::json prompts = ReadJson(stem + ".prompts.json");
  ASSERT_TRUE(prompts.contains("prompts"));
  int checked = 0;
  for (const nlohmann::json& pj : prompts["prompts"]) {
    const std::string name = pj.value("name", "");
    const std::vector<int32_t> ids = pj["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> want =
        ReadJson(stem + "." + name + ".decode_tokens.json").get<std::vector<int32_t>>();
    ASSERT_EQ(want.size(), 32u) << name;
    auto session = (*engine)->NewSession();
    ASSERT_TRUE(session.ok()) << session.status();
    GenerateParams params;
    params.prompt = ids;
    params.max_tokens = static_cast<int>(want.size());
    params.stop_at_eos = false;
    std::vector<int32_t> got;
    auto result = Generate(**session, params, [&](int32_t id, std::string_view) {
      got.push_back(id);
      return true;
    });
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(got, want) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

}  // namespace
}  // namespace sluice::parity
