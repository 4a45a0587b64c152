// Views of weight tensors inside the read-only mapping, and the binder that
// declares each tensor with its expected shape.
//
// Shapes are ggml `ne` order: ne[0] is the contiguous dimension, so a matrix
// applied as y = W x has ne = [cols, rows] (cols = input width), and a
// routed-expert tensor has ne = [cols, rows, n_expert].
//
// Nothing here copies tensor bytes: views hold pointers into the mapping
// owned by ModelFiles, which must outlive them.
#ifndef SLUICE_MODEL_WEIGHTS_H_
#define SLUICE_MODEL_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "format/ggml_type.h"

namespace sluice {

class ModelFiles;
struct TensorEntry;

// `rows` rows of `cols` elements of `type`; row r at data + r * row_bytes.
struct Matrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
};

// n_expert matrices of rows x cols, expert e at data + e * slice_bytes.
struct ExpertMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t n_expert = 0;
  uint64_t row_bytes = 0;
  uint64_t slice_bytes = 0;

  // Expert e's matrix, in place. Precondition: 0 <= e < n_expert.
  Matrix expert(int64_t e) const {
    return Matrix{type, data + static_cast<uint64_t>(e) * slice_bytes, rows,
                  cols, row_bytes};
  }
};

// Binds tensors by name, checking shape and type. Error messages name the
// model file, the tensor and both shapes, e.g.
//   "m.gguf: tensor 'blk.0.attn_q.weight': expected shape [128, 256], got
//    [128, 512]".
// Thread-safety: not thread-safe (used while loading, on one thread).
class TensorBinder {
 public:
  explicit TensorBinder(const ModelFiles& files);

  // A matrix with ne = [cols, rows] whose type MatMul supports.
  absl::StatusOr<Matrix> GetMatrix(std::string_view name, int64_t cols,
                                   int64_t rows);
  // A routed-expert tensor with ne = [cols, rows, n_expert].
  absl::StatusOr<ExpertMatrix> GetExperts(std::string_view name, int64_t cols,
                                          int64_t rows, int64_t n_expert);
  // A fused matrix with ne = [cols, sum(rows)], returned as consecutive row
  // blocks of the given heights (e.g. llama.cpp's attn_qkv: q, k, v).
  absl::StatusOr<std::vector<Matrix>> GetMatrixParts(
      std::string_view name, int64_t cols, const std::vector<int64_t>& rows);
  // A fused routed-expert tensor with ne = [cols, sum(rows), n_expert] whose
  // expert slices hold consecutive row blocks (ffn_gate_up_exps: gate then
  // up); each part is a view with the fused tensor's slice stride.
  absl::StatusOr<std::vector<ExpertMatrix>> GetExpertParts(
      std::string_view name, int64_t cols, const std::vector<int64_t>& rows,
      int64_t n_expert);
  // Whether the model has a tensor of that name.
  bool Has(std::string_view name) const;
  // A 1-D F32 tensor of n elements (norm weights, biases, gates).
  absl::StatusOr<const float*> GetF32Vector(std::string_view name, int64_t n);
  // A 2-D F32 tensor with ne = [cols, rows], row-major.
  absl::StatusOr<const float*> GetF32Matrix(std::string_view name,
                                            int64_t cols, int64_t rows);

  // Names of the bound tensors, in binding order.
  const std::vector<std::string>& bound() const { return bound_; }

 private:
  absl::StatusOr<const TensorEntry*> Lookup(std::string_view name,
                                            const std::vector<int64_t>& ne);
  absl::StatusOr<const TensorEntry*> LookupF32(std::string_view name,
                                               const std::vector<int64_t>& ne);

  const ModelFiles& files_;
  std::string file_name_;
  std::vector<std::string> bound_;
};

// "[a, b, c]".
std::string ShapeString(const std::vector<int64_t>& ne);

}  // namespace sluice

#endif  // SLUICE_MODEL_WEIGHTS_H_
