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

absl::Status ComputeLogits(const Matrix& output, const float* norm, float eps,
                           float* h, int64_t n_tok, LogitRows rows,
                           std::vector<float>* logits,
                           kernels::ThreadPool* pool) {
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
