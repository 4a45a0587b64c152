#include "memory/model_footprint.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "loader/gguf_file.h"
#include "loader/model_files.h"
#include "loader/testing/gguf_bytes.h"

namespace sluice::memory {
namespace {

struct T {
  std::string name;
  std::vector<uint64_t> ne;
};

// A mapped F32 GGUF of `tensors` (zero data), each at a 32-byte aligned
// offset, with the metadata `kvs`.
std::unique_ptr<ModelFiles> Write(const std::vector<T>& tensors,
                                  const std::vector<std::pair<std::string, GgufValue>>& kvs = {}) {
  sluice::testing::GgufBytes b;
  b.Header(3, tensors.size(), kvs.size());
  for (const auto& [key, value] : kvs) b.Kv(key, value);
  uint64_t offset = 0;
  for (const T& t : tensors) {
    b.TensorInfo(t.name, t.ne, /*F32*/ 0, offset);
    uint64_t n = 4;
    for (uint64_t d : t.ne) n *= d;
    offset += (n + 31) / 32 * 32;
  }
  b.PadTo(32).Zeros(offset);
  const std::string path = sluice::testing::MakeTempDir() + "/m.gguf";
  sluice::testing::WriteFileOrDie(path, b.bytes());
  auto files = ModelFiles::Open(path);
  EXPECT_TRUE(files.ok()) << files.status();
  return files.ok() ? *std::move(files) : nullptr;
}

// Block 0: attention (kv_dim 4) and 4 experts; block 1: DeltaNet (conv
// kernel 4 x 6 channels, 2 value heads of state 3) and 4 experts.
TEST(ModelFootprintTest, FiguresFromTheTensorTable) {
  auto files = Write({{"token_embd.weight", {8, 10}},
                      {"blk.0.attn_k.weight", {8, 4}},
                      {"blk.0.ffn_gate_exps.weight", {8, 2, 4}},
                      {"blk.0.ffn_up_exps.weight", {8, 2, 4}},
                      {"blk.0.ffn_down_exps.weight", {2, 8, 4}},
                      {"blk.1.ssm_conv1d.weight", {4, 6}},
                      {"blk.1.ssm_a", {2}},
                      {"blk.1.ssm_norm.weight", {3}},
                      {"blk.1.ffn_gate_exps.weight", {8, 2, 4}},
                      {"blk.1.ffn_up_exps.weight", {8, 2, 4}},
                      {"blk.1.ffn_down_exps.weight", {2, 8, 4}}});
  ASSERT_NE(files, nullptr);
  auto f = FootprintOf(files->tensors(), /*context=*/100, /*sessions=*/2);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->experts, 8);
  EXPECT_EQ(f->layers, 2);
  EXPECT_EQ(f->expert_layers, 2);
  EXPECT_EQ(f->experts_used, 0);  // not in a tensor table
  EXPECT_EQ(f->slot_bytes, 3u * 64);  // 16 floats per slice, 3 slices
  EXPECT_EQ(f->expert_bytes, 6u * 256);
  EXPECT_EQ(f->dense_bytes, 320u + 128 + 96 + 8 + 12);
  EXPECT_EQ(f->state_bytes_per_token, 2u * 4 * 4);
  EXPECT_EQ(f->state_fixed_bytes, (3u * 6 + 2 * 3 * 3) * 4);
  EXPECT_EQ(f->state_bytes(), 2u * (144 + 100 * 32));
  // 512 x (16 x 8 + 8 x (2 x 2 + 8)) floats + 512 x 10 logits.
  EXPECT_EQ(f->workspace_bytes, 512u * 224 * 4 + 512 * 10 * 4);
}

// deepseek2: latent attention keeps one row of kv_lora_rank + n_rot (the
// rows of attn_kv_a_mqa, here 6 + 2) per token and block, no values; the
// dense lead block has no experts and adds no slots.
TEST(ModelFootprintTest, LatentAttentionAndDenseBlocks) {
  auto files = Write({{"token_embd.weight", {8, 10}},
                      {"blk.0.attn_kv_a_mqa.weight", {8, 8}},
                      {"blk.0.ffn_gate.weight", {8, 16}},
                      {"blk.0.ffn_up.weight", {8, 16}},
                      {"blk.0.ffn_down.weight", {16, 8}},
                      {"blk.1.attn_kv_a_mqa.weight", {8, 8}},
                      {"blk.1.ffn_gate_exps.weight", {8, 2, 4}},
                      {"blk.1.ffn_up_exps.weight", {8, 2, 4}},
                      {"blk.1.ffn_down_exps.weight", {2, 8, 4}}});
  ASSERT_NE(files, nullptr);
  auto f = FootprintOf(files->tensors(), /*context=*/100, /*sessions=*/1);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->experts, 4);
  EXPECT_EQ(f->layers, 2);
  EXPECT_EQ(f->expert_layers, 1);
  EXPECT_EQ(f->slot_bytes, 3u * 64);
  EXPECT_EQ(f->state_bytes_per_token, 2u * 8 * 4);  // 2 blocks x 8 floats
  EXPECT_EQ(f->state_fixed_bytes, 0u);
}

