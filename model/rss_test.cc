// Weights are read in place from the read-only mapping, never copied into
// anonymous memory: loading a model larger than kAnonSlackBytes and decoding
// with it grows anonymous RSS (RssAnon) by less than the session's KV/state
// size plus kAnonSlackBytes, while the mapped file pages (RssFile) grow.
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "model/engine.h"
#include "model/testing/mkmodel.h"

namespace sluice {
namespace {

// Activations, the tokenizer's tables, the thread pool and allocator slack.
constexpr uint64_t kAnonSlackBytes = 16ull << 20;

// A /proc/self/status field in bytes.
uint64_t StatusBytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      return std::stoull(line.substr(key.size() + 1)) * 1024;
    }
  }
  ADD_FAILURE() << key << " not in /proc/self/status";
  return 0;
}

TEST(RssTest, WeightsStayInTheMappingWhileDecoding) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/rss_test.gguf");
  mkmodel::Options o;
  o.arch = mkmodel::Arch::kQwen3Moe;
  o.shape = *mkmodel::NamedShape(o.arch, "tiny");
  o.shape.n_layer = 3;
  o.shape.n_expert = 32;
  o.shape.n_expert_used = 8;
  o.type = GgmlType::kF32;
  ASSERT_TRUE(mkmodel::WriteModel(o, path).ok());

  const uint64_t anon_before = StatusBytes("RssAnon");
  const uint64_t file_before = StatusBytes("RssFile");
  auto files = ModelFiles::Open(path);
  ASSERT_TRUE(files.ok()) << files.status();
  const uint64_t model_bytes = (*files)->total_file_bytes();
  ASSERT_GT(model_bytes, 4 * kAnonSlackBytes);

  auto engine = Engine::Create(**files, {.threads = 2, .context_length = 256});
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto made = (*engine)->NewSession();
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<Session> session = *std::move(made);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 48; ++i) prompt.push_back((i * 37) % 300);
  std::vector<float> logits;
  ASSERT_TRUE(session->Prefill(prompt, &logits).ok());
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(session->Decode((i * 11) % 300, &logits).ok());
  }

  const uint64_t anon_growth = StatusBytes("RssAnon") - anon_before;
  const uint64_t file_growth = StatusBytes("RssFile") - file_before;
  const uint64_t state = (*engine)->SessionStateBytes();
  std::printf("model %.1f MiB; RssAnon +%.1f MiB (KV/state %.1f MiB + slack "
              "%.1f MiB allowed); RssFile +%.1f MiB\n",
              model_bytes / 1048576.0, anon_growth / 1048576.0,
              state / 1048576.0, kAnonSlackBytes / 1048576.0,
              file_growth / 1048576.0);
  EXPECT_LT(anon_growth, state + kAnonSlackBytes);
  // The forward pass did read the weights, through the file mapping.
  EXPECT_GT(file_growth, model_bytes / 2);
}

}  // namespace
}  // namespace sluice
