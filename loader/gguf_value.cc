// GgufValue and the typed metadata getters of GgufFile.
#include <bit>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loader/gguf_file.h"

namespace sluice {

static_assert(std::endian::native == std::endian::little,
              "GGUF is little-endian; the loader copies bytes as they are");

std::string_view GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUint8: return "UINT8";
    case GgufType::kInt8: return "INT8";
    case GgufType::kUint16: return "UINT16";
    case GgufType::kInt16: return "INT16";
    case GgufType::kUint32: return "UINT32";
    case GgufType::kInt32: return "INT32";
    case GgufType::kFloat32: return "FLOAT32";
    case GgufType::kBool: return "BOOL";
    case GgufType::kString: return "STRING";
    case GgufType::kArray: return "ARRAY";
    case GgufType::kUint64: return "UINT64";
    case GgufType::kInt64: return "INT64";
    case GgufType::kFloat64: return "FLOAT64";
  }
  return "UNKNOWN";
}

uint32_t GgufTypeSize(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64: return 8;
    case GgufType::kString:
    case GgufType::kArray: return 0;
  }
  return 0;
}

bool IsGgufIntegerType(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64: return true;
    default: return false;
  }
}

static bool IsSigned(GgufType type) {
  return type == GgufType::kInt8 || type == GgufType::kInt16 ||
         type == GgufType::kInt32 || type == GgufType::kInt64;
}

namespace gguf_internal {

void AppendScalarBytes(GgufType type, uint64_t u, int64_t i, double f,
                       std::vector<uint8_t>& out) {
  uint8_t buf[8];
  const uint32_t n = GgufTypeSize(type);
  if (type == GgufType::kFloat32) {
    const float v = static_cast<float>(f);
    std::memcpy(buf, &v, 4);
  } else if (type == GgufType::kFloat64) {
    std::memcpy(buf, &f, 8);
  } else {
    // Two's complement truncation keeps the low n bytes for either sign.
    const uint64_t bits = IsSigned(type) ? static_cast<uint64_t>(i) : u;
    std::memcpy(buf, &bits, 8);
  }
  out.insert(out.end(), buf, buf + n);
}

}  // namespace gguf_internal

GgufValue GgufValue::MakeScalar(GgufType type, uint64_t u, int64_t i,
                                double f) {
  std::vector<uint8_t> bytes;
  gguf_internal::AppendScalarBytes(type, u, i, f, bytes);
  return DecodeScalar(type, bytes.data());
}

GgufValue GgufValue::DecodeScalar(GgufType type, const uint8_t* p) {
  GgufValue v;
  v.type_ = type;
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kBool: v.u_ = p[0]; break;
    case GgufType::kInt8: v.i_ = static_cast<int8_t>(p[0]); break;
    case GgufType::kUint16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      v.u_ = x;
      break;
    }
    case GgufType::kInt16: {
      int16_t x;
      std::memcpy(&x, p, 2);
      v.i_ = x;
      break;
    }
    case GgufType::kUint32: {
      uint32_t x;
      std::memcpy(&x, p, 4);
      v.u_ = x;
      break;
    }
    case GgufType::kInt32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      v.i_ = x;
      break;
    }
    case GgufType::kFloat32: {
      float x;
      std::memcpy(&x, p, 4);
      v.f_ = x;
      break;
    }
    case GgufType::kUint64: std::memcpy(&v.u_, p, 8); break;
    case GgufType::kInt64: std::memcpy(&v.i_, p, 8); break;
    case GgufType::kFloat64: std::memcpy(&v.f_, p, 8); break;
    case GgufType::kString:
    case GgufType::kArray: break;  // precondition violated; stays empty
  }
  return v;
}

GgufValue GgufValue::String(std::string s) {
  GgufValue v;
  v.type_ = GgufType::kString;
  v.str_ = std::move(s);
  return v;
}

GgufValue GgufValue::StringArray(std::vector<std::string> elements) {
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = GgufType::kString;
  v.count_ = elements.size();
  v.strings_ = std::move(elements);
  return v;
}

GgufValue GgufValue::NestedArray(std::vector<GgufValue> elements) {
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = GgufType::kArray;
  v.count_ = elements.size();
  v.arrays_ = std::move(elements);
  return v;
}

GgufValue GgufValue::PackedArray(GgufType element_type,
                                 std::vector<uint8_t> raw) {
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = element_type;
  const uint32_t size = GgufTypeSize(element_type);
  v.count_ = size == 0 ? 0 : raw.size() / size;
  v.raw_ = std::move(raw);
  return v;
}

