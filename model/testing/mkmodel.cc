#include "model/testing/mkmodel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "loader/gguf_writer.h"
#include "model/testing/mkmodel_internal.h"

namespace sluice::mkmodel {

using internal::AddTokenizer;
using internal::Init;
using internal::kResidualScale;
using internal::Matrix;
using internal::Spec;
using internal::Vector;

Spec internal::Matrix(std::string name, std::vector<uint64_t> ne, float scale) {
  return Spec{std::move(name), std::move(ne), Init::kMatrix, scale, true};
}
Spec internal::Vector(std::string name, uint64_t n, Init init) {
  return Spec{std::move(name), {n}, init, 1.0f, false};
}

void internal::AddTokenizer(const Vocab& v, std::vector<GgufKv>& kv) {
  const uint32_t n = static_cast<uint32_t>(v.tokens.size());
  kv.push_back({"tokenizer.ggml.model", GgufValue::String("gpt2")});
  kv.push_back({"tokenizer.ggml.pre", GgufValue::String("qwen2")});
  kv.push_back({"tokenizer.ggml.tokens", GgufValue::StringArray(v.tokens)});
  kv.push_back({"tokenizer.ggml.token_type", GgufValue::Array<int32_t>(v.token_types)});
  kv.push_back({"tokenizer.ggml.merges", GgufValue::StringArray(v.merges)});
  kv.push_back({"tokenizer.ggml.bos_token_id", GgufValue::Scalar<uint32_t>(n - 3)});
  kv.push_back({"tokenizer.ggml.eos_token_id", GgufValue::Scalar<uint32_t>(n - 1)});
  kv.push_back({"tokenizer.ggml.padding_token_id", GgufValue::Scalar<uint32_t>(n - 3)});
  kv.push_back({"tokenizer.ggml.add_bos_token", GgufValue::Scalar<bool>(false)});
}

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}


void AddMoe(const std::string& p, const ModelShape& s, std::vector<Spec>& out) {
  const uint64_t e = s.n_embd, x = s.n_expert, f = s.expert_ff;
  Spec router = Matrix(p + "ffn_gate_inp.weight", {e, x});
  router.quantizable = false;
  out.push_back(router);
  out.push_back(Matrix(p + "ffn_gate_exps.weight", {e, f, x}));
  out.push_back(Matrix(p + "ffn_up_exps.weight", {e, f, x}));
  out.push_back(Matrix(p + "ffn_down_exps.weight", {f, e, x}, kResidualScale));
}

void AddAttention(const std::string& p, const ModelShape& s, uint64_t q_rows,
                  std::vector<Spec>& out) {
  const uint64_t e = s.n_embd, d = s.head_dim;
  out.push_back(Matrix(p + "attn_q.weight", {e, q_rows}));
  out.push_back(Matrix(p + "attn_k.weight", {e, s.n_head_kv * d}));
  out.push_back(Matrix(p + "attn_v.weight", {e, s.n_head_kv * d}));
  out.push_back(Matrix(p + "attn_output.weight", {s.n_head * d, e}, kResidualScale));
  out.push_back(Vector(p + "attn_q_norm.weight", d, Init::kNorm));
  out.push_back(Vector(p + "attn_k_norm.weight", d, Init::kNorm));
}

void AddDeltaNet(const std::string& p, const ModelShape& s, std::vector<Spec>& out) {
  const uint64_t e = s.n_embd, st = s.ssm_state, r = s.ssm_dt_rank;
  const uint64_t conv_channels = 2 * st * s.ssm_group + st * r;
  out.push_back(Matrix(p + "attn_qkv.weight", {e, conv_channels}));
  out.push_back(Matrix(p + "attn_gate.weight", {e, st * r}));
  Spec conv = Matrix(p + "ssm_conv1d.weight", {s.ssm_conv_kernel, conv_channels});
  conv.quantizable = false;
  out.push_back(conv);
  out.push_back(Vector(p + "ssm_dt.bias", r, Init::kDtBias));
  out.push_back(Vector(p + "ssm_a", r, Init::kSsmA));
  out.push_back(Matrix(p + "ssm_beta.weight", {e, r}));
  out.push_back(Matrix(p + "ssm_alpha.weight", {e, r}));
  out.push_back(Vector(p + "ssm_norm.weight", st, Init::kNorm));
  out.push_back(Matrix(p + "ssm_out.weight", {st * r, e}, kResidualScale));
}

