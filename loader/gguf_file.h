// Parsing and validation of one GGUF file (versions 2 and 3).
//
// A GgufFile is the decoded header of a GGUF file: every metadata key/value
// (all 13 value types, arrays nested to any depth up to kMaxArrayDepth) and
// every tensor info, fully validated against the file size. The layout and
// the validation rules are documented in docs/GGUF.md.
//
// Ownership: Parse() copies everything it keeps (keys, values, tensor infos)
// and does NOT retain `data` after it returns; a GgufFile never touches tensor
// bytes. Whoever maps the file (ModelFiles) turns TensorInfo::offset into a
// pointer as `base + data_offset() + offset`; Parse() has already checked that
// this range lies inside the `size` bytes it was given.
//
// Errors: every failure is an absl::Status whose message names the file, the
// field (metadata key, or tensor name and which of its fields) and the
// offending value. Codes: DataLoss when the file ends before a structure it
// announces (truncation, a string or array running past the end); InvalidArgument
// for values that are present but wrong (bad magic/version, unknown type ids,
// bad dims, misaligned or overlapping tensors, duplicates); NotFound for a
// missing metadata key in the getters.
//
// Thread-safety: a GgufFile is immutable after Parse(); all const methods may
// be called concurrently.
#ifndef SLUICE_LOADER_GGUF_FILE_H_
#define SLUICE_LOADER_GGUF_FILE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "format/ggml_type.h"

namespace sluice {

// The GGUF magic "GGUF" read as a little-endian uint32.
inline constexpr uint32_t kGgufMagic = 0x46554747;
// Alignment of tensor data when the file has no general.alignment key.
inline constexpr uint64_t kGgufDefaultAlignment = 32;
// Arrays of arrays deeper than this are rejected (bounds recursion).
inline constexpr int kMaxArrayDepth = 8;
// ggml tensors have at most this many dimensions.
inline constexpr uint32_t kMaxDims = 4;

// Metadata value type ids as stored in the file.
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "UINT32", "STRING", ... (the spelling of gguf-py and of manifest.json);
// "UNKNOWN" for ids outside the enum.
std::string_view GgufTypeName(GgufType type);
// Bytes one element of a fixed-size type occupies (0 for string/array).
uint32_t GgufTypeSize(GgufType type);
bool IsGgufIntegerType(GgufType type);

// One metadata value: a scalar, a string, or an array (of scalars, of strings
// or of arrays). Values are small regular types; arrays of numbers are kept
// packed as in the file (little-endian), so a 150k-entry token_type array is
// one allocation.
class GgufValue {
 public:
  GgufValue() = default;  // a UINT8 zero

  // Factories. Scalar<T> accepts uint8_t..int64_t, float, double and bool and
  // picks the matching GGUF type.
  template <typename T>
  static GgufValue Scalar(T v);
  static GgufValue String(std::string s);
  // An array of scalars; T as for Scalar<T>.
  template <typename T>
  static GgufValue Array(const std::vector<T>& elements);
  static GgufValue StringArray(std::vector<std::string> elements);
  // An array whose elements are arrays (each with its own element type).
  // Precondition: every element is_array().
  static GgufValue NestedArray(std::vector<GgufValue> elements);
  // An array of a fixed-size scalar type from packed little-endian bytes.
  // Precondition: raw.size() == count * GgufTypeSize(element_type).
  static GgufValue PackedArray(GgufType element_type, std::vector<uint8_t> raw);
  // Low level: a fixed-size scalar from its parts (unsigned types and bool
  // use `u`, signed types `i`, float types `f`), truncated to what `type`
  // holds, exactly as if written to a file and read back.
  // Precondition: GgufTypeSize(type) > 0.
  static GgufValue MakeScalar(GgufType type, uint64_t u, int64_t i, double f);
  // Decodes one little-endian scalar of fixed-size `type` at `p`.
  // Precondition: GgufTypeSize(type) readable bytes at p.
  static GgufValue DecodeScalar(GgufType type, const uint8_t* p);

