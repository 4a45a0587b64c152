#include "model/testing/mkmodel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "loader/gguf_writer.h"

namespace sluice::mkmodel {

namespace {

// How a tensor's values are drawn.
enum class Init {
  kMatrix,     // N(0,1) / sqrt(ne[0]) * scale
  kEmbedding,  // N(0,1)
  kOutput,     // kMatrix with a log-normal (sigma 0.5) norm per row
  kNorm,       // 1 + 0.05 N(0,1)
  kSsmA,       // -exp(0.5 N(0,1)): negative decay rates
  kDtBias,     // -2 + 0.5 N(0,1): softplus of it is ~0.1
};

struct Spec {
  std::string name;
  std::vector<uint64_t> ne;
  Init init = Init::kMatrix;
  float scale = 1.0f;
  bool quantizable = false;  // takes Options::type (else F32)
};

constexpr float kResidualScale = 0.3f;  // output projections of residual branches

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Standard normals from splitmix64 + Box-Muller, computed in double.
class Normal {
 public:
  explicit Normal(uint64_t seed) : state_(seed) {}
  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(SplitMix64(state_) >> 11) + 1.0) * 0x1p-53;
    const double u2 = static_cast<double>(SplitMix64(state_) >> 11) * 0x1p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

uint64_t TensorSeed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  uint64_t s = seed ^ h;
  return SplitMix64(s);
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

Spec Matrix(std::string name, std::vector<uint64_t> ne, float scale = 1.0f) {
  return Spec{std::move(name), std::move(ne), Init::kMatrix, scale, true};
}
Spec Vector(std::string name, uint64_t n, Init init) {
  return Spec{std::move(name), {n}, init, 1.0f, false};
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

// Tensor list in the order of the golden F32 files.
std::vector<Spec> TensorSpecs(Arch arch, const ModelShape& s, uint64_t n_vocab) {
  std::vector<Spec> out;
  const uint64_t e = s.n_embd;
  out.push_back(Spec{"token_embd.weight", {e, n_vocab}, Init::kEmbedding, 1.0f, true});
  for (uint32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    out.push_back(Vector(p + "attn_norm.weight", e, Init::kNorm));
    if (arch == Arch::kQwen3Moe) {
      AddAttention(p, s, uint64_t{s.n_head} * s.head_dim, out);
      out.push_back(Vector(p + "ffn_norm.weight", e, Init::kNorm));
      AddMoe(p, s, out);
      continue;
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
  out.push_back(Vector("output_norm.weight", e, Init::kNorm));
  out.push_back(Spec{"output.weight", {e, n_vocab}, Init::kOutput, 1.0f, true});
  return out;
}

GgmlType FileType(const Spec& spec, GgmlType wanted) {
  if (!spec.quantizable || spec.ne.size() < 2) return GgmlType::kF32;
  if (spec.ne[0] % TraitsOf(wanted).block_size != 0) return GgmlType::kF32;
  return wanted;
}

// Draws the next `n_rows` rows of `spec`, continuing the generator state in
// `normal` / `row_gain`, so any chunking yields the same values.
void DrawRows(const Spec& spec, uint64_t n_rows, Normal& normal, Normal& row_gain,
              std::vector<float>& out) {
  const uint64_t row = spec.ne[0];
  out.resize(n_rows * row);
  const double inv_sqrt = 1.0 / std::sqrt(static_cast<double>(row));
  for (uint64_t r = 0; r < n_rows; ++r) {
    const double gain =
        spec.init == Init::kOutput ? std::exp(0.5 * row_gain.Next()) : 1.0;
    for (uint64_t i = 0; i < row; ++i) {
      const double z = normal.Next();
      double v = 0;
      switch (spec.init) {
        case Init::kMatrix: v = z * inv_sqrt * spec.scale; break;
        case Init::kEmbedding: v = z; break;
        case Init::kOutput: v = z * inv_sqrt * gain; break;
        case Init::kNorm: v = 1.0 + 0.05 * z; break;
        case Init::kSsmA: v = -std::exp(0.5 * z); break;
        case Init::kDtBias: v = -2.0 + 0.5 * z; break;
      }
      out[r * row + i] = static_cast<float>(v);
    }
  }
}

void Encode(const std::vector<float>& values, GgmlType type, std::vector<uint8_t>& out) {
  out.clear();
  if (type == GgmlType::kQ8_0) {
    QuantizeQ8_0(values.data(), values.size(), out);
  } else if (type == GgmlType::kF16) {
    out.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = FloatToHalf(values[i]);
      std::memcpy(&out[2 * i], &h, 2);
    }
  } else {
    out.resize(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
  }
}

uint64_t Rows(const Spec& spec) {
  uint64_t rows = 1;
  for (size_t d = 1; d < spec.ne.size(); ++d) rows *= spec.ne[d];
  return rows;
}

absl::Status WriteTensorData(const Options& o, const Spec& spec, GgufWriter& w) {
  Normal normal(TensorSeed(o.seed, spec.name));
  Normal row_gain(TensorSeed(o.seed, spec.name + "#row_gain"));
  const GgmlType type = FileType(spec, o.type);
  const uint64_t rows_per_chunk = std::max<uint64_t>(1, o.chunk_elements / spec.ne[0]);
  std::vector<float> values;
  std::vector<uint8_t> bytes;
  for (uint64_t done = 0, total = Rows(spec); done < total;) {
    const uint64_t n = std::min(rows_per_chunk, total - done);
    DrawRows(spec, n, normal, row_gain, values);
    Encode(values, type, bytes);
    RETURN_IF_ERROR(w.AppendTensorData(bytes));
    done += n;
  }
  return absl::OkStatus();
}

}  // namespace

const char* ArchName(Arch arch) {
  return arch == Arch::kQwen35Moe ? "qwen35moe" : "qwen3moe";
}

absl::StatusOr<Arch> ParseArch(const std::string& name) {
  if (name == "qwen35moe") return Arch::kQwen35Moe;
  if (name == "qwen3moe") return Arch::kQwen3Moe;
  return absl::InvalidArgumentError(
      absl::StrCat("mkmodel: --arch '", name, "' is not one of qwen35moe, qwen3moe"));
}

absl::StatusOr<ModelShape> NamedShape(Arch arch, const std::string& name) {
  ModelShape s;
  const bool tiny = name == "tiny";
  if (!tiny && name != "micro") {
    return absl::InvalidArgumentError(
        absl::StrCat("mkmodel: --shape '", name, "' is not one of tiny, micro"));
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

uint32_t FileTypeId(GgmlType t) {
  return t == GgmlType::kQ8_0 ? 7 : t == GgmlType::kF16 ? 1 : 0;
}

// The model metadata, in the key order of the golden files.
std::vector<GgufKv> Metadata(const Options& o, const Vocab& v) {
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
  kv.push_back({"general.file_type", GgufValue::Scalar<uint32_t>(FileTypeId(o.type))});
  if (o.type == GgmlType::kQ8_0) {
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
    RETURN_IF_ERROR(w->AddTensorInfo(specs[i].name, FileType(specs[i], o.type), specs[i].ne));
  }
  for (size_t i = begin; i < end; ++i) RETURN_IF_ERROR(WriteTensorData(o, specs[i], *w));
  return w->Finish();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> WriteModel(const Options& o,
                                                    const std::string& out_path) {
  RETURN_IF_ERROR(CheckShape(o.arch, o.shape));
  if (o.type != GgmlType::kF32 && o.type != GgmlType::kF16 && o.type != GgmlType::kQ8_0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mkmodel: type ", std::string(TraitsOf(o.type).name),
        " is not supported (f32, f16, q8_0)"));
  }
  ASSIGN_OR_RETURN(Vocab vocab, BuildVocab(o.shape.n_merges));
  const std::vector<Spec> specs = TensorSpecs(o.arch, o.shape, vocab.tokens.size());
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
  for (const Spec& spec : TensorSpecs(o.arch, o.shape, vocab.tokens.size())) {
    if (spec.name != name) continue;
    Normal normal(TensorSeed(o.seed, spec.name));
    Normal row_gain(TensorSeed(o.seed, spec.name + "#row_gain"));
    std::vector<float> values;
    DrawRows(spec, Rows(spec), normal, row_gain, values);
    return values;
  }
  return absl::NotFoundError(absl::StrCat("mkmodel: the ", ArchName(o.arch),
                                          " model has no tensor '", name, "'"));
}

}  // namespace sluice::mkmodel