// One block's tensors, in the golden files' order.
void AddBlock(Arch arch, const ModelShape& s, uint32_t l, const std::string& p,
              std::vector<Spec>& out) {
  if (arch == Arch::kDeepseek2) {
    internal::AddDeepseek2Block(s, l, p, out);
    return;
  }
  const uint64_t e = s.n_embd;
  out.push_back(Vector(p + "attn_norm.weight", e, Init::kNorm));
  if (arch == Arch::kQwen3Moe) {
    AddAttention(p, s, uint64_t{s.n_head} * s.head_dim, out);
    out.push_back(Vector(p + "ffn_norm.weight", e, Init::kNorm));
    AddMoe(p, s, out);
    return;
  }
  out.push_back(Vector(p + "post_attention_norm.weight", e, Init::kNorm));
  if ((l + 1) % s.full_attention_interval == 0) {
    AddAttention(p, s, 2ull * s.n_head * s.head_dim, out);
  } else {
    AddDeltaNet(p, s, out);
  }
  AddMoe(p, s, out);
  Spec gate = Vector(p + "ffn_gate_inp_shexp.weight", e, Init::kMatrix);
  out.push_back(gate);
  out.push_back(Matrix(p + "ffn_gate_shexp.weight", {e, s.shared_ff}));
  out.push_back(Matrix(p + "ffn_up_shexp.weight", {e, s.shared_ff}));
  out.push_back(Matrix(p + "ffn_down_shexp.weight", {s.shared_ff, e}, kResidualScale));
}

}  // namespace

std::vector<Spec> internal::TensorSpecs(Arch arch, const ModelShape& s, uint64_t n_vocab) {
  std::vector<Spec> out;
  const uint64_t e = s.n_embd;
  out.push_back(Spec{"token_embd.weight", {e, n_vocab}, Init::kEmbedding, 1.0f, true});
  for (uint32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    const size_t first = out.size();
    AddBlock(arch, s, l, p, out);
    for (size_t i = first; i < out.size(); ++i) out[i].layer = static_cast<int>(l);
  }
  out.push_back(Vector("output_norm.weight", e, Init::kNorm));
  out.push_back(Spec{"output.weight", {e, n_vocab}, Init::kOutput, 1.0f, true});
  return out;
}

const char* ArchName(Arch arch) {
  switch (arch) {
    case Arch::kQwen35Moe: return "qwen35moe";
    case Arch::kQwen3Moe: return "qwen3moe";
    case Arch::kDeepseek2: return "deepseek2";
  }
  return "?";
}

absl::StatusOr<Arch> ParseArch(const std::string& name) {
  if (name == "qwen35moe") return Arch::kQwen35Moe;
  if (name == "qwen3moe") return Arch::kQwen3Moe;
  if (name == "deepseek2") return Arch::kDeepseek2;
  return absl::InvalidArgumentError(absl::StrCat(
      "mkmodel: --arch '", name, "' is not one of qwen35moe, qwen3moe, deepseek2"));
}

namespace {

// Qwen3.5 MoE layer shapes for benchmarks (../shared/DESIGN.md, "What users
// would run instead"): gated attention with 256-wide heads every 4th block,
// Gated DeltaNet (state 128, conv 4) elsewhere, a shared expert as wide as a
// routed one, rope over 64 dims in sections [11, 11, 10, 0].
ModelShape BenchShape(bool big) {
  ModelShape s;
  s.n_embd = big ? 4096 : 2048;
  s.n_layer = 8;
  s.n_head = big ? 32 : 16;
  s.n_head_kv = 2;
  s.head_dim = 256;
  s.n_expert = big ? 512 : 256;
  s.n_expert_used = big ? 10 : 8;
  s.expert_ff = big ? 1024 : 512;
  s.shared_ff = s.expert_ff;
  s.ssm_conv_kernel = 4;
  s.ssm_state = 128;
  s.ssm_group = 16;
  s.ssm_dt_rank = big ? 64 : 32;
  s.full_attention_interval = 4;
  s.rope_dims = 64;
  s.rope_sections = {11, 11, 10, 0};
  s.rope_freq_base = 1e7f;
  s.n_merges = 1300 - 256 - 3;  // the goldens' 1300-token vocabulary
  return s;
}

}  // namespace

