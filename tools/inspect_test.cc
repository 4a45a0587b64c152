// inspect --summary against sums computed from the goldens' manifest.json.
#include "tools/inspect_lib.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "base/testing/goldens.h"
#include "gtest/gtest.h"
#include "loader/tensor_table.h"
#include "nlohmann/json.hpp"

namespace sluice::inspect {
namespace {

struct Sums {
  uint64_t tensors = 0, dense = 0, expert = 0;
  int shards = 0;
};

std::string Expected(const Sums& s) {
  return absl::StrCat("tensors=", s.tensors, " bytes=", s.dense + s.expert,
                      " dense_bytes=", s.dense, " expert_bytes=", s.expert,
                      " shards=", s.shards);
}

TEST(InspectTest, SummaryMatchesManifestForEveryGolden) {
  SLUICE_REQUIRE_GOLDENS(dir);
  std::ifstream in(dir + "/manifest.json");
  ASSERT_TRUE(in.good()) << dir << "/manifest.json";
  const nlohmann::json manifest = nlohmann::json::parse(in);
  // Split shards add up to one model, opened from its first shard.
  std::map<std::string, Sums> models;
  for (const auto& [file, info] : manifest.items()) {
    std::string path = dir + "/" + file;
    if (file.find("-of-") != std::string::npos) {
      path = dir + "/split/" + file.substr(0, file.size() - 20) + "-00001-of-00003.gguf";
    } else if (file == "quant_types.gguf") {
      path = dir + "/quant/" + file;
    }
    Sums& s = models[path];
    ++s.shards;
    for (const auto& t : info["tensors"]) {
      ++s.tensors;
      const uint64_t bytes = t["n_bytes"].get<uint64_t>();
      (IsRoutedExpertName(t["name"].get<std::string>()) ? s.expert : s.dense) += bytes;
    }
  }
  ASSERT_EQ(models.size(), 8u);
  for (const auto& [path, sums] : models) {
    auto files = ModelFiles::Open(path);
    ASSERT_TRUE(files.ok()) << files.status();
    std::ostringstream out;
    Dump(**files, /*summary_only=*/true, 8, out);
    std::string text = out.str();
    ASSERT_FALSE(text.empty());
    text.pop_back();  // final newline
    const std::string last = text.substr(text.rfind('\n') + 1);
    EXPECT_EQ(last, Expected(sums)) << path;
    std::printf("%s: %s\n", path.c_str(), last.c_str());
  }
}

TEST(InspectTest, FullDumpListsMetadataAndTensors) {
  SLUICE_REQUIRE_GOLDENS(dir);
  auto files = ModelFiles::Open(dir + "/qwen3moe-micro-f32.gguf");
  ASSERT_TRUE(files.ok()) << files.status();
  std::ostringstream out;
  Dump(**files, /*summary_only=*/false, 3, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("    qwen3moe.expert_count: UINT32 = 8\n"), std::string::npos);
  EXPECT_NE(text.find("    tokenizer.ggml.token_type: ARRAY<INT32>[1300] = [1, 1, 1, ...] "
                      "(1300 INT32)\n"),
            std::string::npos);
  EXPECT_NE(text.find("expert x8 of 32768 B blk.0.ffn_gate_exps.weight\n"), std::string::npos)
      << text.substr(text.find("tensors ("), 2000);
  EXPECT_EQ(text.substr(text.rfind('\n', text.size() - 2) + 1), SummaryLine(**files) + "\n");
}

}  // namespace
}  // namespace sluice::inspect