std::optional<uint64_t> GgufValue::AsU64() const {
  if (!IsGgufIntegerType(type_)) return std::nullopt;
  if (IsSigned(type_)) {
    if (i_ < 0) return std::nullopt;
    return static_cast<uint64_t>(i_);
  }
  return u_;
}

std::optional<int64_t> GgufValue::AsI64() const {
  if (!IsGgufIntegerType(type_)) return std::nullopt;
  if (IsSigned(type_)) return i_;
  if (u_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return std::nullopt;
  }
  return static_cast<int64_t>(u_);
}

std::optional<double> GgufValue::AsF64() const {
  if (type_ != GgufType::kFloat32 && type_ != GgufType::kFloat64) {
    return std::nullopt;
  }
  return f_;
}

std::optional<bool> GgufValue::AsBool() const {
  if (type_ != GgufType::kBool) return std::nullopt;
  return u_ != 0;
}

const std::string* GgufValue::AsString() const {
  return type_ == GgufType::kString ? &str_ : nullptr;
}

GgufValue GgufValue::Element(uint64_t i) const {
  if (element_type_ == GgufType::kString) return String(strings_[i]);
  if (element_type_ == GgufType::kArray) return arrays_[i];
  return DecodeScalar(element_type_, raw_.data() + i * GgufTypeSize(element_type_));
}

std::string GgufValue::DebugString(uint64_t max_elements) const {
  switch (type_) {
    case GgufType::kString: return absl::StrCat("\"", absl::Utf8SafeCEscape(str_), "\"");
    case GgufType::kBool: return u_ != 0 ? "true" : "false";
    case GgufType::kFloat32:
    case GgufType::kFloat64: return absl::StrFormat("%.9g", f_);
    case GgufType::kArray: break;
    default:
      return IsSigned(type_) ? absl::StrCat(i_) : absl::StrCat(u_);
  }
  std::string out = "[";
  const uint64_t shown = count_ < max_elements ? count_ : max_elements;
  for (uint64_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += Element(i).DebugString(max_elements);
  }
  if (shown < count_) absl::StrAppend(&out, shown > 0 ? ", " : "", "...");
  absl::StrAppend(&out, "] (", count_, " ", std::string(GgufTypeName(element_type_)), ")");
  return out;
}


// ---- GgufFile typed getters ----

namespace {

std::string Quoted(std::string_view key) { return absl::StrCat("'", std::string(key), "'"); }

std::string Describe(const GgufValue& v) {
  if (v.is_array()) {
    return absl::StrCat("ARRAY of ", v.array_size(), " ",
                        std::string(GgufTypeName(v.element_type())));
  }
  return absl::StrCat(std::string(GgufTypeName(v.type())), " ", v.DebugString());
}

absl::Status WrongType(const GgufFile& f, std::string_view key,
                       const GgufValue& v, std::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat(
      f.file_name(), ": metadata key ", Quoted(key), ": expected ",
      std::string(expected), ", found ", Describe(v)));
}

template <typename T>
std::optional<T> IntegerAs(const GgufValue& v) {
  if (std::numeric_limits<T>::is_signed) {
    std::optional<int64_t> x = v.AsI64();
    if (!x || *x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        *x > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      return std::nullopt;
    }
    return static_cast<T>(*x);
  }
  std::optional<uint64_t> x = v.AsU64();
  if (!x || *x > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
    return std::nullopt;
  }
  return static_cast<T>(*x);
}

template <typename T>
absl::StatusOr<T> GetInteger(const GgufFile& f, std::string_view key,
                             std::string_view type_name) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) {
    return absl::NotFoundError(absl::StrCat(f.file_name(), ": metadata key ",
                                            Quoted(key), " not found"));
  }
  if (!IsGgufIntegerType(v->type())) {
    return WrongType(f, key, *v, absl::StrCat("an integer (", std::string(type_name), ")"));
  }
  std::optional<T> x = IntegerAs<T>(*v);
  if (!x) {
    return absl::InvalidArgumentError(absl::StrCat(
        f.file_name(), ": metadata key ", Quoted(key), ": value ",
        v->DebugString(), " does not fit ", std::string(type_name)));
  }
  return *x;
}

