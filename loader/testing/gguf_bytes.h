// Test helpers: GGUF files assembled byte by byte (for hostile inputs the
// writer refuses to produce) and temporary directories.
//
//   std::string f = GgufBytes().Header(3, /*n_tensors=*/1, /*n_kv=*/0)
//                       .TensorInfo("t", {32}, /*type_id=*/0, /*offset=*/0)
//                       .PadTo(32).Zeros(128).bytes();
//
// Thread-safety: none needed (value types, tests only).
#ifndef SLUICE_LOADER_TESTING_GGUF_BYTES_H_
#define SLUICE_LOADER_TESTING_GGUF_BYTES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"

namespace sluice::testing {

class GgufBytes {
 public:
  GgufBytes& U8(uint8_t v) { return Raw(&v, 1); }
  GgufBytes& U16(uint16_t v) { return Raw(&v, 2); }
  GgufBytes& U32(uint32_t v) { return Raw(&v, 4); }
  GgufBytes& U64(uint64_t v) { return Raw(&v, 8); }
  GgufBytes& F32(float v) { return Raw(&v, 4); }
  // Length-prefixed string.
  GgufBytes& Str(const std::string& s) {
    U64(s.size());
    return Raw(s.data(), s.size());
  }
  GgufBytes& Raw(const void* p, size_t n) {
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  GgufBytes& Zeros(size_t n) {
    bytes_.append(n, '\0');
    return *this;
  }
  // Zero bytes up to the next multiple of `alignment` of the total length.
  GgufBytes& PadTo(size_t alignment) {
    return Zeros((alignment - bytes_.size() % alignment) % alignment);
  }

  // "GGUF", version, tensor count, kv count.
  GgufBytes& Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return U32(kGgufMagic).U32(version).U64(n_tensors).U64(n_kv);
  }
  // Key, value type id, then the value's bytes as AppendGgufValue writes them.
  GgufBytes& Kv(const std::string& key, const GgufValue& value) {
    Str(key).U32(static_cast<uint32_t>(value.type()));
    AppendGgufValue(value, bytes_);
    return *this;
  }
  // A tensor info with n_dims = ne.size() (any length, any values).
  GgufBytes& TensorInfo(const std::string& name, const std::vector<uint64_t>& ne,
                        uint32_t type_id, uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) U64(n);
    return U32(type_id).U64(offset);
  }

  const std::string& bytes() const { return bytes_; }
  const uint8_t* data() const {
    return reinterpret_cast<const uint8_t*>(bytes_.data());
  }
  uint64_t size() const { return bytes_.size(); }

 private:
  std::string bytes_;
};

// A fresh empty directory under $TEST_TMPDIR (or /tmp). Aborts on failure:
// a test without a scratch directory cannot proceed.
std::string MakeTempDir();
// Writes `bytes` to `path`; aborts on failure.
void WriteFileOrDie(const std::string& path, const std::string& bytes);

}  // namespace sluice::testing

#endif  // SLUICE_LOADER_TESTING_GGUF_BYTES_H_