absl::StatusOr<ModelShape> NamedShape(Arch arch, const std::string& name) {
  if (arch == Arch::kDeepseek2) return internal::Deepseek2Shape(name);
  if (name == "kimi_k2") {
    return absl::InvalidArgumentError(
        absl::StrCat("mkmodel: --shape '", name, "' is a deepseek2 shape"));
  }
  if (name == "bench35" || name == "bench397") {
    if (arch != Arch::kQwen35Moe) {
      return absl::InvalidArgumentError(
          absl::StrCat("mkmodel: --shape '", name, "' is a qwen35moe shape"));
    }
    return BenchShape(name == "bench397");
  }
  ModelShape s;
  const bool tiny = name == "tiny";
  if (!tiny && name != "micro") {
    return absl::InvalidArgumentError(absl::StrCat(
        "mkmodel: --shape '", name, "' is not one of tiny, micro, bench35, bench397"));
  }
  s.n_embd = tiny ? 256 : 128;
  s.n_layer = tiny && arch == Arch::kQwen35Moe ? 8 : 4;
  s.n_head = tiny || arch == Arch::kQwen3Moe ? 8 : 4;
  s.n_head_kv = 2;
  s.head_dim = tiny ? 64 : 32;
  s.n_expert = tiny ? 16 : 8;
  s.n_expert_used = tiny ? 4 : 2;
  s.expert_ff = tiny ? 256 : 64;
  if (arch == Arch::kQwen3Moe) {
    s.feed_forward = tiny ? 1024 : 512;
    s.rope_freq_base = 1e6f;
    return s;
  }
  s.shared_ff = s.expert_ff;
  s.ssm_conv_kernel = 4;
  s.ssm_state = tiny ? 64 : 32;
  s.ssm_group = 2;
  s.ssm_dt_rank = 4;
  s.full_attention_interval = 4;
  s.rope_dims = tiny ? 16 : 8;
  s.rope_sections = tiny ? std::array<int32_t, 4>{3, 3, 2, 0}
                         : std::array<int32_t, 4>{2, 1, 1, 0};
  s.rope_freq_base = 1e7f;
  return s;
}

namespace {

absl::Status CheckShape(Arch arch, const ModelShape& s) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("mkmodel: shape: ", what));
  };
  if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_head_kv == 0 ||
      s.head_dim == 0 || s.n_expert == 0 || s.expert_ff == 0) {
    return bad("n_embd, n_layer, n_head, n_head_kv, head_dim, n_expert and expert_ff "
               "must be positive");
  }
  if (s.n_head % s.n_head_kv != 0) {
    return bad(absl::StrCat("n_head ", s.n_head, " is not a multiple of n_head_kv ",
                            s.n_head_kv));
  }
  if (s.n_expert_used == 0 || s.n_expert_used > s.n_expert) {
    return bad(absl::StrCat("n_expert_used ", s.n_expert_used, " is outside 1..n_expert ",
                            s.n_expert));
  }
  if (arch == Arch::kQwen3Moe) return absl::OkStatus();
  if (arch == Arch::kDeepseek2) return internal::CheckDeepseek2Shape(s);
  if (s.shared_ff == 0 || s.ssm_conv_kernel == 0 || s.ssm_state == 0 ||
      s.ssm_group == 0 || s.ssm_dt_rank == 0 || s.full_attention_interval == 0) {
    return bad("qwen35moe needs positive shared_ff, ssm_* and full_attention_interval");
  }
  if (s.ssm_dt_rank % s.ssm_group != 0) {
    return bad(absl::StrCat("ssm_dt_rank ", s.ssm_dt_rank,
                            " is not a multiple of ssm_group ", s.ssm_group));
  }
  int32_t sections = 0;
  for (int32_t v : s.rope_sections) sections += v;
  if (s.rope_dims == 0 || s.rope_dims > s.head_dim || s.rope_dims % 2 != 0 ||
      static_cast<uint32_t>(sections) * 2 != s.rope_dims) {
    return bad(absl::StrCat("rope_dims ", s.rope_dims,
                            " must be even, <= head_dim and twice the sum of "
                            "rope_sections (", sections, ")"));
  }
  return absl::OkStatus();
}