template <typename T>
absl::StatusOr<std::vector<T>> GetIntegerArray(const GgufFile& f,
                                               std::string_view key,
                                               std::string_view type_name) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) {
    return absl::NotFoundError(absl::StrCat(f.file_name(), ": metadata key ",
                                            Quoted(key), " not found"));
  }
  if (!v->is_array() || !IsGgufIntegerType(v->element_type())) {
    return WrongType(f, key, *v, absl::StrCat("an array of integers (", std::string(type_name), ")"));
  }
  std::vector<T> out;
  out.reserve(v->array_size());
  for (uint64_t i = 0; i < v->array_size(); ++i) {
    GgufValue e = v->Element(i);
    std::optional<T> x = IntegerAs<T>(e);
    if (!x) {
      return absl::InvalidArgumentError(absl::StrCat(
          f.file_name(), ": metadata key ", Quoted(key), "[", i, "]: value ",
          e.DebugString(), " does not fit ", std::string(type_name)));
    }
    out.push_back(*x);
  }
  return out;
}

absl::Status Missing(const GgufFile& f, std::string_view key) {
  return absl::NotFoundError(
      absl::StrCat(f.file_name(), ": metadata key ", Quoted(key), " not found"));
}

}  // namespace

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &metadata_[it->second].value;
}

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(*this, key);
  if (v->AsString() == nullptr) return WrongType(*this, key, *v, "STRING");
  return *v->AsString();
}

absl::StatusOr<uint64_t> GgufFile::GetU64(std::string_view key) const {
  return GetInteger<uint64_t>(*this, key, "uint64");
}

absl::StatusOr<uint32_t> GgufFile::GetU32(std::string_view key) const {
  return GetInteger<uint32_t>(*this, key, "uint32");
}

absl::StatusOr<int64_t> GgufFile::GetI64(std::string_view key) const {
  return GetInteger<int64_t>(*this, key, "int64");
}

absl::StatusOr<double> GgufFile::GetF64(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(*this, key);
  if (!v->AsF64()) return WrongType(*this, key, *v, "FLOAT32 or FLOAT64");
  return *v->AsF64();
}

absl::StatusOr<float> GgufFile::GetF32(std::string_view key) const {
  absl::StatusOr<double> v = GetF64(key);
  if (!v.ok()) return v.status();
  return static_cast<float>(*v);
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(*this, key);
  if (!v->AsBool()) return WrongType(*this, key, *v, "BOOL");
  return *v->AsBool();
}

absl::StatusOr<std::vector<uint32_t>> GgufFile::GetArrayU32(
    std::string_view key) const {
  return GetIntegerArray<uint32_t>(*this, key, "uint32");
}

absl::StatusOr<std::vector<int32_t>> GgufFile::GetArrayI32(
    std::string_view key) const {
  return GetIntegerArray<int32_t>(*this, key, "int32");
}

absl::StatusOr<std::vector<float>> GgufFile::GetArrayF32(
    std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(*this, key);
  if (!v->is_array() || (v->element_type() != GgufType::kFloat32 &&
                         v->element_type() != GgufType::kFloat64)) {
    return WrongType(*this, key, *v, "an array of FLOAT32 or FLOAT64");
  }
  std::vector<float> out;
  out.reserve(v->array_size());
  for (uint64_t i = 0; i < v->array_size(); ++i) {
    out.push_back(static_cast<float>(*v->Element(i).AsF64()));
  }
  return out;
}

absl::StatusOr<std::vector<bool>> GgufFile::GetArrayBool(
    std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(*this, key);
  if (!v->is_array() || v->element_type() != GgufType::kBool) {
    return WrongType(*this, key, *v, "an array of BOOL");
  }
  std::vector<bool> out(v->array_size());
  for (uint64_t i = 0; i < v->array_size(); ++i) out[i] = v->raw()[i] != 0;
  return out;
}

absl::StatusOr<absl::Span<const std::string>> GgufFile::GetArrayString(
    std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(*this, key);
  if (!v->is_array() || v->element_type() != GgufType::kString) {
    return WrongType(*this, key, *v, "an array of STRING");
  }
  return v->strings();
}

absl::StatusOr<std::string> GgufFile::GetStringOr(std::string_view key,
                                                  std::string fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetString(key);
}

absl::StatusOr<uint64_t> GgufFile::GetU64Or(std::string_view key,
                                            uint64_t fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetU64(key);
}

absl::StatusOr<uint32_t> GgufFile::GetU32Or(std::string_view key,
                                            uint32_t fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetU32(key);
}

absl::StatusOr<float> GgufFile::GetF32Or(std::string_view key,
                                         float fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetF32(key);
}

absl::StatusOr<bool> GgufFile::GetBoolOr(std::string_view key,
                                         bool fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetBool(key);
}

}  // namespace sluice
