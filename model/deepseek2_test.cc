// deepseek2 on small random models written by mkmodel (hermetic; parity with
// llama.cpp is tools/parity_deepseek2_test): the description, the latent KV
// state, both attention layouts, batch against step-by-step, the variants
// (no q LoRA, softmax gating, no groups), bad keys, and the shared blocks it
// added (group-limited routing with a selection bias, YaRN RoPE and its
// attention scale).
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader/model_files.h"
#include "model/arch.h"
#include "model/cpu_model.h"
#include "model/engine.h"
#include "model/moe.h"
#include "model/rope_yarn.h"
#include "model/testing/mkmodel.h"

namespace sluice {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

mkmodel::Options Micro() {
  mkmodel::Options o;
  o.arch = mkmodel::Arch::kDeepseek2;
  o.shape = *mkmodel::NamedShape(o.arch, "micro");
  o.seed = 11;
  return o;
}

struct Loaded {
  std::unique_ptr<ModelFiles> files;
  std::unique_ptr<Model> model;
};

Loaded Load(const mkmodel::Options& o, const std::string& name, int threads = 1) {
  Loaded l;
  const std::string path = TempPath(name);
  auto written = mkmodel::WriteModel(o, path);
  EXPECT_TRUE(written.ok()) << written.status();
  if (!written.ok()) return l;
  auto files = ModelFiles::Open(path);
  EXPECT_TRUE(files.ok()) << files.status();
  if (!files.ok()) return l;
  l.files = *std::move(files);
  auto model = LoadCpuModel(*l.files, {.threads = threads});
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) l.model = *std::move(model);
  return l;
}

// The micro model in the split layout and in the older fused attn_kv_b
// (mkmodel draws the fused tensor from the split one's weights).
std::pair<Loaded, Loaded> LoadBothLayouts(const std::string& name) {
  mkmodel::Options fused = Micro();
  fused.shape.mla_fused = 1;
  return {Load(Micro(), name + "_split.gguf"), Load(fused, name + "_fused.gguf")};
}

absl::Status DescribeStatus(const mkmodel::Options& o, const std::string& name) {
  const std::string path = TempPath(name);
  auto written = mkmodel::WriteModel(o, path);
  if (!written.ok()) return written.status();
  auto files = ModelFiles::Open(path);
  if (!files.ok()) return files.status();
  return DescribeModel(**files).status();
}

// All rows of logits for `tokens` as one batch.
std::vector<float> Prefill(const Model& m, const std::vector<int32_t>& tokens) {
  auto state = m.CreateState(64);
  EXPECT_TRUE(state.ok());
  std::vector<float> logits;
  EXPECT_TRUE(m.Forward(tokens, **state, LogitRows::kAll, &logits).ok());
  return logits;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return d;
}

double StdDev(const std::vector<float>& v) {
  double mean = 0, var = 0;
  for (float x : v) mean += x;
  mean /= v.size();
  for (float x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / v.size());
}

const std::vector<int32_t> kPrompt = {5, 77, 130, 9, 250, 31, 64, 200, 12, 3};