// The model metadata, in the key order of the golden files.
std::vector<GgufKv> Metadata(const Options& o, const Vocab& v) {
  if (o.arch == Arch::kDeepseek2) return internal::Deepseek2Metadata(o, v);
  const ModelShape& s = o.shape;
  const std::string a = ArchName(o.arch);
  std::vector<GgufKv> kv;
  auto u32 = [&](const std::string& k, uint32_t x) {
    kv.push_back({a + "." + k, GgufValue::Scalar<uint32_t>(x)});
  };
  auto f32 = [&](const std::string& k, float x) {
    kv.push_back({a + "." + k, GgufValue::Scalar<float>(x)});
  };
  kv.push_back({"general.architecture", GgufValue::String(a)});
  kv.push_back({"general.name", GgufValue::String(o.name.empty() ? a + "-sluice" : o.name)});
  kv.push_back({"general.file_type", GgufValue::Scalar<uint32_t>(internal::FileTypeId(o))});
  if (o.type == GgmlType::kQ8_0 || o.mix != Mix::kNone) {
    kv.push_back({"general.quantization_version", GgufValue::Scalar<uint32_t>(2)});
  }
  u32("context_length", s.context_length);
  u32("embedding_length", s.n_embd);
  u32("block_count", s.n_layer);
  if (o.arch == Arch::kQwen3Moe) u32("feed_forward_length", s.feed_forward);
  u32("attention.head_count", s.n_head);
  u32("attention.head_count_kv", s.n_head_kv);
  u32("attention.key_length", s.head_dim);
  u32("attention.value_length", s.head_dim);
  f32("rope.freq_base", s.rope_freq_base);
  f32("attention.layer_norm_rms_epsilon", s.rms_eps);
  u32("expert_count", s.n_expert);
  u32("expert_used_count", s.n_expert_used);
  u32("expert_feed_forward_length", s.expert_ff);
  if (o.arch == Arch::kQwen35Moe) {
    u32("expert_shared_feed_forward_length", s.shared_ff);
    u32("rope.dimension_count", s.rope_dims);
    kv.push_back({a + ".rope.dimension_sections",
                  GgufValue::Array<int32_t>({s.rope_sections.begin(), s.rope_sections.end()})});
    u32("ssm.conv_kernel", s.ssm_conv_kernel);
    u32("ssm.state_size", s.ssm_state);
    u32("ssm.group_count", s.ssm_group);
    u32("ssm.time_step_rank", s.ssm_dt_rank);
    u32("ssm.inner_size", s.ssm_state * s.ssm_dt_rank);
    u32("full_attention_interval", s.full_attention_interval);
  }
  AddTokenizer(v, kv);
  return kv;
}

absl::Status WriteShard(const Options& o, const std::string& path,
                        const std::vector<GgufKv>& metadata,
                        const std::vector<Spec>& specs, size_t begin, size_t end,
                        uint32_t shard) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufWriter> w, GgufWriter::Create(path));
  if (shard == 0) {
    for (const GgufKv& kv : metadata) RETURN_IF_ERROR(w->Add(kv.key, kv.value));
  }
  if (o.split_count > 1) {
    // The keys and types llama-gguf-split writes.
    RETURN_IF_ERROR(w->Add("split.no", GgufValue::Scalar<uint16_t>(shard)));
    RETURN_IF_ERROR(w->Add("split.count", GgufValue::Scalar<uint16_t>(o.split_count)));
    RETURN_IF_ERROR(w->Add("split.tensors.count",
                           GgufValue::Scalar<int32_t>(static_cast<int32_t>(specs.size()))));
  }
  for (size_t i = begin; i < end; ++i) {
    RETURN_IF_ERROR(w->AddTensorInfo(specs[i].name, specs[i].type, specs[i].ne));
  }
  std::vector<internal::ChunkSlot> slots;
  for (size_t i = begin; i < end; ++i) {
    RETURN_IF_ERROR(internal::WriteTensorData(o, specs[i], *w, slots));
  }
  return w->Finish();
}

// The shape and the file type.
absl::Status CheckOptions(const Options& o) {
  RETURN_IF_ERROR(CheckShape(o.arch, o.shape));
  if (o.mix == Mix::kNone && o.type != GgmlType::kF32 && o.type != GgmlType::kF16 &&
      o.type != GgmlType::kQ8_0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mkmodel: type ", std::string(TraitsOf(o.type).name),
        " is not supported (f32, f16, q8_0)"));
  }
  return absl::OkStatus();
}

