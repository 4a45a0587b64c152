#include "model/arch_util.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/dequant.h"
#include "loader/gguf_file.h"
#include "loader/model_files.h"
#include "model/blocks.h"

namespace sluice {

ArchKeys::ArchKeys(const GgufFile& meta, std::string arch)
    : meta_(meta), arch_(std::move(arch)) {}

std::string ArchKeys::Key(std::string_view suffix) const {
  return absl::StrCat(arch_, ".", std::string(suffix));
}

absl::Status ArchKeys::Invalid(std::string_view suffix, int64_t value,
                               std::string_view why) const {
  return absl::InvalidArgumentError(absl::StrCat(
      meta_.file_name(), ": ", Key(suffix), " = ", value, ": ", std::string(why)));
}

absl::StatusOr<int64_t> ArchKeys::Int(std::string_view suffix,
                                      int64_t min_value) const {
  ASSIGN_OR_RETURN(const uint64_t v, meta_.GetU64(Key(suffix)));
  if (v > static_cast<uint64_t>(INT32_MAX) ||
      static_cast<int64_t>(v) < min_value) {
    return Invalid(suffix, static_cast<int64_t>(v),
                   absl::StrCat("must be in [", min_value, ", ", INT32_MAX, "]"));
  }
  return static_cast<int64_t>(v);
}

absl::StatusOr<int64_t> ArchKeys::IntOr(std::string_view suffix,
                                        int64_t fallback,
                                        int64_t min_value) const {
  if (meta_.Find(Key(suffix)) == nullptr) return fallback;
  return Int(suffix, min_value);
}

absl::StatusOr<float> ArchKeys::PositiveFloat(std::string_view suffix) const {
  ASSIGN_OR_RETURN(const float v, meta_.GetF32(Key(suffix)));
  if (!(v > 0.0f) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        meta_.file_name(), ": ", Key(suffix), " = ", v, ": must be > 0"));
  }
  return v;
}

absl::Status ArchKeys::InvalidString(std::string_view suffix,
                                     std::string_view value,
                                     std::string_view why) const {
  return absl::InvalidArgumentError(
      absl::StrCat(meta_.file_name(), ": ", Key(suffix), " = \"",
                   std::string(value), "\": ", std::string(why)));
}

absl::StatusOr<float> ArchKeys::FloatOr(std::string_view suffix,
                                        float fallback) const {
  if (!Has(suffix)) return fallback;
  return meta_.GetF32(Key(suffix));
}

absl::StatusOr<std::string> ArchKeys::StringOr(std::string_view suffix,
                                               std::string fallback) const {
  if (!Has(suffix)) return fallback;
  return meta_.GetString(Key(suffix));
}

absl::StatusOr<bool> ArchKeys::BoolOr(std::string_view suffix,
                                      bool fallback) const {
  if (!Has(suffix)) return fallback;
  return meta_.GetBool(Key(suffix));
}

bool ArchKeys::Has(std::string_view suffix) const {
  return meta_.Find(Key(suffix)) != nullptr;
}

absl::StatusOr<std::vector<bool>> ArchKeys::BoolArray(
    std::string_view suffix) const {
  return meta_.GetArrayBool(Key(suffix));
}

absl::StatusOr<std::vector<int32_t>> ArchKeys::IntArray(
    std::string_view suffix) const {
  return meta_.GetArrayI32(Key(suffix));
}