  GgufType type() const { return type_; }
  bool is_array() const { return type_ == GgufType::kArray; }

  // Scalar views; nullopt / nullptr when the value is not of a fitting type.
  // AsU64: any integer type holding a value >= 0. AsI64: any integer type
  // holding a value that fits int64. AsF64: FLOAT32 or FLOAT64 (not
  // integers). AsBool: BOOL only. AsString: STRING only.
  std::optional<uint64_t> AsU64() const;
  std::optional<int64_t> AsI64() const;
  std::optional<double> AsF64() const;
  std::optional<bool> AsBool() const;
  const std::string* AsString() const;

  // Array views. Preconditions for all: is_array().
  GgufType element_type() const { return element_type_; }
  uint64_t array_size() const { return count_; }
  // Element i as a standalone value (copied). Precondition: i < array_size().
  GgufValue Element(uint64_t i) const;
  // Non-empty only for arrays of the matching element kind.
  absl::Span<const std::string> strings() const { return strings_; }
  absl::Span<const GgufValue> arrays() const { return arrays_; }
  absl::Span<const uint8_t> raw() const { return raw_; }

  // Human-readable value; arrays show at most `max_elements` elements and
  // then "... (N total)". Strings are quoted and escaped.
  std::string DebugString(uint64_t max_elements = 8) const;

 private:
  GgufType type_ = GgufType::kUint8;
  uint64_t u_ = 0;  // unsigned integers and bool
  int64_t i_ = 0;   // signed integers
  double f_ = 0;    // floats
  std::string str_;
  GgufType element_type_ = GgufType::kUint8;
  uint64_t count_ = 0;
  std::vector<uint8_t> raw_;
  std::vector<std::string> strings_;
  std::vector<GgufValue> arrays_;
};

struct GgufKv {
  std::string key;
  GgufValue value;
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  uint32_t n_dims = 0;
  // ne[i] for i >= n_dims is 1, so the element count is always the product.
  std::array<uint64_t, 4> ne = {1, 1, 1, 1};
  uint64_t offset = 0;   // within the data section (aligned to alignment())
  uint64_t n_bytes = 0;  // ne product / block_size * bytes_per_block
};

class GgufFile {
 public:
  // Parses and validates the `size` bytes at `data`. `file_name` is used only
  // in error messages and file_name(). `data` need not stay valid afterwards.
  // Precondition: data points at `size` readable bytes (may be null if 0).
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(std::string file_name,
                                                         const uint8_t* data,
                                                         uint64_t size);

  const std::string& file_name() const { return file_name_; }
  uint32_t version() const { return version_; }
  // general.alignment, or kGgufDefaultAlignment; always a power of two.
  uint64_t alignment() const { return alignment_; }
  // Absolute file offset of the data section (end of header rounded up to
  // alignment()). Tensor i lives at data_offset() + tensors()[i].offset.
  uint64_t data_offset() const { return data_offset_; }

  // Tensor infos in file order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // All metadata in file order.
  const std::vector<GgufKv>& metadata() const { return metadata_; }

  // nullptr when the key is absent.
  const GgufValue* Find(std::string_view key) const;

