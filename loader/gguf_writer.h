// GgufWriter: writes GGUF v3 (or v2) files whose tensor data is streamed.
//
// Usage, in this order:
//   ASSIGN_OR_RETURN(auto w, GgufWriter::Create("/tmp/m.gguf"));
//   w->Add("general.architecture", GgufValue::String("qwen3moe"));  // any
//   RETURN_IF_ERROR(w->AddTensorInfo("a.weight", GgmlType::kF32, {64, 8}));
//   ...                               // all metadata and tensor infos first
//   RETURN_IF_ERROR(w->WriteTensor("a.weight", bytes));  // in declared order
//   // or, for a tensor larger than memory, AppendTensorData() in pieces
//   RETURN_IF_ERROR(w->Finish());
// The header is written when the first tensor data arrives (or at Finish),
// so nothing but the current tensor's bytes needs to be in memory.
//
// Alignment: kGgufDefaultAlignment unless a "general.alignment" key (any
// integer type, a power of two) was added; every tensor's data offset is a
// multiple of it and the data section starts aligned.
//
// The writer only produces valid files: Add* rejects duplicate keys and
// tensor names, unknown dims and sizes (same rules as the parser). Hostile
// files for tests are built byte by byte (loader/testing/gguf_bytes.h).
//
// Thread-safety: not thread-safe; use from one thread.
#ifndef SLUICE_LOADER_GGUF_WRITER_H_
#define SLUICE_LOADER_GGUF_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "format/ggml_type.h"
#include "loader/gguf_file.h"

namespace sluice {

class GgufWriter {
 public:
  ~GgufWriter();  // closes the file; a file not Finish()ed is incomplete

  // Creates (truncates) `path`. version must be 2 or 3.
  static absl::StatusOr<std::unique_ptr<GgufWriter>> Create(
      const std::string& path, uint32_t version = 3);

  // Metadata, kept in insertion order. InvalidArgument on a duplicate key, a
  // bad general.alignment, or once the header has been written.
  absl::Status Add(std::string key, GgufValue value);

  // Declares the next tensor. `ne` has 1..4 dims, each > 0, ne[0] a multiple
  // of the type's block size. Returns the tensor's byte size via n_bytes()
  // later; InvalidArgument naming the tensor on any violation.
  absl::Status AddTensorInfo(std::string name, GgmlType type,
                             std::vector<uint64_t> ne);

  // Writes the whole data of the next declared tensor (FailedPrecondition if
  // `name` is not the next one or bytes.size() differs from its size).
  absl::Status WriteTensor(std::string_view name, absl::Span<const uint8_t> bytes);
  // Streams part of the current tensor's data; moves to the next tensor when
  // this one is complete (then pads to the alignment).
  absl::Status AppendTensorData(absl::Span<const uint8_t> bytes);

  // Checks that every tensor's data was written, flushes and closes.
  absl::Status Finish();

  // Byte size of a declared tensor; 0 if unknown.
  uint64_t TensorBytes(std::string_view name) const;
  const std::string& path() const { return path_; }

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
    uint64_t offset;
    uint64_t n_bytes;
  };

  GgufWriter() = default;
  absl::Status WriteHeader();
  absl::Status WriteBytes(const void* data, size_t n);
  absl::Status PadTo(uint64_t alignment);

  std::string path_;
  std::FILE* file_ = nullptr;
  uint32_t version_ = 3;
  uint64_t alignment_ = kGgufDefaultAlignment;
  std::vector<GgufKv> metadata_;
  std::unordered_set<std::string> keys_;
  std::vector<PendingTensor> tensors_;
  std::unordered_set<std::string> tensor_names_;
  uint64_t data_size_ = 0;  // sum of aligned tensor sizes declared so far
  bool header_written_ = false;
  bool finished_ = false;
  size_t current_ = 0;          // index of the tensor being written
  uint64_t current_done_ = 0;   // bytes of it written so far
  uint64_t position_ = 0;       // bytes written to the file
};

// Serializes one metadata value in GGUF layout (type id not included), for
// writers and for tests that assemble files by hand.
void AppendGgufValue(const GgufValue& value, std::string& out);

}  // namespace sluice

#endif  // SLUICE_LOADER_GGUF_WRITER_H_