TEST(Deepseek2Test, DescribesTheMicroModel) {
  Loaded l = Load(Micro(), "describe.gguf");
  ASSERT_NE(l.model, nullptr);
  auto d = DescribeModel(*l.files);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->layers.size(), 4u);
  EXPECT_EQ(d->layers[0].ffn, FfnKind::kDense);
  EXPECT_EQ(d->layers[0].moe.gate.n_expert, 0);
  for (int il = 1; il < 4; ++il) {
    EXPECT_EQ(d->layers[il].ffn, FfnKind::kMoe);
    EXPECT_NE(d->layers[il].moe.selection_bias, nullptr);
    EXPECT_EQ(d->layers[il].moe.shared_gate_inp, nullptr);  // ungated shared expert
  }
  for (const LayerDesc& b : d->layers) EXPECT_EQ(b.mixer, MixerKind::kLatentAttention);
  EXPECT_EQ(d->mla.kv_lora_rank, 32);
  EXPECT_EQ(d->mla.n_rot, 16);
  EXPECT_EQ(d->mla.head_k, 48);
  EXPECT_EQ(d->mla.head_v, 32);
  EXPECT_EQ(d->mla.q_lora_rank, 64);
  EXPECT_FALSE(d->layers[0].mla.k_b_transposed);
  EXPECT_EQ(d->moe.gating, ExpertGating::kSigmoid);
  EXPECT_EQ(d->moe.n_group, 4);
  EXPECT_EQ(d->moe.n_group_used, 2);
  EXPECT_FLOAT_EQ(d->moe.weights_scale, 2.5f);
  EXPECT_TRUE(d->moe.norm_weights);
  EXPECT_EQ(d->moe.shared_ff, 64);
  // YaRN factor 4 with mscale_all_dim 1: the scores scaled by
  // (1 + 0.1 ln 4)^2 / sqrt(48), the rotation's magnitude ~1.
  const double m = 1 + 0.1 * std::log(4.0);
  EXPECT_NEAR(d->mla.kq_scale, m * m / std::sqrt(48.0), 1e-6);
  EXPECT_NEAR(d->mla.rope.attn_factor * m, 1.0, 1e-6);
  EXPECT_EQ(d->info.arch, "deepseek2");
  EXPECT_EQ(d->info.n_attention_layers, 4);
}

// One latent row per token and block: (kv_lora_rank + n_rot) floats.
TEST(Deepseek2Test, StateIsTheLatentAndTheRopeKeyOnce) {
  Loaded l = Load(Micro(), "state.gguf");
  ASSERT_NE(l.model, nullptr);
  const uint64_t per_token = (32 + 16) * 4 * sizeof(float);
  EXPECT_EQ(l.model->StateBytes(100), 100 * per_token);
  auto state = l.model->CreateState(100);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ((*state)->bytes(), 100 * per_token);
}

// The older single attn_kv_b holds the same weights as attn_k_b/attn_v_b
// (mkmodel draws it from them): the same model, within the rounding of the
// half-precision attention.
TEST(Deepseek2Test, FusedKvBMatchesTheSplitLayout) {
  auto [split, fused] = LoadBothLayouts("layout");
  ASSERT_NE(split.model, nullptr);
  ASSERT_NE(fused.model, nullptr);
  auto d = DescribeModel(*fused.files);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->layers[0].mla.k_b_transposed);
  const std::vector<float> a = Prefill(*split.model, kPrompt);
  const std::vector<float> b = Prefill(*fused.model, kPrompt);
  EXPECT_LT(MaxAbsDiff(a, b), 0.01 * StdDev(a));
}

// A prompt as one batch and token by token give the same logits (within
// rounding; the batch runs as matrix-matrix products), on several threads
// too.
TEST(Deepseek2Test, BatchMatchesStepByStep) {
  Loaded l = Load(Micro(), "steps.gguf", /*threads=*/3);
  ASSERT_NE(l.model, nullptr);
  const std::vector<float> batch = Prefill(*l.model, kPrompt);
  auto state = l.model->CreateState(64);
  ASSERT_TRUE(state.ok());
  std::vector<float> steps, row;
  for (int32_t t : kPrompt) {
    ASSERT_TRUE(l.model->Forward({t}, **state, LogitRows::kLast, &row).ok());
    steps.insert(steps.end(), row.begin(), row.end());
  }
  EXPECT_LT(MaxAbsDiff(batch, steps), 0.01 * StdDev(batch));
}

