// Loading and forward-pass behaviour of both architectures on small random
// models written by tools/mkmodel (hermetic: no goldens needed). Logit
// parity with llama.cpp is tools/parity_test.
#include "model/model.h"

#include "model/cpu_model.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader/model_files.h"
#include "model/testing/mkmodel.h"

namespace sluice {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string WriteMicro(mkmodel::Arch arch, GgmlType type,
                       const std::string& name) {
  mkmodel::Options o;
  o.arch = arch;
  o.shape = *mkmodel::NamedShape(arch, "micro");
  o.type = type;
  o.seed = 7;
  const std::string path = TempPath(name);
  auto written = mkmodel::WriteModel(o, path);
  EXPECT_TRUE(written.ok()) << written.status();
  return path;
}

using EditNe = std::function<void(const std::string&, std::vector<uint64_t>&)>;

// An EditNe that keeps every tensor's shape.
void KeepShapes(const std::string&, std::vector<uint64_t>&) {}

// Copies `src` to `dst`, letting `edit_key` drop (return false) or rewrite
// metadata, appending the keys `extra`, and letting `edit_ne` change a
// tensor's shape (its data is truncated or zero-padded to the new size).
void Rewrite(const std::string& src, const std::string& dst,
             const std::function<bool(GgufKv&)>& edit_key, const EditNe& edit_ne,
             const std::vector<GgufKv>& extra = {}) {
  auto files = ModelFiles::Open(src);
  ASSERT_TRUE(files.ok()) << files.status();
  auto w = GgufWriter::Create(dst);
  ASSERT_TRUE(w.ok()) << w.status();
  for (GgufKv kv : (*files)->metadata().metadata()) {
    if (edit_key(kv)) {
      ASSERT_TRUE((*w)->Add(kv.key, kv.value).ok());
    }
  }
  for (const GgufKv& kv : extra) ASSERT_TRUE((*w)->Add(kv.key, kv.value).ok());
  std::vector<std::vector<uint8_t>> data;
  for (const TensorEntry& t : (*files)->tensors().entries()) {
    std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    edit_ne(t.name, ne);
    ASSERT_TRUE((*w)->AddTensorInfo(t.name, t.type, ne).ok());
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    bytes.resize((*w)->TensorBytes(t.name), 0);
    data.push_back(std::move(bytes));
  }
  size_t i = 0;
  for (const TensorEntry& t : (*files)->tensors().entries()) {
    ASSERT_TRUE((*w)->WriteTensor(t.name, data[i++]).ok());
  }
  ASSERT_TRUE((*w)->Finish().ok());
}

struct Loaded {
  std::unique_ptr<ModelFiles> files;
  std::unique_ptr<Model> model;
};

// The status LoadCpuModel gives for `path`, whose files must open.
absl::Status LoadStatus(const std::string& path) {
  auto files = ModelFiles::Open(path);
  EXPECT_TRUE(files.ok()) << files.status();
  if (!files.ok()) return files.status();
  return LoadCpuModel(**files).status();
}

std::unique_ptr<SequenceState> NewState(const Model& model, int capacity) {
  auto state = model.CreateState(capacity);
  EXPECT_TRUE(state.ok()) << state.status();
  return state.ok() ? *std::move(state) : nullptr;
}

Loaded Load(const std::string& path, int threads = 1) {
  Loaded l;
  auto files = ModelFiles::Open(path);
  EXPECT_TRUE(files.ok()) << files.status();
  l.files = *std::move(files);
  auto model = LoadCpuModel(*l.files, {.threads = threads});
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) l.model = *std::move(model);
  return l;
}

double MaxAbsDiff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

struct Case {
  mkmodel::Arch arch;
  GgmlType type;
  const char* name;
};

class ForwardTest : public ::testing::TestWithParam<Case> {};

