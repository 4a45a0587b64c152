#include "tools/dequant_lib.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/dequant.h"
#include "loader/model_files.h"

namespace sluice::tools {

absl::StatusOr<std::vector<float>> DequantizeTensor(const std::string& gguf_path,
                                                    const std::string& tensor_name) {
  absl::StatusOr<std::unique_ptr<ModelFiles>> files = ModelFiles::Open(gguf_path);
  if (!files.ok()) return files.status();
  const TensorEntry* t = (*files)->tensors().Find(tensor_name);
  if (t == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(gguf_path, ": tensor '", tensor_name, "' not found"));
  }
  if (!kernels::IsDequantizable(t->type)) {
    return absl::UnimplementedError(absl::StrCat(gguf_path, ": tensor '", tensor_name,
                                                 "' has type ", kernels::TypeName(t->type),
                                                 ", which cannot be dequantized"));
  }
  const int64_t row = static_cast<int64_t>(t->ne[0]);
  const int64_t rows = static_cast<int64_t>(t->n_rows());
  std::vector<float> out(static_cast<size_t>(row * rows));
  for (int64_t r = 0; r < rows; ++r) {
    absl::Status s = kernels::DequantizeRow(t->type, t->data + r * t->row_bytes(), row,
                                            out.data() + r * row);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(gguf_path, ": tensor '", tensor_name, "': ", s.message()));
    }
  }
  return out;
}

absl::StatusOr<int64_t> DequantizeTensorToFile(const std::string& gguf_path,
                                               const std::string& tensor_name,
                                               const std::string& out_path) {
  absl::StatusOr<std::vector<float>> values = DequantizeTensor(gguf_path, tensor_name);
  if (!values.ok()) return values.status();
  std::FILE* f = std::fopen(out_path.c_str(), "wb");
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat(out_path, ": ", std::strerror(errno)));
  }
  // x86-64 and aarch64 are little-endian, so the in-memory floats are the
  // file format.
  const size_t written = std::fwrite(values->data(), sizeof(float), values->size(), f);
  const bool closed = std::fclose(f) == 0;
  if (written != values->size() || !closed) {
    return absl::InternalError(absl::StrCat(out_path, ": short write"));
  }
  return static_cast<int64_t>(values->size());
}

}  // namespace sluice::tools