// DeepSeek-V2-Lite's attention (no q LoRA: attn_q), softmax gating without
// groups, no rope scaling, no dense block: loads and runs.
TEST(Deepseek2Test, VariantsLoadAndRun) {
  mkmodel::Options o = Micro();
  o.shape.q_lora_rank = 0;
  o.shape.gating_func = 1;
  o.shape.n_group = 0;
  o.shape.n_dense_lead = 0;
  o.shape.yarn_factor = 0;
  o.shape.weights_norm = 0;
  o.shape.weights_scale = 1.0f;
  Loaded l = Load(o, "variant.gguf");
  ASSERT_NE(l.model, nullptr);
  auto d = DescribeModel(*l.files);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->mla.q_lora_rank, 0);
  EXPECT_EQ(d->moe.gating, ExpertGating::kSoftmax);
  EXPECT_EQ(d->moe.n_group, 1);
  EXPECT_EQ(d->layers[0].ffn, FfnKind::kMoe);
  EXPECT_NEAR(d->mla.kq_scale, 1 / std::sqrt(48.0), 1e-7);
  const std::vector<float> logits = Prefill(*l.model, kPrompt);
  ASSERT_EQ(logits.size(), kPrompt.size() * l.model->info().n_vocab);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

// Copies `src` to `dst` with metadata key `key` set to `value`.
void RewriteKey(const std::string& src, const std::string& dst, const std::string& key,
                const GgufValue& value) {
  auto files = ModelFiles::Open(src);
  ASSERT_TRUE(files.ok()) << files.status();
  auto w = GgufWriter::Create(dst);
  ASSERT_TRUE(w.ok()) << w.status();
  for (GgufKv kv : (*files)->metadata().metadata()) {
    if (kv.key == key) kv.value = value;
    ASSERT_TRUE((*w)->Add(kv.key, kv.value).ok());
  }
  for (const TensorEntry& t : (*files)->tensors().entries()) {
    ASSERT_TRUE((*w)->AddTensorInfo(t.name, t.type, {t.ne.begin(), t.ne.begin() + t.n_dims}).ok());
  }
  for (const TensorEntry& t : (*files)->tensors().entries()) {
    ASSERT_TRUE((*w)->WriteTensor(t.name, absl::MakeConstSpan(t.data, t.n_bytes)).ok());
  }
  ASSERT_TRUE((*w)->Finish().ok());
}

std::string DescribeError(const std::string& path) {
  auto files = ModelFiles::Open(path);
  if (!files.ok()) return std::string(files.status().message());
  return std::string(DescribeModel(**files).status().message());
}

TEST(Deepseek2Test, BadKeysAreRefusedNamingTheKey) {
  const std::string src = TempPath("keys_src.gguf");
  ASSERT_TRUE(mkmodel::WriteModel(Micro(), src).ok());
  const std::string a = TempPath("keys_a.gguf");
  RewriteKey(src, a, "deepseek2.attention.key_length", GgufValue::Scalar<uint32_t>(40));
  EXPECT_EQ(DescribeError(a),
            absl::StrCat(a, ": deepseek2.attention.key_length = 40: must equal kv_lora_rank "
                            "+ rope.dimension_count = 48 with key_length_mla"));
  const std::string b = TempPath("keys_b.gguf");
  RewriteKey(src, b, "deepseek2.expert_gating_func", GgufValue::Scalar<uint32_t>(3));
  EXPECT_EQ(DescribeError(b), absl::StrCat(b, ": deepseek2.expert_gating_func = 3: must be 1 "
                                              "(softmax) or 2 (sigmoid)"));
  const std::string c = TempPath("keys_c.gguf");
  RewriteKey(src, c, "deepseek2.expert_group_count", GgufValue::Scalar<uint32_t>(3));
  EXPECT_EQ(DescribeError(c), absl::StrCat(c, ": deepseek2.expert_group_count = 3: must "
                                              "divide expert_count 16"));
  const std::string d = TempPath("keys_d.gguf");
  RewriteKey(src, d, "deepseek2.rope.scaling.type", GgufValue::String("ntk"));
  EXPECT_EQ(DescribeError(d), absl::StrCat(d, ": deepseek2.rope.scaling.type = \"ntk\": must "
                                              "be none, linear or yarn"));
  const std::string e = TempPath("keys_e.gguf");
  RewriteKey(src, e, "deepseek2.expert_group_used_count", GgufValue::Scalar<uint32_t>(5));
  EXPECT_NE(DescribeError(e).find("deepseek2.expert_group_used_count = 5: must be in [1, "
                                  "expert_group_count 4]"),
            std::string::npos)
      << DescribeError(e);
}