// One batch, two batches and token-by-token decoding must agree: the KV
// cache, the conv state and the recurrent state carry across calls.
TEST_P(ForwardTest, BatchEqualsSplitEqualsTokenByToken) {
  const Case c = GetParam();
  Loaded l = Load(WriteMicro(c.arch, c.type, absl::StrCat(c.name, ".gguf")));
  ASSERT_NE(l.model, nullptr);
  const int64_t v = l.model->info().n_vocab;
  const std::vector<int32_t> ids = {5, 300, 17, 42, 1, 99, 250, 7, 8, 310, 2, 64};
  const int n = static_cast<int>(ids.size());

  auto batch_state = NewState(*l.model, 32);
  std::vector<float> batch;
  ASSERT_TRUE(l.model->Forward(ids, *batch_state, LogitRows::kAll, &batch).ok());
  ASSERT_EQ(batch.size(), static_cast<size_t>(n * v));
  EXPECT_EQ(batch_state->position(), n);

  // The same file on a 2-thread pool, evaluated in two pieces.
  Loaded pooled = Load(l.files->shard(0).path, 2);
  ASSERT_NE(pooled.model, nullptr);
  auto split_state = NewState(*pooled.model, 32);
  std::vector<float> first, second;
  const absl::Span<const int32_t> all(ids);
  ASSERT_TRUE(pooled.model->Forward(all.subspan(0, 7), *split_state, LogitRows::kNone, &first).ok());
  EXPECT_TRUE(first.empty());
  ASSERT_TRUE(pooled.model->Forward(all.subspan(7), *split_state, LogitRows::kLast, &second).ok());
  ASSERT_EQ(second.size(), static_cast<size_t>(v));
  const double split_diff = MaxAbsDiff(second.data(), &batch[(n - 1) * v], v);
  EXPECT_LT(split_diff, 1e-4) << c.name;

  auto step_state = NewState(*l.model, 32);
  double worst = 0;
  for (int t = 0; t < n; ++t) {
    std::vector<float> row;
    ASSERT_TRUE(l.model->Forward(all.subspan(t, 1), *step_state, LogitRows::kLast, &row).ok());
    worst = std::max(worst, MaxAbsDiff(row.data(), &batch[t * v], v));
  }
  std::printf("%s: max |batch - split| %.3g, max |batch - stepwise| %.3g\n",
              c.name, split_diff, worst);
  EXPECT_LT(worst, 1e-4) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Archs, ForwardTest,
    ::testing::Values(Case{mkmodel::Arch::kQwen3Moe, GgmlType::kF32, "q3_f32"},
                      Case{mkmodel::Arch::kQwen35Moe, GgmlType::kF32, "q35_f32"},
                      Case{mkmodel::Arch::kQwen35Moe, GgmlType::kQ8_0, "q35_q8"}),
    [](const auto& info) { return std::string(info.param.name); });

// A batch longer than kMaxMicroBatch runs in pieces; the rows equal those of
// a different split.
TEST(ModelTest, LongBatchEqualsAnotherSplit) {
  Loaded l = Load(WriteMicro(mkmodel::Arch::kQwen35Moe, GgmlType::kF32, "long.gguf"));
  ASSERT_NE(l.model, nullptr);
  const int64_t v = l.model->info().n_vocab;
  std::vector<int32_t> ids(Model::kMaxMicroBatch + 88);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919) % v);
  auto one = NewState(*l.model, 1024);
  std::vector<float> all;
  ASSERT_TRUE(l.model->Forward(ids, *one, LogitRows::kAll, &all).ok());
  ASSERT_EQ(all.size(), ids.size() * v);
  EXPECT_EQ(one->position(), static_cast<int>(ids.size()));

  auto two = NewState(*l.model, 1024);
  std::vector<float> a, b, last;
  const absl::Span<const int32_t> span(ids);
  ASSERT_TRUE(l.model->Forward(span.subspan(0, 300), *two, LogitRows::kAll, &a).ok());
  ASSERT_TRUE(l.model->Forward(span.subspan(300), *two, LogitRows::kAll, &b).ok());
  a.insert(a.end(), b.begin(), b.end());
  EXPECT_EQ(a, all);

  auto three = NewState(*l.model, 1024);
  ASSERT_TRUE(l.model->Forward(ids, *three, LogitRows::kLast, &last).ok());
  EXPECT_EQ(last, std::vector<float>(all.end() - v, all.end()));
}

