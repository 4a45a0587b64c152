#include "model/testing/mkmodel.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "base/testing/goldens.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "loader/testing/gguf_bytes.h"
#include "model/cpu_model.h"
#include "model/testing/mkmodel_routing.h"

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

// The metadata (keys in order, types, values but the vocabulary's) and the
// tensor table (order, types, shapes) of the model `o` writes are the
// golden file's.
void ExpectGoldenLayout(const std::string& golden_path, const Options& o) {
  auto golden = ModelFiles::Open(golden_path);
  ASSERT_TRUE(golden.ok()) << golden.status();
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

TEST_P(MkmodelGoldenLayoutTest, MatchesGoldenMicroModel) {
  SLUICE_REQUIRE_GOLDENS(dir);
  const Arch arch = GetParam();
  Options o = MicroOptions(arch, GgmlType::kF32);
  o.name = absl::StrCat(ArchName(arch), "-micro");
  ExpectGoldenLayout(absl::StrCat(dir, "/", ArchName(arch), "-micro-f32.gguf"), o);
}

// deepseek2's micro shape is ../goldens-deepseek2's model.
TEST(MkmodelDeepseek2Test, MatchesGoldenMicroModel) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  Options o = MicroOptions(Arch::kDeepseek2, GgmlType::kF32);
  o.name = "deepseek2-micro-f32";
  ExpectGoldenLayout(dir + "/deepseek2-micro-f32.gguf", o);
}

// The benchmark shape has Kimi-K2's layers (its config.json: hidden 7168,
// 64 heads, q LoRA 1536, KV LoRA 512, rope 64 + nope 128, v 128, 384
// experts of 2048, 8 used, 1 shared, first block dense of 18432).
TEST(MkmodelDeepseek2Test, KimiK2Shape) {
  const ModelShape s = *NamedShape(Arch::kDeepseek2, "kimi_k2");
  EXPECT_EQ(s.n_embd, 7168u);
  EXPECT_EQ(s.n_head, 64u);
  EXPECT_EQ(s.q_lora_rank, 1536u);
  EXPECT_EQ(s.kv_lora_rank, 512u);
  EXPECT_EQ(s.rope_dims, 64u);
  EXPECT_EQ(s.head_dim, 192u);
  EXPECT_EQ(s.v_head_dim, 128u);
  EXPECT_EQ(s.n_expert, 384u);
  EXPECT_EQ(s.expert_ff, 2048u);
  EXPECT_EQ(s.n_expert_used, 8u);
  EXPECT_EQ(s.n_shared_experts, 1u);
  EXPECT_EQ(s.n_dense_lead, 1u);
  EXPECT_EQ(s.feed_forward, 18432u);
  EXPECT_EQ(s.n_layer, 8u);
  EXPECT_EQ(NamedShape(Arch::kQwen35Moe, "kimi_k2").status().message(),
            "mkmodel: --shape 'kimi_k2' is a deepseek2 shape");
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
            "mkmodel: --shape 'huge' is not one of tiny, micro, bench35, bench397");
  EXPECT_EQ(GenerateTensor(o, "blk.0.ssm_a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(NamedShape(Arch::kQwen3Moe, "bench35").status().message(),
            "mkmodel: --shape 'bench35' is a qwen35moe shape");
  EXPECT_EQ(ParseMix("q4_k_s").status().message(),
            "mkmodel: --mix 'q4_k_s' is not one of none, q4_k_m, ud_q1_0");
  o = MicroOptions(Arch::kQwen35Moe, GgmlType::kF32);
  o.routing_locality = -1;
  r = WriteModel(o, testing::MakeTempDir() + "/x.gguf");
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("routing locality -1 is not a finite number >= 0"));
}

TEST(MkmodelBenchTest, PresetsHaveQwen35LayerShapes) {
  const ModelShape a = *NamedShape(Arch::kQwen35Moe, "bench35");
  EXPECT_EQ(a.n_embd, 2048u);
  EXPECT_EQ(a.n_layer, 8u);
  EXPECT_EQ(a.n_head * 10 + a.n_head_kv, 162u);
  EXPECT_EQ(a.head_dim, 256u);
  EXPECT_EQ(a.n_expert, 256u);
  EXPECT_EQ(a.n_expert_used, 8u);
  EXPECT_EQ(a.expert_ff, 512u);
  EXPECT_EQ(a.shared_ff, 512u);
  EXPECT_EQ(a.ssm_state, 128u);
  EXPECT_EQ(a.ssm_group, 16u);
  EXPECT_EQ(a.ssm_dt_rank, 32u);
  EXPECT_EQ(a.rope_dims, 64u);
  EXPECT_EQ(a.rope_sections, (std::array<int32_t, 4>{11, 11, 10, 0}));
  EXPECT_EQ(256 + a.n_merges + 3, 1300u);
  const ModelShape b = *NamedShape(Arch::kQwen35Moe, "bench397");
  EXPECT_EQ(b.n_embd, 4096u);
  EXPECT_EQ(b.n_head, 32u);
  EXPECT_EQ(b.n_expert, 512u);
  EXPECT_EQ(b.n_expert_used, 10u);
  EXPECT_EQ(b.expert_ff, 1024u);
  EXPECT_EQ(b.ssm_dt_rank, 64u);
  EXPECT_EQ(b.full_attention_interval, 4u);
}

