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