// BuildVocab's layout (see WriteModelWithValues in the header).
absl::Status CheckVocabLayout(const Vocab& v) {
  const size_t n = v.tokens.size();
  const char* const controls[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  bool ok = n == 256 + v.merges.size() + 3 && v.token_types.size() == n;
  for (size_t i = 0; ok && i < 3; ++i) {
    ok = v.tokens[n - 3 + i] == controls[i] && v.token_types[n - 3 + i] == 3;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mkmodel: the vocabulary (", n, " tokens, ", v.merges.size(), " merges, ",
        v.token_types.size(), " token types) is not 256 bytes + one token per "
        "merge + <|endoftext|> <|im_start|> <|im_end|> (control)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteModelWithValues(const Options& o, const Vocab& vocab,
                                  const TensorValues& values,
                                  const std::string& out_path) {
  RETURN_IF_ERROR(CheckOptions(o));
  RETURN_IF_ERROR(CheckVocabLayout(vocab));
  if (o.split_count != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mkmodel: split count ", o.split_count, ": a model from given values is one file"));
  }
  std::vector<Spec> specs = internal::TensorSpecs(o.arch, o.shape, vocab.tokens.size());
  internal::AssignTypes(o, specs);
  ASSIGN_OR_RETURN(std::unique_ptr<GgufWriter> w, GgufWriter::Create(out_path));
  for (const GgufKv& kv : Metadata(o, vocab)) RETURN_IF_ERROR(w->Add(kv.key, kv.value));
  for (const Spec& spec : specs) {
    RETURN_IF_ERROR(w->AddTensorInfo(spec.name, spec.type, spec.ne));
  }
  std::vector<uint8_t> bytes;
  for (const Spec& spec : specs) {
    ASSIGN_OR_RETURN(const std::vector<float> v, values(spec.name, spec.ne));
    uint64_t count = 1;
    for (uint64_t d : spec.ne) count *= d;
    if (v.size() != count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mkmodel: tensor ", spec.name, ": ", v.size(), " values given, its shape needs ",
          count));
    }
    RETURN_IF_ERROR(internal::Encode(v, spec.type, bytes));
    RETURN_IF_ERROR(w->WriteTensor(spec.name, bytes));
  }
  return w->Finish();
}

absl::StatusOr<std::vector<std::string>> WriteModel(const Options& o,
                                                    const std::string& out_path) {
  RETURN_IF_ERROR(CheckOptions(o));
  ASSIGN_OR_RETURN(Vocab vocab, BuildVocab(o.shape.n_merges));
  if (o.routing_locality < 0 || !std::isfinite(o.routing_locality)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mkmodel: routing locality ", o.routing_locality, " is not a finite number >= 0"));
  }
  std::vector<Spec> specs = internal::TensorSpecs(o.arch, o.shape, vocab.tokens.size());
  internal::AssignTypes(o, specs);
  const std::vector<GgufKv> metadata = Metadata(o, vocab);
  if (o.split_count == 0 || o.split_count > specs.size() || o.split_count > 99999) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mkmodel: split count ", o.split_count, " is outside 1..", specs.size(),
        " (the number of tensors)"));
  }
  std::vector<std::string> paths;
  std::string prefix = out_path;
  if (EndsWith(prefix, ".gguf")) prefix.resize(prefix.size() - 5);
  for (uint32_t shard = 0; shard < o.split_count; ++shard) {
    const std::string path =
        o.split_count == 1
            ? out_path
            : absl::StrFormat("%s-%05u-of-%05u.gguf", prefix, shard + 1, o.split_count);
    // Even split by tensor count, earlier shards taking the remainder.
    const size_t begin = specs.size() * shard / o.split_count;
    const size_t end = specs.size() * (shard + 1) / o.split_count;
    RETURN_IF_ERROR(WriteShard(o, path, metadata, specs, begin, end, shard));
    paths.push_back(path);
  }
  return paths;
}

absl::StatusOr<std::vector<float>> GenerateTensor(const Options& o,
                                                  const std::string& name) {
  ASSIGN_OR_RETURN(Vocab vocab, BuildVocab(o.shape.n_merges));
  for (const Spec& spec : internal::TensorSpecs(o.arch, o.shape, vocab.tokens.size())) {
    if (spec.name != name) continue;
    std::vector<float> values;
    internal::DrawRows(o, spec, 0, internal::Rows(spec), values);
    return values;
  }
  return absl::NotFoundError(absl::StrCat("mkmodel: the ", ArchName(o.arch),
                                          " model has no tensor '", name, "'"));
}

}  // namespace sluice::mkmodel