// A bench preset with its dims cut down so a test writes and runs it in
// well under a second; head_dim, rope, the DeltaNet head ratio and the
// vocabulary stay the preset's.
Options SmallBench(const std::string& preset, Mix mix) {
  Options o;
  o.shape = *NamedShape(Arch::kQwen35Moe, preset);
  const uint32_t heads_per_group = o.shape.ssm_dt_rank / o.shape.ssm_group;
  o.shape.n_embd = 256;
  o.shape.n_layer = 4;
  o.shape.n_head = 4;
  o.shape.n_expert = 8;
  o.shape.n_expert_used = 2;
  o.shape.expert_ff = 256;
  o.shape.shared_ff = 256;
  o.shape.ssm_group = 2;
  o.shape.ssm_dt_rank = 2 * heads_per_group;
  o.mix = mix;
  o.threads = 2;
  o.chunk_elements = 1 << 16;  // several chunks per expert tensor
  return o;
}

struct MixCase {
  std::string preset;
  Mix mix;
};

class MkmodelMixTest : public ::testing::TestWithParam<MixCase> {};

TEST_P(MkmodelMixTest, LoadsWithMixTypesAndGivesFiniteLogits) {
  const Options o = SmallBench(GetParam().preset, GetParam().mix);
  auto files = WriteAndOpen(o, testing::MakeTempDir() + "/b.gguf");
  ASSERT_NE(files, nullptr);
  EXPECT_EQ(*files->metadata().GetU32("general.file_type"), 15u);
  auto type_of = [&](const std::string& name) {
    const TensorEntry* e = files->tensors().Find(name);
    EXPECT_NE(e, nullptr) << name;
    return e ? std::string(TraitsOf(e->type).name) : std::string("missing");
  };
  for (const char* f32 : {"blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_inp_shexp.weight",
                          "blk.0.ssm_conv1d.weight", "blk.0.ssm_a", "blk.0.ssm_dt.bias",
                          "blk.1.attn_norm.weight", "output_norm.weight"}) {
    EXPECT_EQ(type_of(f32), "f32") << f32;
  }
  EXPECT_EQ(type_of("output.weight"), "q6_k");
  if (o.mix == Mix::kQ4_K_M) {
    EXPECT_EQ(type_of("token_embd.weight"), "q4_k");
    EXPECT_EQ(type_of("blk.0.ffn_gate_exps.weight"), "q4_k");
    EXPECT_EQ(type_of("blk.0.ffn_up_exps.weight"), "q4_k");
    // use_more_bits over 4 blocks picks blocks 2 and 3.
    EXPECT_EQ(type_of("blk.1.ffn_down_exps.weight"), "q4_k");
    EXPECT_EQ(type_of("blk.2.ffn_down_exps.weight"), "q6_k");
    EXPECT_EQ(type_of("blk.3.ffn_down_shexp.weight"), "q6_k");
    EXPECT_EQ(type_of("blk.3.attn_v.weight"), "q6_k");  // the only attention block
    EXPECT_EQ(type_of("blk.3.attn_q.weight"), "q4_k");
    EXPECT_EQ(type_of("blk.0.attn_qkv.weight"), "q5_k");
    EXPECT_EQ(type_of("blk.0.ssm_out.weight"), "q4_k");
  } else {
    EXPECT_EQ(type_of("token_embd.weight"), "q8_0");
    EXPECT_EQ(type_of("blk.0.ffn_gate_exps.weight"), "q1_0");
    EXPECT_EQ(type_of("blk.2.ffn_down_exps.weight"), "q1_0");
    EXPECT_EQ(type_of("blk.0.ffn_down_shexp.weight"), "q6_k");
    EXPECT_EQ(type_of("blk.0.ffn_up_shexp.weight"), "q5_k");
    EXPECT_EQ(type_of("blk.0.attn_qkv.weight"), "q4_k");
    EXPECT_EQ(type_of("blk.3.attn_v.weight"), "q4_k");
    EXPECT_EQ(type_of("blk.0.ssm_beta.weight"), "q4_k");
  }

  auto model = LoadCpuModel(*files);
  ASSERT_TRUE(model.ok()) << model.status();
  auto state = (*model)->CreateState(16);
  ASSERT_TRUE(state.ok()) << state.status();
  const std::vector<int32_t> tokens = {12, 300, 1299, 7, 45, 45};
  std::vector<float> logits;
  ASSERT_TRUE((*model)->Forward(tokens, **state, LogitRows::kAll, &logits).ok());
  ASSERT_EQ(logits.size(), tokens.size() * 1300);
  double sum = 0, sq = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += v * v;
  }
  const double stddev = std::sqrt(sq / logits.size() - std::pow(sum / logits.size(), 2));
  std::printf("%s %s: logit std %.3f\n", GetParam().preset.c_str(), MixName(o.mix), stddev);
  EXPECT_GT(stddev, 0.1);  // the output head's 0.5 log-normal row gains
}