absl::Status ReadAttentionAndExperts(const ArchKeys& keys, TrunkParams& p) {
  ASSIGN_OR_RETURN(p.n_head, keys.Int("attention.head_count"));
  ASSIGN_OR_RETURN(p.n_head_kv, keys.Int("attention.head_count_kv"));
  ASSIGN_OR_RETURN(p.head_dim,
                   keys.IntOr("attention.key_length", p.n_embd / p.n_head));
  ASSIGN_OR_RETURN(const int64_t v_dim,
                   keys.IntOr("attention.value_length", p.head_dim));
  ASSIGN_OR_RETURN(p.n_expert, keys.Int("expert_count"));
  ASSIGN_OR_RETURN(p.n_expert_used, keys.Int("expert_used_count"));
  ASSIGN_OR_RETURN(p.expert_ff, keys.Int("expert_feed_forward_length"));
  ASSIGN_OR_RETURN(p.context_length, keys.Int("context_length"));
  ASSIGN_OR_RETURN(p.eps, keys.PositiveFloat("attention.layer_norm_rms_epsilon"));
  ASSIGN_OR_RETURN(p.freq_base, keys.PositiveFloat("rope.freq_base"));
  if (p.n_head % p.n_head_kv != 0) {
    return keys.Invalid("attention.head_count_kv", p.n_head_kv,
                        absl::StrCat("must divide head_count ", p.n_head));
  }
  if (v_dim != p.head_dim) {
    return keys.Invalid("attention.value_length", v_dim,
                        absl::StrCat("must equal key_length ", p.head_dim));
  }
  if (p.n_expert_used > p.n_expert || p.n_expert_used > kMaxExpertsUsed) {
    return keys.Invalid("expert_used_count", p.n_expert_used,
                        absl::StrCat("must be <= expert_count ", p.n_expert,
                                     " and <= ", kMaxExpertsUsed));
  }
  return absl::OkStatus();
}

AttentionConfig AttentionConfigOf(const TrunkParams& p) {
  AttentionConfig a;
  a.n_embd = p.n_embd;
  a.n_head = p.n_head;
  a.n_head_kv = p.n_head_kv;
  a.head_dim = p.head_dim;
  a.eps = p.eps;
  a.gated = false;
  a.rope.n_rot = p.n_rot;
  a.rope.freq_base = p.freq_base;
  return a;
}

MoeConfig MoeConfigOf(const TrunkParams& p) {
  MoeConfig m;
  m.n_embd = p.n_embd;
  m.n_expert = p.n_expert;
  m.n_expert_used = p.n_expert_used;
  m.expert_ff = p.expert_ff;
  m.shared_ff = p.shared_ff;
  return m;
}

void FillTrunkInfo(const TrunkParams& p, ModelInfo* info) {
  info->n_embd = p.n_embd;
  info->n_layer = p.n_layer;
  info->n_head = p.n_head;
  info->n_head_kv = p.n_head_kv;
  info->head_dim = p.head_dim;
  info->n_rot = p.n_rot;
  info->n_expert = p.n_expert;
  info->n_expert_used = p.n_expert_used;
  info->expert_ff = p.expert_ff;
  info->shared_ff = p.shared_ff;
  info->train_context_length = p.context_length;
}

std::string BlockPrefix(int64_t il) { return absl::StrCat("blk.", il, "."); }

absl::StatusOr<OutputHead> BindOutputHead(TensorBinder& b, int64_t n_embd,
                                          int64_t n_vocab) {
  OutputHead h;
  ASSIGN_OR_RETURN(h.token_embd,
                   b.GetMatrix("token_embd.weight", n_embd, n_vocab));
  ASSIGN_OR_RETURN(h.output_norm, b.GetF32Vector("output_norm.weight", n_embd));
  ASSIGN_OR_RETURN(h.output, b.GetMatrix("output.weight", n_embd, n_vocab));
  return h;
}