TEST(ModelTest, InfoDescribesTheHybridLayout) {
  Loaded l = Load(WriteMicro(mkmodel::Arch::kQwen35Moe, GgmlType::kF32, "info.gguf"));
  ASSERT_NE(l.model, nullptr);
  const ModelInfo& i = l.model->info();
  EXPECT_EQ(i.arch, "qwen35moe");
  EXPECT_EQ(i.n_layer, 4);
  EXPECT_EQ(i.n_attention_layers, 1);  // block 3 (interval 4)
  EXPECT_EQ(i.n_recurrent_layers, 3);
  EXPECT_EQ(i.n_rot, 8);
  EXPECT_TRUE(i.all_f32);
  // 1 attention block: KV 2 x 10 x (2 heads x 32); 3 DeltaNet blocks: conv
  // 3 x (2*32*2 + 32*4) and state 4 x 32 x 32.
  EXPECT_EQ(l.model->StateBytes(10),
            (2 * 10 * 64 + 3 * (3 * 256 + 4 * 32 * 32)) * sizeof(float));
}

// A copy of `src` with metadata keys appended.
std::string WithKeys(const std::string& src, const std::string& name,
                     std::vector<GgufKv> extra) {
  const std::string out = TempPath(name);
  Rewrite(src, out, [](GgufKv&) { return true; }, KeepShapes, extra);
  return out;
}

// A copy of `src` with each block's attn_q/k/v fused into attn_qkv and
// ffn_gate_exps/ffn_up_exps into ffn_gate_up_exps (per expert: gate rows,
// then up rows), the layouts llama.cpp also accepts.
void WriteFused(const std::string& src, const std::string& dst) {
  auto files = ModelFiles::Open(src);
  ASSERT_TRUE(files.ok());
  const TensorTable& table = (*files)->tensors();
  auto w = GgufWriter::Create(dst);
  ASSERT_TRUE(w.ok());
  for (const GgufKv& kv : (*files)->metadata().metadata()) {
    ASSERT_TRUE((*w)->Add(kv.key, kv.value).ok());
  }
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  for (const TensorEntry& t : table.entries()) {
    std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    std::string name = t.name;
    const std::string block = name.substr(0, name.rfind('.', name.size() - 8) + 1);
    if (ends_with(name, ".attn_q.weight")) {
      name = block + "attn_qkv.weight";
      for (const char* part : {"attn_k.weight", "attn_v.weight"}) {
        const TensorEntry* p = table.Find(block + part);
        bytes.insert(bytes.end(), p->data, p->data + p->n_bytes);
        ne[1] += p->ne[1];
      }
    } else if (ends_with(name, ".ffn_gate_exps.weight")) {
      name = block + "ffn_gate_up_exps.weight";
      const TensorEntry* up = table.Find(block + "ffn_up_exps.weight");
      bytes.clear();
      for (uint64_t e = 0; e < t.n_experts; ++e) {
        bytes.insert(bytes.end(), t.expert_data(e), t.expert_data(e) + t.expert_slice_bytes);
        bytes.insert(bytes.end(), up->expert_data(e), up->expert_data(e) + up->expert_slice_bytes);
      }
      ne[1] *= 2;
    } else if (ends_with(name, ".attn_k.weight") || ends_with(name, ".attn_v.weight") ||
               ends_with(name, ".ffn_up_exps.weight")) {
      continue;
    }
    ASSERT_TRUE((*w)->AddTensorInfo(name, t.type, ne).ok()) << name;
    out.emplace_back(name, std::move(bytes));
  }
  for (const auto& [name, bytes] : out) {
    ASSERT_TRUE((*w)->WriteTensor(name, bytes).ok()) << name;
  }
  ASSERT_TRUE((*w)->Finish().ok());
}