  // Typed getters. NotFound when the key is absent; InvalidArgument when it
  // has an incompatible type or its value does not fit the requested type.
  // Integer getters accept every integer type (range-checked); GetF32/GetF64
  // accept FLOAT32 and FLOAT64; array getters check the element type the
  // same way and convert element-wise.
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<uint64_t> GetU64(std::string_view key) const;
  absl::StatusOr<uint32_t> GetU32(std::string_view key) const;
  absl::StatusOr<int64_t> GetI64(std::string_view key) const;
  absl::StatusOr<float> GetF32(std::string_view key) const;
  absl::StatusOr<double> GetF64(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::vector<uint32_t>> GetArrayU32(std::string_view key) const;
  absl::StatusOr<std::vector<int32_t>> GetArrayI32(std::string_view key) const;
  absl::StatusOr<std::vector<float>> GetArrayF32(std::string_view key) const;
  absl::StatusOr<std::vector<bool>> GetArrayBool(std::string_view key) const;
  // A view into this GgufFile's storage (valid while it lives).
  absl::StatusOr<absl::Span<const std::string>> GetArrayString(
      std::string_view key) const;

  // Optional keys: `fallback` when the key is absent; still an error when the
  // key is present with a wrong type or out-of-range value.
  absl::StatusOr<std::string> GetStringOr(std::string_view key,
                                          std::string fallback) const;
  absl::StatusOr<uint64_t> GetU64Or(std::string_view key, uint64_t fallback) const;
  absl::StatusOr<uint32_t> GetU32Or(std::string_view key, uint32_t fallback) const;
  absl::StatusOr<float> GetF32Or(std::string_view key, float fallback) const;
  absl::StatusOr<bool> GetBoolOr(std::string_view key, bool fallback) const;

 private:
  GgufFile() = default;
  friend class GgufParser;  // gguf_file.cc

  std::string file_name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<TensorInfo> tensors_;
  std::vector<GgufKv> metadata_;
  std::unordered_map<std::string, size_t> index_;  // key -> metadata_ index
};

// ---- template definitions ----

namespace gguf_internal {
template <typename T>
struct TypeOf;
template <> struct TypeOf<uint8_t> { static constexpr GgufType kType = GgufType::kUint8; };
template <> struct TypeOf<int8_t> { static constexpr GgufType kType = GgufType::kInt8; };
template <> struct TypeOf<uint16_t> { static constexpr GgufType kType = GgufType::kUint16; };
template <> struct TypeOf<int16_t> { static constexpr GgufType kType = GgufType::kInt16; };
template <> struct TypeOf<uint32_t> { static constexpr GgufType kType = GgufType::kUint32; };
template <> struct TypeOf<int32_t> { static constexpr GgufType kType = GgufType::kInt32; };
template <> struct TypeOf<float> { static constexpr GgufType kType = GgufType::kFloat32; };
template <> struct TypeOf<bool> { static constexpr GgufType kType = GgufType::kBool; };
template <> struct TypeOf<uint64_t> { static constexpr GgufType kType = GgufType::kUint64; };
template <> struct TypeOf<int64_t> { static constexpr GgufType kType = GgufType::kInt64; };
template <> struct TypeOf<double> { static constexpr GgufType kType = GgufType::kFloat64; };

// Packs one scalar of `type` little-endian into `out`: unsigned types and
// bool take `u`, signed types `i`, float types `f`.
void AppendScalarBytes(GgufType type, uint64_t u, int64_t i, double f,
                       std::vector<uint8_t>& out);
}  // namespace gguf_internal

template <typename T>
GgufValue GgufValue::Scalar(T v) {
  constexpr GgufType kType = gguf_internal::TypeOf<T>::kType;
  if constexpr (std::is_floating_point_v<T>) {
    return MakeScalar(kType, 0, 0, static_cast<double>(v));
  } else if constexpr (std::is_signed_v<T>) {
    return MakeScalar(kType, 0, static_cast<int64_t>(v), 0);
  } else {
    return MakeScalar(kType, static_cast<uint64_t>(v), 0, 0);
  }
}

template <typename T>
GgufValue GgufValue::Array(const std::vector<T>& elements) {
  constexpr GgufType kType = gguf_internal::TypeOf<T>::kType;
  std::vector<uint8_t> raw;
  raw.reserve(elements.size() * GgufTypeSize(kType));
  for (const T v : elements) {
    if constexpr (std::is_floating_point_v<T>) {
      gguf_internal::AppendScalarBytes(kType, 0, 0, static_cast<double>(v), raw);
    } else if constexpr (std::is_signed_v<T>) {
      gguf_internal::AppendScalarBytes(kType, 0, static_cast<int64_t>(v), 0, raw);
    } else {
      gguf_internal::AppendScalarBytes(kType, static_cast<uint64_t>(v), 0, 0, raw);
    }
  }
  return PackedArray(kType, std::move(raw));
}

}  // namespace sluice

#endif  // SLUICE_LOADER_GGUF_FILE_H_
