#include "model/weights.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/cpu/matvec.h"
#include "loader/model_files.h"
#include "loader/tensor_table.h"

namespace sluice {

std::string ShapeString(const std::vector<int64_t>& ne) {
  return absl::StrCat("[", absl::StrJoin(ne, ", "), "]");
}

TensorBinder::TensorBinder(const ModelFiles& files)
    : files_(files), file_name_(files.shard(0).path) {}

absl::StatusOr<const TensorEntry*> TensorBinder::Lookup(
    std::string_view name, const std::vector<int64_t>& ne) {
  const TensorEntry* t = files_.tensors().Find(name);
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_name_, ": tensor '", std::string(name), "' not found (expected shape ",
        ShapeString(ne), ")"));
  }
  std::vector<int64_t> actual(t->ne.begin(), t->ne.begin() + t->n_dims);
  if (actual != ne) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name_, ": tensor '", std::string(name), "': expected shape ",
                     ShapeString(ne), ", got ", ShapeString(actual)));
  }
  if (t->data == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(file_name_, ": tensor '", std::string(name), "' is not mapped"));
  }
  bound_.emplace_back(name);
  return t;
}

absl::StatusOr<const TensorEntry*> TensorBinder::LookupF32(
    std::string_view name, const std::vector<int64_t>& ne) {
  ASSIGN_OR_RETURN(const TensorEntry* t, Lookup(name, ne));
  if (t->type != GgmlType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name_, ": tensor '", std::string(name), "': expected type f32, got ",
                     std::string(TraitsOf(t->type).name)));
  }
  if (reinterpret_cast<uintptr_t>(t->data) % alignof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_name_, ": tensor '", std::string(name), "': f32 data is not 4-byte aligned"));
  }
  return t;
}

absl::StatusOr<Matrix> TensorBinder::GetMatrix(std::string_view name,
                                               int64_t cols, int64_t rows) {
  ASSIGN_OR_RETURN(const TensorEntry* t, Lookup(name, {cols, rows}));
  if (!kernels::IsMatMulSupported(t->type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name_, ": tensor '", std::string(name), "': type ",
                     std::string(TraitsOf(t->type).name), " is not supported for matmul"));
  }
  return Matrix{t->type, t->data, rows, cols, t->row_bytes()};
}

absl::StatusOr<ExpertMatrix> TensorBinder::GetExperts(std::string_view name,
                                                      int64_t cols,
                                                      int64_t rows,
                                                      int64_t n_expert) {
  ASSIGN_OR_RETURN(const TensorEntry* t, Lookup(name, {cols, rows, n_expert}));
  if (!kernels::IsMatMulSupported(t->type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name_, ": tensor '", std::string(name), "': type ",
                     std::string(TraitsOf(t->type).name), " is not supported for matmul"));
  }
  ExpertMatrix m;
  m.type = t->type;
  m.data = t->data;
  m.rows = rows;
  m.cols = cols;
  m.n_expert = n_expert;
  m.row_bytes = t->row_bytes();
  m.slice_bytes = m.row_bytes * static_cast<uint64_t>(rows);
  return m;
}

bool TensorBinder::Has(std::string_view name) const {
  return files_.tensors().Find(name) != nullptr;
}

absl::StatusOr<std::vector<Matrix>> TensorBinder::GetMatrixParts(
    std::string_view name, int64_t cols, const std::vector<int64_t>& rows) {
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  ASSIGN_OR_RETURN(const Matrix whole, GetMatrix(name, cols, total));
  std::vector<Matrix> parts;
  uint64_t offset = 0;
  for (int64_t r : rows) {
    parts.push_back(Matrix{whole.type, whole.data + offset, r, cols,
                           whole.row_bytes});
    offset += static_cast<uint64_t>(r) * whole.row_bytes;
  }
  return parts;
}

absl::StatusOr<std::vector<ExpertMatrix>> TensorBinder::GetExpertParts(
    std::string_view name, int64_t cols, const std::vector<int64_t>& rows,
    int64_t n_expert) {
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  ASSIGN_OR_RETURN(const ExpertMatrix whole,
                   GetExperts(name, cols, total, n_expert));
  std::vector<ExpertMatrix> parts;
  uint64_t offset = 0;
  for (int64_t r : rows) {
    ExpertMatrix part = whole;
    part.data = whole.data + offset;
    part.rows = r;
    parts.push_back(part);
    offset += static_cast<uint64_t>(r) * whole.row_bytes;
  }
  return parts;
}

absl::StatusOr<const float*> TensorBinder::GetF32Vector(std::string_view name,
                                                        int64_t n) {
  ASSIGN_OR_RETURN(const TensorEntry* t, LookupF32(name, {n}));
  return reinterpret_cast<const float*>(t->data);
}

absl::StatusOr<const float*> TensorBinder::GetF32Matrix(std::string_view name,
                                                        int64_t cols,
                                                        int64_t rows) {
  ASSIGN_OR_RETURN(const TensorEntry* t, LookupF32(name, {cols, rows}));
  return reinterpret_cast<const float*>(t->data);
}

}  // namespace sluice