absl::Status BindQkv(TensorBinder& b, const std::string& prefix, int64_t cols,
                     int64_t q_rows, int64_t kv_rows, AttentionWeights& a) {
  if (b.Has(prefix + "attn_qkv.weight")) {
    ASSIGN_OR_RETURN(const std::vector<Matrix> parts,
                     b.GetMatrixParts(prefix + "attn_qkv.weight", cols,
                                      {q_rows, kv_rows, kv_rows}));
    a.wq = parts[0];
    a.wk = parts[1];
    a.wv = parts[2];
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(a.wq, b.GetMatrix(prefix + "attn_q.weight", cols, q_rows));
  ASSIGN_OR_RETURN(a.wk, b.GetMatrix(prefix + "attn_k.weight", cols, kv_rows));
  ASSIGN_OR_RETURN(a.wv, b.GetMatrix(prefix + "attn_v.weight", cols, kv_rows));
  return absl::OkStatus();
}

absl::Status BindRoutedExperts(TensorBinder& b, const std::string& prefix,
                               int64_t n_embd, int64_t ff, int64_t n_expert,
                               MoeWeights& m) {
  if (b.Has(prefix + "ffn_gate_up_exps.weight")) {
    ASSIGN_OR_RETURN(const std::vector<ExpertMatrix> parts,
                     b.GetExpertParts(prefix + "ffn_gate_up_exps.weight",
                                      n_embd, {ff, ff}, n_expert));
    m.gate = parts[0];
    m.up = parts[1];
  } else {
    ASSIGN_OR_RETURN(m.gate, b.GetExperts(prefix + "ffn_gate_exps.weight",
                                          n_embd, ff, n_expert));
    ASSIGN_OR_RETURN(m.up, b.GetExperts(prefix + "ffn_up_exps.weight", n_embd,
                                        ff, n_expert));
  }
  ASSIGN_OR_RETURN(m.down, b.GetExperts(prefix + "ffn_down_exps.weight", ff,
                                        n_embd, n_expert));
  return absl::OkStatus();
}

absl::Status FillFileInfo(const ModelFiles& files, ModelInfo* info) {
  const GgufFile& meta = files.metadata();
  info->file_name = files.shard(0).path;
  ASSIGN_OR_RETURN(info->arch, meta.GetString("general.architecture"));
  ASSIGN_OR_RETURN(info->name,
                   meta.GetStringOr("general.name", info->file_name));
  const GgufValue* tokens = meta.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || !tokens->is_array() || tokens->array_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(info->file_name,
                     ": tokenizer.ggml.tokens is missing or empty"));
  }
  info->n_vocab = static_cast<int64_t>(tokens->array_size());
  info->all_f32 = true;
  for (const TensorEntry& t : files.tensors().entries()) {
    if (t.type != GgmlType::kF32) info->all_f32 = false;
  }
  info->weight_bytes = files.tensors().total_bytes();
  return absl::OkStatus();
}

absl::Status EmbedTokens(const Matrix& table, absl::Span<const int32_t> tokens,
                         float* x) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    RETURN_IF_ERROR(kernels::DequantizeRow(
        table.type, table.data + static_cast<uint64_t>(tokens[t]) * table.row_bytes,
        table.cols, x + t * table.cols));
  }
  return absl::OkStatus();
}

void RmsNormRows(const float* x, int64_t n_tok, int64_t n_embd,
                 const float* weight, float eps, float* xn) {
  for (int64_t t = 0; t < n_tok; ++t) {
    RmsNorm(x + t * n_embd, n_embd, weight, eps, xn + t * n_embd);
  }
}

void AddResidual(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

absl::Status ComputeLogits(const Matrix& output, const float* norm, float eps,
                           float* h, int64_t n_tok, LogitRows rows,
                           std::vector<float>* logits,
                           ThreadPool* pool) {
  if (rows == LogitRows::kNone) {
    if (logits != nullptr) logits->clear();
    return absl::OkStatus();
  }
  const int64_t first = rows == LogitRows::kLast ? n_tok - 1 : 0;
  const int64_t count = n_tok - first;
  const int64_t e = output.cols;
  float* hs = h + first * e;
  for (int64_t t = 0; t < count; ++t) RmsNorm(hs + t * e, e, norm, eps, hs + t * e);
  logits->resize(count * output.rows);
  return Project(output, hs, count, logits->data(), pool);
}

}  // namespace sluice
