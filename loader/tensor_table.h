// The tensor table of a model: every tensor of every shard, by name, with its
// location (shard, file offset, pointer into the read-only mapping), ggml
// type, dims, byte size and its kind (dense or routed expert).
//
// Routed-expert tensors are the ones whose name ends in "_exps.weight",
// "_exps.bias" or "_exps.scale" (llama.cpp's ffn_{gate,up,down}_exps). Their
// outermost dimension (ne[n_dims-1]) is the expert axis, so expert e of such a
// tensor is the contiguous slice
//   data + e * expert_slice_bytes  ..  + expert_slice_bytes.
// Everything else is dense.
//
// Thread-safety: immutable after Build(); const methods may be called
// concurrently. Entry pointers stay valid for the table's lifetime (and `data`
// for the lifetime of the mapping it points into, i.e. the ModelFiles).
#ifndef SLUICE_LOADER_TENSOR_TABLE_H_
#define SLUICE_LOADER_TENSOR_TABLE_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "format/ggml_type.h"
#include "loader/gguf_file.h"

namespace sluice {

enum class TensorKind : uint8_t {
  kDense = 0,
  kRoutedExpert = 1,
};

std::string_view TensorKindName(TensorKind kind);  // "dense" / "expert"

// True for names ending in "_exps.weight", "_exps.bias" or "_exps.scale".
bool IsRoutedExpertName(std::string_view name);

struct TensorEntry {
  std::string name;
  GgmlType type = GgmlType::kF32;
  uint32_t n_dims = 0;
  std::array<uint64_t, 4> ne = {1, 1, 1, 1};  // ne[i] == 1 for i >= n_dims
  uint32_t shard = 0;        // index into ModelFiles shards (0-based)
  uint64_t file_offset = 0;  // absolute offset within that shard's file
  uint64_t n_bytes = 0;
  TensorKind kind = TensorKind::kDense;
  // For kRoutedExpert: ne[n_dims-1] and n_bytes / n_experts. For kDense: 0.
  uint64_t n_experts = 0;
  uint64_t expert_slice_bytes = 0;
  // Into the read-only mapping; nullptr when the table was built without
  // mappings (TensorTable::Build with null bases). Never write through it.
  const uint8_t* data = nullptr;

  uint64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  // Bytes of one row of ne[0] elements (ne[0] is a multiple of block_size).
  uint64_t row_bytes() const;
  // Rows in the whole tensor (ne[1] * ne[2] * ne[3]).
  uint64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  // Expert e's bytes. Preconditions: kind == kRoutedExpert, e < n_experts,
  // data != nullptr.
  const uint8_t* expert_data(uint64_t e) const {
    return data + e * expert_slice_bytes;
  }
};

// One parsed shard as input to TensorTable::Build.
struct ShardView {
  const GgufFile* file = nullptr;  // required
  const uint8_t* base = nullptr;   // start of the mapping, or nullptr
};

class TensorTable {
 public:
  TensorTable() = default;

  // Builds the table over `shards` (in shard order). Fails (InvalidArgument)
  // on a tensor name present in two shards, naming both files. `model_name`
  // appears in Require() errors (ModelFiles passes shard 0's path).
  static absl::StatusOr<TensorTable> Build(std::string model_name,
                                           const std::vector<ShardView>& shards);

  // nullptr when absent.
  const TensorEntry* Find(std::string_view name) const;
  // NotFound "model <model_name>: tensor '<name>' not found" when absent.
  absl::StatusOr<const TensorEntry*> Require(std::string_view name) const;

  // Shard order, then file order within a shard (stable across runs).
  const std::vector<TensorEntry>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  const std::string& model_name() const { return model_name_; }

  uint64_t total_bytes() const { return dense_bytes_ + expert_bytes_; }
  uint64_t dense_bytes() const { return dense_bytes_; }
  uint64_t expert_bytes() const { return expert_bytes_; }

 private:
  std::string model_name_;
  std::vector<TensorEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  uint64_t dense_bytes_ = 0;
  uint64_t expert_bytes_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_LOADER_TENSOR_TABLE_H_