// The CUDA backend takes both layouts (the fused one's K_b unfused at
// load): this binary has no CUDA backend, and both files get as far as
// asking for it.
TEST(Deepseek2Test, CudaBackendTakesBothLayouts) {
  EngineOptions o;
  o.backend = Backend::kCuda;
  for (const uint32_t fused : {0u, 1u}) {
    mkmodel::Options m = Micro();
    m.shape.mla_fused = fused;
    const std::string path = TempPath(absl::StrCat("cuda_layout", fused, ".gguf"));
    ASSERT_TRUE(mkmodel::WriteModel(m, path).ok());
    auto files = ModelFiles::Open(path);
    ASSERT_TRUE(files.ok()) << files.status();
    EXPECT_EQ(LoadModel(**files, o).status().code(), absl::StatusCode::kUnavailable) << fused;
  }
}

// UnfusedKb turns the fused attn_kv_b's K_b (per head nope rows of the
// latent) into the split layout's (per head latent rows of nope): on the
// f32 micro model, mkmodel's split attn_k_b bit for bit.
TEST(Deepseek2Test, UnfusedKbIsTheSplitLayoutsKb) {
  auto [split, fused] = LoadBothLayouts("unfuse");
  ASSERT_NE(split.model, nullptr);
  ASSERT_NE(fused.model, nullptr);
  auto ds = DescribeModel(*split.files);
  auto df = DescribeModel(*fused.files);
  ASSERT_TRUE(ds.ok() && df.ok());
  for (size_t il = 0; il < ds->layers.size(); ++il) {
    const MlaWeights& ws = ds->layers[il].mla;
    ASSERT_EQ(ws.k_b.type, GgmlType::kF32);
    EXPECT_EQ(UnfusedKb(ws).status().code(), absl::StatusCode::kInvalidArgument);
    auto got = UnfusedKb(df->layers[il].mla);
    ASSERT_TRUE(got.ok()) << got.status();
    const int64_t lat = ws.k_b.rows, nope = ws.k_b.cols;
    ASSERT_EQ(got->size(), static_cast<size_t>(ws.k_b.n_expert * lat * nope));
    int differ = 0;
    for (int64_t h = 0; h < ws.k_b.n_expert; ++h) {
      const Matrix m = ws.k_b.expert(h);
      for (int64_t r = 0; r < lat; ++r) {
        const float* want = reinterpret_cast<const float*>(m.data + r * m.row_bytes);
        for (int64_t c = 0; c < nope; ++c) {
          differ += (*got)[(h * lat + r) * nope + c] != want[c];
        }
      }
    }
    EXPECT_EQ(differ, 0) << "block " << il;
  }
}

// ---- The shared blocks deepseek2 added ------------------------------------

TEST(RouteTokenWithTest, SigmoidBiasChoosesUnbiasedWeightsScaled) {
  MoeConfig c;
  c.n_expert = 4;
  c.n_expert_used = 2;
  c.gating = ExpertGating::kSigmoid;
  c.norm_weights = true;
  c.weights_scale = 2.0f;
  const float logits[4] = {2.0f, 1.0f, 0.0f, -1.0f};
  // The bias makes experts 3 and 2 the choice; their weights are their
  // unbiased sigmoids, renormalised, then doubled.
  const float bias[4] = {0.0f, 0.0f, 1.0f, 2.0f};
  Routing r;
  RouteTokenWith(c, logits, bias, &r);
  EXPECT_EQ(r.expert[0], 3);
  EXPECT_EQ(r.expert[1], 2);
  const double s3 = 1 / (1 + std::exp(1.0)), s2 = 0.5;
  EXPECT_NEAR(r.weight[0], 2 * s3 / (s3 + s2), 1e-6);
  EXPECT_NEAR(r.weight[1], 2 * s2 / (s3 + s2), 1e-6);
  // Without norm the raw sigmoids, scaled.
  c.norm_weights = false;
  RouteTokenWith(c, logits, bias, &r);
  EXPECT_NEAR(r.weight[0], 2 * s3, 1e-6);
}