TEST(ModelTest, FusedQkvAndGateUpGiveIdenticalLogits) {
  for (const auto arch : {mkmodel::Arch::kQwen3Moe, mkmodel::Arch::kQwen35Moe}) {
    const std::string name = mkmodel::ArchName(arch);
    const std::string src = WriteMicro(arch, GgmlType::kQ8_0, name + "_plain.gguf");
    const std::string fused = TempPath(name + "_fused.gguf");
    WriteFused(src, fused);
    Loaded a = Load(src);
    Loaded b = Load(fused);
    ASSERT_NE(a.model, nullptr);
    ASSERT_NE(b.model, nullptr);
    ASSERT_TRUE(b.files->tensors().Find("blk.0.ffn_gate_up_exps.weight") != nullptr);
    ASSERT_TRUE(b.files->tensors().Find("blk.3.attn_q.weight") == nullptr);
    const std::vector<int32_t> ids = {3, 141, 59, 26, 5};
    std::vector<float> la, lb;
    auto sa = NewState(*a.model, 16);
    auto sb = NewState(*b.model, 16);
    ASSERT_TRUE(a.model->Forward(ids, *sa, LogitRows::kAll, &la).ok());
    ASSERT_TRUE(b.model->Forward(ids, *sb, LogitRows::kAll, &lb).ok());
    EXPECT_EQ(la, lb) << name;
    ASSERT_TRUE(a.model->Forward({7}, *sa, LogitRows::kLast, &la).ok());
    ASSERT_TRUE(b.model->Forward({7}, *sb, LogitRows::kLast, &lb).ok());
    EXPECT_EQ(la, lb) << name;
  }
}

TEST(ModelTest, NextNBlocksAreNotRun) {
  const std::string src = WriteMicro(mkmodel::Arch::kQwen35Moe, GgmlType::kF32, "nextn_src.gguf");
  const std::string path = WithKeys(
      src, "nextn.gguf",
      {{"qwen35moe.nextn_predict_layers", GgufValue::Scalar<uint32_t>(1)}});
  Loaded l = Load(path);
  ASSERT_NE(l.model, nullptr);
  // Blocks 0..2 (DeltaNet) form the trunk; block 3 is the NextN block.
  EXPECT_EQ(l.model->info().n_layer, 3);
  EXPECT_EQ(l.model->info().n_attention_layers, 0);
  auto state = NewState(*l.model, 8);
  std::vector<float> logits;
  EXPECT_TRUE(l.model->Forward({1, 2, 3}, *state, LogitRows::kLast, &logits).ok());
}

TEST(ModelTest, RecurrentLayersArrayOverridesTheInterval) {
  const std::string src = WriteMicro(mkmodel::Arch::kQwen35Moe, GgmlType::kF32, "recr_src.gguf");
  const std::string path = WithKeys(
      src, "recr.gguf",
      {{"qwen35moe.attention.recurrent_layers",
        GgufValue::Array<bool>({true, false, true, false})}});
  // Block 1 is now an attention block: its attn_qkv.weight (DeltaNet q|k|v,
  // 256 rows) is taken for a fused attention q|k|v, which needs 384.
  EXPECT_EQ(LoadStatus(path).message(),
            absl::StrCat(path, ": tensor 'blk.1.attn_qkv.weight': expected "
                               "shape [128, 384], got [128, 256]"));

  const std::string short_path = WithKeys(
      src, "recr_short.gguf",
      {{"qwen35moe.attention.recurrent_layers", GgufValue::Array<bool>({true, true})}});
  EXPECT_EQ(LoadStatus(short_path).message(),
            absl::StrCat(short_path, ": qwen35moe.attention.recurrent_layers = 2: "
                                     "entries; must equal block_count 4"));
}

