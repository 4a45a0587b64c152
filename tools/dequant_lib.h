// The dequant tool's work: a GGUF tensor written as raw float32.
//
// Thread-safety: stateless; concurrent calls are fine.
#ifndef SLUICE_TOOLS_DEQUANT_LIB_H_
#define SLUICE_TOOLS_DEQUANT_LIB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::tools {

// Every element of tensor `tensor_name` of the model at `gguf_path` (any
// shard of a split set), dequantized to f32 in GGUF element order (ne[0]
// fastest). Errors: the loader's (NotFound for a missing file, ...);
// NotFound "<path>: tensor '<name>' not found"; Unimplemented
// "<path>: tensor '<name>' has type <type>, which cannot be dequantized".
absl::StatusOr<std::vector<float>> DequantizeTensor(const std::string& gguf_path,
                                                    const std::string& tensor_name);

// DequantizeTensor, then the values as raw little-endian float32 into
// `out_path` (created or truncated). Returns the number of elements.
// Errors: those of DequantizeTensor; Internal "<out_path>: <reason>" when
// the file cannot be written.
absl::StatusOr<int64_t> DequantizeTensorToFile(const std::string& gguf_path,
                                               const std::string& tensor_name,
                                               const std::string& out_path);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_DEQUANT_LIB_H_
