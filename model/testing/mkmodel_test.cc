#include "model/testing/mkmodel.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "base/testing/goldens.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "loader/testing/gguf_bytes.h"

namespace sluice::mkmodel {
namespace {

using ::testing::HasSubstr;

Options MicroOptions(Arch arch, GgmlType type) {
  Options o;
  o.arch = arch;
  o.shape = *NamedShape(arch, "micro");
  o.type = type;
  o.seed = 42;
  return o;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::unique_ptr<ModelFiles> WriteAndOpen(const Options& o, const std::string& path) {
  auto paths = WriteModel(o, path);
  EXPECT_TRUE(paths.ok()) << paths.status();
  if (!paths.ok()) return nullptr;
  auto m = ModelFiles::Open(paths->front());
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

bool IsTokenizerKey(const std::string& key) {
  return key.rfind("tokenizer.ggml.", 0) == 0 && key != "tokenizer.ggml.model" &&
         key != "tokenizer.ggml.pre" && key != "tokenizer.ggml.add_bos_token";
}

// The micro shapes reproduce the golden micro models' metadata and tensor
// layout (the vocabulary is smaller: 323 tokens instead of 1300).
class MkmodelGoldenLayoutTest : public ::testing::TestWithParam<Arch> {};

TEST_P(MkmodelGoldenLayoutTest, MatchesGoldenMicroModel) {
  SLUICE_REQUIRE_GOLDENS(dir);
  const Arch arch = GetParam();
  auto golden = ModelFiles::Open(absl::StrCat(dir, "/", ArchName(arch), "-micro-f32.gguf"));
  ASSERT_TRUE(golden.ok()) << golden.status();
  Options o = MicroOptions(arch, GgmlType::kF32);
  o.name = absl::StrCat(ArchName(arch), "-micro");
  auto ours = WriteAndOpen(o, testing::MakeTempDir() + "/m.gguf");
  ASSERT_NE(ours, nullptr);

  const GgufFile& g = (*golden)->metadata();
  const GgufFile& m = ours->metadata();
  ASSERT_EQ(m.metadata().size(), g.metadata().size());
  for (size_t i = 0; i < g.metadata().size(); ++i) {
    const GgufKv& want = g.metadata()[i];
    const GgufKv& got = m.metadata()[i];
    EXPECT_EQ(got.key, want.key);
    EXPECT_EQ(got.value.type(), want.value.type()) << want.key;
    if (!IsTokenizerKey(want.key)) {
      EXPECT_EQ(got.value.DebugString(), want.value.DebugString()) << want.key;
    }
  }
  const uint64_t n_vocab = m.Find("tokenizer.ggml.tokens")->array_size();
  EXPECT_EQ(n_vocab, 256u + 64 + 3);
  const auto& ge = (*golden)->tensors().entries();
  const auto& me = ours->tensors().entries();
  ASSERT_EQ(me.size(), ge.size());
  for (size_t i = 0; i < ge.size(); ++i) {
    EXPECT_EQ(me[i].name, ge[i].name);
    EXPECT_EQ(me[i].type, ge[i].type) << ge[i].name;
    EXPECT_EQ(me[i].n_dims, ge[i].n_dims) << ge[i].name;
    std::array<uint64_t, 4> want = ge[i].ne;
    if (ge[i].name == "token_embd.weight" || ge[i].name == "output.weight") want[1] = n_vocab;
    EXPECT_EQ(me[i].ne, want) << ge[i].name;
    EXPECT_EQ(me[i].kind, ge[i].kind) << ge[i].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, MkmodelGoldenLayoutTest,
                         ::testing::Values(Arch::kQwen35Moe, Arch::kQwen3Moe),
                         [](const auto& info) { return std::string(ArchName(info.param)); });

TEST(MkmodelTest, Q8_0ModelRoundTripsTensorBytes) {
  const Options o = MicroOptions(Arch::kQwen35Moe, GgmlType::kQ8_0);
  auto m = WriteAndOpen(o, testing::MakeTempDir() + "/q.gguf");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(*m->metadata().GetU32("general.file_type"), 7u);
  int q8 = 0, f32 = 0;
  double worst = 0;
  for (const TensorEntry& e : m->tensors().entries()) {
    auto values = GenerateTensor(o, e.name);
    ASSERT_TRUE(values.ok()) << values.status();
    ASSERT_EQ(values->size(), e.n_elements()) << e.name;
    if (e.type == GgmlType::kF32) {
      ++f32;
      EXPECT_EQ(std::memcmp(e.data, values->data(), e.n_bytes), 0) << e.name;
      continue;
    }
    ASSERT_EQ(e.type, GgmlType::kQ8_0) << e.name;
    ++q8;
    // Dequantize independently of QuantizeQ8_0: d * q. q is rounded against
    // the unrounded scale, so |error| <= d/2 + 127 * (fp16 rounding of d).
    for (uint64_t b = 0; b < e.n_elements() / 32; ++b) {
      const uint8_t* block = e.data + b * 34;
      uint16_t dh;
      std::memcpy(&dh, block, 2);
      const int exp = (dh >> 10) & 0x1F;
      const float d = std::ldexp(static_cast<float>((dh & 0x3FF) | (exp ? 0x400 : 0)),
                                 (exp ? exp : 1) - 25);
      for (int i = 0; i < 32; ++i) {
        const float x = (*values)[b * 32 + i];
        const float deq = d * static_cast<int8_t>(block[2 + i]);
        const double err = std::fabs(deq - x);
        worst = std::max(worst, err / (d + 1e-30));
        ASSERT_LE(err, d * (0.5 + 127.0 / 2048) + 1e-7) << e.name << " element " << b * 32 + i;
      }
    }
  }
  // F32: 9 norms of the 4 blocks + output_norm, 4 routers, 4 shared-expert
  // gates, ssm_conv1d/ssm_dt.bias/ssm_a/ssm_norm of the 3 delta-net blocks and
  // the q/k norms of the attention block; every other tensor is Q8_0.
  EXPECT_EQ(f32, 4 + 4 + 1 + 4 + 4 + 12 + 2);
  EXPECT_EQ(q8, 76 - f32);
  std::printf("max |dequant - value| / d over all q8_0 tensors: %.4f\n", worst);
}

TEST(MkmodelTest, DeterministicAcrossRunsAndChunkSizes) {
  const std::string dir = testing::MakeTempDir();
  Options o = MicroOptions(Arch::kQwen3Moe, GgmlType::kF16);
  ASSERT_TRUE(WriteModel(o, dir + "/a.gguf").ok());
  o.chunk_elements = 37;
  ASSERT_TRUE(WriteModel(o, dir + "/b.gguf").ok());
  o.seed = 43;
  ASSERT_TRUE(WriteModel(o, dir + "/c.gguf").ok());
  const std::string a = ReadAll(dir + "/a.gguf");
  EXPECT_GT(a.size(), 1000000u);
  EXPECT_EQ(a, ReadAll(dir + "/b.gguf"));
  EXPECT_NE(a, ReadAll(dir + "/c.gguf"));
}

TEST(MkmodelTest, SplitSetMatchesUnsplitModel) {
  const std::string dir = testing::MakeTempDir();
  Options o = MicroOptions(Arch::kQwen3Moe, GgmlType::kQ8_0);
  auto whole = WriteAndOpen(o, dir + "/w.gguf");
  o.split_count = 3;
  auto paths = WriteModel(o, dir + "/s.gguf");
  ASSERT_TRUE(paths.ok()) << paths.status();
  ASSERT_EQ(paths->size(), 3u);
  EXPECT_EQ((*paths)[1], dir + "/s-00002-of-00003.gguf");
  auto split = ModelFiles::Open((*paths)[1]);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ((*split)->shard_count(), 3);
  ASSERT_EQ((*split)->tensors().size(), whole->tensors().size());
  for (const TensorEntry& e : whole->tensors().entries()) {
    const TensorEntry* s = (*split)->tensors().Find(e.name);
    ASSERT_NE(s, nullptr) << e.name;
    EXPECT_EQ(s->ne, e.ne);
    EXPECT_EQ(s->n_bytes, e.n_bytes);
    EXPECT_EQ(std::memcmp(s->data, e.data, e.n_bytes), 0) << e.name;
  }
  EXPECT_EQ(*(*split)->shard(2).file->GetU64("split.no"), 2u);
  EXPECT_EQ((*split)->shard(2).file->Find("general.architecture"), nullptr);
}

TEST(MkmodelTest, VocabularyIsByteLevelBpe) {
  auto v = BuildVocab(64);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->tokens.size(), 256u + 64 + 3);
  EXPECT_EQ(v->tokens['a'], "a");
  EXPECT_EQ(v->tokens[' '], "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(v->tokens['\n'], "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(v->tokens[0], "\xC4\x80");     // U+0100
  EXPECT_EQ(v->tokens[255], "\xC3\xBF");   // 'ÿ' spells itself
  EXPECT_EQ(v->tokens[320], "<|endoftext|>");
  EXPECT_EQ(v->tokens[322], "<|im_end|>");
  EXPECT_EQ(v->token_types[321], 3);
  EXPECT_EQ(v->token_types[300], 1);
  std::set<std::string> unique(v->tokens.begin(), v->tokens.end());
  EXPECT_EQ(unique.size(), v->tokens.size());
  for (size_t i = 0; i < v->merges.size(); ++i) {
    const std::string& merge = v->merges[i];
    const size_t space = merge.find(' ');
    ASSERT_NE(space, std::string::npos);
    EXPECT_EQ(v->tokens[256 + i], merge.substr(0, space) + merge.substr(space + 1));
    EXPECT_TRUE(unique.count(merge.substr(0, space))) << merge;
  }
  EXPECT_EQ(v->merges[0], "\xC4\xA0 t");  // "Ġ t": the commonest pair in English prose
  auto too_many = BuildVocab(100000);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_many.status().message()),
              HasSubstr("merges, 100000 requested"));
}

TEST(MkmodelTest, FloatToHalfRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(0.1f), 0x2E66);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(FloatToHalf(INFINITY), 0x7C00);
  EXPECT_EQ(FloatToHalf(NAN) & 0x7E00, 0x7E00);
}

TEST(MkmodelTest, QuantizesQ8_0Blocks) {
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16) / 4;  // amax 4
  std::vector<uint8_t> out;
  QuantizeQ8_0(x, 32, out);
  ASSERT_EQ(out.size(), 34u);
  uint16_t d;
  std::memcpy(&d, out.data(), 2);
  EXPECT_EQ(d, FloatToHalf(4.0f / 127));
  EXPECT_EQ(static_cast<int8_t>(out[2]), -127);      // -4
  EXPECT_EQ(static_cast<int8_t>(out[2 + 16]), 0);    // 0
  EXPECT_EQ(static_cast<int8_t>(out[2 + 17]), 8);    // 0.25 * 31.75 = 7.94
  EXPECT_EQ(static_cast<int8_t>(out[2 + 18]), 16);   // 15.875 -> 16
}

TEST(MkmodelTest, RejectsBadOptions) {
  Options o = MicroOptions(Arch::kQwen35Moe, GgmlType::kF32);
  o.split_count = 0;
  auto r = WriteModel(o, testing::MakeTempDir() + "/x.gguf");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("split count 0 is outside 1..76"));
  o.split_count = 1;
  o.shape.rope_dims = 10;
  r = WriteModel(o, testing::MakeTempDir() + "/x.gguf");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("rope_dims 10 must be even"));
  o = MicroOptions(Arch::kQwen3Moe, GgmlType::kQ4_K);
  r = WriteModel(o, testing::MakeTempDir() + "/x.gguf");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("type q4_k is not supported"));
  EXPECT_EQ(NamedShape(Arch::kQwen3Moe, "huge").status().message(),
            "mkmodel: --shape 'huge' is not one of tiny, micro");
  EXPECT_EQ(GenerateTensor(o, "blk.0.ssm_a").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sluice::mkmodel