TEST(ModelTest, ContextOverflowIsOutOfRangeAndLeavesStateUnchanged) {
  Loaded l = Load(WriteMicro(mkmodel::Arch::kQwen3Moe, GgmlType::kF32, "ctx.gguf"));
  ASSERT_NE(l.model, nullptr);
  auto state = NewState(*l.model, 4);
  std::vector<float> logits;
  const std::vector<int32_t> three = {1, 2, 3};
  ASSERT_TRUE(l.model->Forward(three, *state, LogitRows::kLast, &logits).ok());
  const absl::Status s =
      l.model->Forward(three, *state, LogitRows::kLast, &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(),
            "context length exceeded: 3 tokens held + 3 new > context length 4");
  EXPECT_EQ(state->position(), 3);
}

TEST(ModelTest, RejectsBadTokenAndEmptyBatch) {
  Loaded l = Load(WriteMicro(mkmodel::Arch::kQwen3Moe, GgmlType::kF32, "tok.gguf"));
  ASSERT_NE(l.model, nullptr);
  auto state = NewState(*l.model, 8);
  std::vector<float> logits;
  const int32_t n_vocab = static_cast<int32_t>(l.model->info().n_vocab);
  const std::vector<int32_t> bad = {1, n_vocab};
  absl::Status s = l.model->Forward(bad, *state, LogitRows::kLast, &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), absl::StrCat("Forward: token id ", n_vocab,
                                      " at batch index 1 is outside the "
                                      "vocabulary [0, ", n_vocab, ")"));
  s = l.model->Forward({}, *state, LogitRows::kLast, &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state->position(), 0);
}

TEST(ModelTest, WrongTensorShapeNamesFileTensorAndBothShapes) {
  const std::string src = WriteMicro(mkmodel::Arch::kQwen35Moe, GgmlType::kF32, "shape_src.gguf");
  const std::string dst = TempPath("shape_bad.gguf");
  Rewrite(
      src, dst, [](GgufKv&) { return true; },
      [](const std::string& name, std::vector<uint64_t>& ne) {
        if (name == "blk.0.ssm_out.weight") ne[0] = 64;
      });
  const absl::Status s = LoadStatus(dst);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            absl::StrCat(dst, ": tensor 'blk.0.ssm_out.weight': expected shape "
                              "[128, 128], got [64, 128]"));
}

TEST(ModelTest, UnsupportedArchitectureAndBadKeys) {
  const std::string src = WriteMicro(mkmodel::Arch::kQwen3Moe, GgmlType::kF32, "arch_src.gguf");
  const std::string llama = TempPath("arch_llama.gguf");
  Rewrite(
      src, llama,
      [](GgufKv& kv) {
        if (kv.key == "general.architecture") kv.value = GgufValue::String("llama");
        return true;
      },
      KeepShapes);
  EXPECT_EQ(LoadStatus(llama).message(),
            absl::StrCat(llama, ": general.architecture = \"llama\" is not "
                                "supported (supported: qwen3moe, qwen35moe, deepseek2)"));

  const std::string gqa = TempPath("arch_gqa.gguf");
  Rewrite(
      src, gqa,
      [](GgufKv& kv) {
        if (kv.key == "qwen3moe.attention.head_count_kv") {
          kv.value = GgufValue::Scalar<uint32_t>(3);
        }
        return true;
      },
      KeepShapes);
  EXPECT_EQ(LoadStatus(gqa).message(),
            absl::StrCat(gqa, ": qwen3moe.attention.head_count_kv = 3: must "
                              "divide head_count 8"));

  const std::string missing = TempPath("arch_missing.gguf");
  Rewrite(
      src, missing,
      [](GgufKv& kv) { return kv.key != "qwen3moe.expert_count"; },
      KeepShapes);
  const absl::Status s = LoadStatus(missing);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("qwen3moe.expert_count"), std::string::npos) << s;
}

}  // namespace
}  // namespace sluice