INSTANTIATE_TEST_SUITE_P(
    Presets, MkmodelMixTest,
    ::testing::Values(MixCase{"bench35", Mix::kQ4_K_M}, MixCase{"bench397", Mix::kUdQ1_0}),
    [](const auto& info) {
      return info.param.preset + "_" + MixName(info.param.mix);
    });

TEST(MkmodelBenchTest, ThreadsAndChunksDoNotChangeBytes) {
  const std::string dir = testing::MakeTempDir();
  Options o = SmallBench("bench35", Mix::kUdQ1_0);
  o.shape.n_layer = 1;
  o.routing_locality = 1;
  ASSERT_TRUE(WriteModel(o, dir + "/a.gguf").ok());
  o.threads = 3;
  o.chunk_elements = 1000;  // rows of 256 and 1024 elements, odd chunking
  ASSERT_TRUE(WriteModel(o, dir + "/b.gguf").ok());
  const std::string a = ReadAll(dir + "/a.gguf");
  EXPECT_GT(a.size(), 500000u);
  EXPECT_EQ(a, ReadAll(dir + "/b.gguf"));
}

// Layer 0's router over the vocabulary, as mkmodel prints it.
TEST(MkmodelRoutingTest, LocalityConcentratesLayerZeroRouting) {
  Options o;
  o.shape = *NamedShape(Arch::kQwen35Moe, "tiny");
  o.shape.n_expert = 64;
  o.shape.n_merges = 1041;
  auto uniform = MeasureRouting(o);
  ASSERT_TRUE(uniform.ok()) << uniform.status();
  std::printf("%s\n", FormatRoutingStats(o, *uniform).c_str());
  o.routing_locality = 1.0f;
  auto local = MeasureRouting(o);
  ASSERT_TRUE(local.ok()) << local.status();
  std::printf("%s\n", FormatRoutingStats(o, *local).c_str());
  EXPECT_EQ(uniform->tokens, 1300);
  EXPECT_EQ(uniform->top_decile, 6);  // uniform share 6/64 = 0.094
  EXPECT_LT(uniform->top_decile_share, 0.15);
  EXPECT_GT(uniform->entropy_bits, 0.97 * uniform->max_entropy_bits);
  EXPECT_GT(local->top_decile_share, 0.35);
  EXPECT_LT(local->entropy_bits, uniform->entropy_bits - 0.5);
}

// Counts the experts every MoE block of the engine picks.
class CountingObserver : public RoutingObserver {
 public:
  void OnRouting(int64_t layer, int64_t k, absl::Span<const Routing> routes) override {
    for (const Routing& r : routes) {
      for (int64_t i = 0; i < k; ++i) ++hits_[{layer, r.expert[i]}];
    }
  }
  // Share of the selections in `layer` taken by its `top` most chosen experts.
  double TopShare(int64_t layer, int top) const {
    std::vector<int64_t> counts;
    int64_t total = 0;
    for (const auto& [key, n] : hits_) {
      if (key.first != layer) continue;
      counts.push_back(n);
      total += n;
    }
    std::sort(counts.rbegin(), counts.rend());
    int64_t sum = 0;
    for (int i = 0; i < top && i < static_cast<int>(counts.size()); ++i) sum += counts[i];
    return total ? static_cast<double>(sum) / total : 0;
  }

 private:
  std::map<std::pair<int64_t, int64_t>, int64_t> hits_;
};

// The engine's own routing, every block, on real hidden states: the bias
// survives the mixers and the residual stream.
TEST(MkmodelRoutingTest, LocalityReachesEveryBlockOfTheEngine) {
  double shares[2][4];
  for (int local = 0; local < 2; ++local) {
    Options o = MicroOptions(Arch::kQwen35Moe, GgmlType::kF32);
    o.shape.n_expert = 32;
    o.routing_locality = local ? 1.0f : 0.0f;
    auto files = WriteAndOpen(o, testing::MakeTempDir() + "/r.gguf");
    ASSERT_NE(files, nullptr);
    CountingObserver observer;
    auto model = LoadCpuModel(*files, {.threads = 1, .routing_observer = &observer});
    ASSERT_TRUE(model.ok()) << model.status();
    auto state = (*model)->CreateState(200);
    std::vector<int32_t> tokens(200);
    for (int i = 0; i < 200; ++i) tokens[i] = (i * 37) % 320;
    std::vector<float> logits;
    ASSERT_TRUE((*model)->Forward(tokens, **state, LogitRows::kLast, &logits).ok());
    for (int layer = 0; layer < 4; ++layer) {
      shares[local][layer] = observer.TopShare(layer, 3);  // top 10% of 32
      std::printf("locality %d block %d: top-3 share %.3f (uniform 0.094)\n", local, layer,
                  shares[local][layer]);
    }
  }
  for (int layer = 0; layer < 4; ++layer) {
    EXPECT_LT(shares[0][layer], 0.2) << layer;
    EXPECT_GT(shares[1][layer], 0.3) << layer;
  }
}

}  // namespace
}  // namespace sluice::mkmodel