TEST(RouteTokenWithTest, GroupsLimitTheChoice) {
  MoeConfig c;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.gating = ExpertGating::kSigmoid;
  c.n_group = 4;  // {0,1} {2,3} {4,5} {6,7}
  c.n_group_used = 1;
  // Expert 0 is the single best, but group {6,7} has the best pair sum.
  const float logits[8] = {3.0f, -3.0f, 0.0f, 0.0f, -1.0f, -1.0f, 1.5f, 1.5f};
  Routing r;
  RouteTokenWith(c, logits, nullptr, &r);
  EXPECT_EQ(r.expert[0], 6);
  EXPECT_EQ(r.expert[1], 7);
  c.n_group_used = 2;  // {6,7} and {0,1}: expert 0 and then 6
  RouteTokenWith(c, logits, nullptr, &r);
  EXPECT_EQ(r.expert[0], 0);
  EXPECT_EQ(r.expert[1], 6);
}

TEST(RouteTokenWithTest, PlainConfigIsRouteToken) {
  MoeConfig c;
  c.n_expert = 5;
  c.n_expert_used = 3;
  const float logits[5] = {0.3f, -1.0f, 2.0f, 0.1f, 1.0f};
  Routing a, b;
  RouteToken(logits, 5, 3, &a);
  RouteTokenWith(c, logits, nullptr, &b);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.expert[i], b.expert[i]);
    EXPECT_EQ(a.weight[i], b.weight[i]);
  }
}

TEST(ScaledRopeTest, NormalPairsAndYarnRamp) {
  RopeScaling none;
  RopeAndScale plain = YarnRopeAndScale(4, 10000.0f, none, 16);
  EXPECT_FLOAT_EQ(plain.kq_scale, 0.25f);
  std::vector<float> c(2), s(2);
  ScaledRopeAngles(plain.rope, 1, c.data(), s.data());
  EXPECT_FLOAT_EQ(c[0], std::cos(1.0f));
  EXPECT_FLOAT_EQ(s[1], std::sin(0.01f));
  // Pairs (0, 1) and (2, 3) rotate together ("normal" RoPE).
  float x[4] = {1, 0, 1, 0};
  ApplyScaledRope(plain.rope, x, c.data(), s.data());
  EXPECT_FLOAT_EQ(x[0], std::cos(1.0f));
  EXPECT_FLOAT_EQ(x[1], std::sin(1.0f));
  EXPECT_FLOAT_EQ(x[3], std::sin(0.01f));

  // YaRN: the golden's corrections dims [1, 5] for 16 dims over 1024
  // positions; pair 0 extrapolates (the unscaled angle), pairs from 5 on
  // interpolate (a quarter of it), magnitude ~1.
  RopeScaling yarn;
  yarn.type = RopeScaling::Type::kYarn;
  yarn.factor = 4;
  yarn.original_context = 1024;
  yarn.yarn_log_multiplier = 0.1f;
  RopeAndScale y = YarnRopeAndScale(16, 10000.0f, yarn, 48);
  EXPECT_EQ(y.rope.corr_dims[0], 1.0f);
  EXPECT_EQ(y.rope.corr_dims[1], 5.0f);
  std::vector<float> yc(8), ys(8);
  ScaledRopeAngles(y.rope, 3, yc.data(), ys.data());
  EXPECT_NEAR(yc[0], std::cos(3.0), 1e-6);
  const double theta7 = 3 * std::pow(10000.0, -14.0 / 16);
  EXPECT_NEAR(yc[7], std::cos(theta7 / 4), 1e-6);
  EXPECT_NEAR(ys[7], std::sin(theta7 / 4), 1e-6);
}

}  // namespace
}  // namespace sluice