// The older fused attn_kv_b (latent 6 x 3 heads of nope 4 + v 2 rows): the
// CUDA backend holds its K_b unfused to f32 beside it (3 x 4 x 6 floats),
// counted as dense; the split layout adds nothing.
TEST(ModelFootprintTest, AFusedKvBCountsItsUnfusedKb) {
  const std::vector<T> common = {{"token_embd.weight", {8, 10}},
                                 {"blk.0.attn_kv_a_mqa.weight", {8, 8}},
                                 {"blk.0.attn_output.weight", {6, 8}}};
  std::vector<T> fused = common, split = common;
  fused.push_back({"blk.0.attn_kv_b.weight", {6, 18}});
  split.push_back({"blk.0.attn_k_b.weight", {4, 6, 3}});
  split.push_back({"blk.0.attn_v_b.weight", {6, 2, 3}});
  auto ff = Write(fused);
  auto fs = Write(split);
  ASSERT_NE(ff, nullptr);
  ASSERT_NE(fs, nullptr);
  auto a = FootprintOf(ff->tensors(), 16, 1);
  auto b = FootprintOf(fs->tensors(), 16, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->dense_bytes, ff->tensors().dense_bytes() + 3u * 4 * 6 * 4);
  EXPECT_EQ(b->dense_bytes, fs->tensors().dense_bytes());
}

TEST(ModelFootprintTest, ExpertTensorsMustAgree) {
  auto files = Write({{"blk.0.ffn_gate_exps.weight", {8, 2, 4}},
                      {"blk.0.ffn_up_exps.weight", {8, 2, 3}}});
  ASSERT_NE(files, nullptr);
  auto f = FootprintOf(files->tensors(), 16, 1);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("tensor 'blk.0.ffn_up_exps.weight' has 3 experts; the other "
                                      "expert tensors of block 0 have 4"),
            std::string::npos)
      << f.status().message();
  EXPECT_EQ(FootprintOf(files->tensors(), 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Experts used a token come from <arch>.expert_used_count, in [1, the
// experts of a layer]; a model with routed experts must have the key, one
// without needs none.
TEST(ModelFootprintTest, ExpertsUsedFromTheHeader) {
  const std::vector<T> experts = {{"blk.0.ffn_gate_exps.weight", {8, 2, 4}},
                                  {"blk.0.ffn_up_exps.weight", {8, 2, 4}},
                                  {"blk.0.ffn_down_exps.weight", {2, 8, 4}}};
  auto used = [](uint32_t n) {
    return std::vector<std::pair<std::string, GgufValue>>{
        {"general.architecture", GgufValue::String("qwen35moe")},
        {"qwen35moe.expert_used_count", GgufValue::Scalar<uint32_t>(n)}};
  };
  auto files = Write(experts, used(2));
  ASSERT_NE(files, nullptr);
  auto f = FootprintOf(*files, 16, 1);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->experts_used, 2);
  EXPECT_EQ(f->experts, 4);

  files = Write(experts, used(5));
  ASSERT_NE(files, nullptr);
  EXPECT_EQ(FootprintOf(*files, 16, 1).status().message(),
            files->metadata().file_name() +
                ": qwen35moe.expert_used_count = 5: must be in [1, 4] (the routed experts of a "
                "layer)");

  files = Write(experts, {{"general.architecture", GgufValue::String("qwen35moe")}});
  ASSERT_NE(files, nullptr);
  f = FootprintOf(*files, 16, 1);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("qwen35moe.expert_used_count"), std::string::npos)
      << f.status().message();

  files = Write({{"token_embd.weight", {8, 10}}});
  ASSERT_NE(files, nullptr);
  f = FootprintOf(*files, 16, 1);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->experts_used, 0);
}

}  // namespace
}  // namespace sluice::memory
