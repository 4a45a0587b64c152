// The GGUF header parser. Every read is bounds-checked against the buffer and
// every size computation is overflow-checked before it is used; rules are in
// docs/GGUF.md ("Validation").
#include "loader/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace sluice {

namespace {

constexpr uint64_t kMaxI64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
// Smallest encodings, used to reject counts that cannot fit the bytes left
// before allocating anything for them.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // key len, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // 1 dim
constexpr uint64_t kMinStringBytes = 8;
constexpr uint64_t kMinArrayBytes = 4 + 8;

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}
bool AddOverflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

// A printable, bounded rendering of a name taken from the file.
std::string Printable(const std::string& s) {
  constexpr size_t kMax = 96;
  std::string shown = absl::CEscape(s.size() > kMax ? s.substr(0, kMax) : s);
  if (s.size() > kMax) absl::StrAppend(&shown, "...");
  return absl::StrCat("'", shown, "'");
}

}  // namespace

// Friend of GgufFile: fills it in while reading.
class GgufParser {
 public:
  GgufParser(std::string file_name, const uint8_t* data, uint64_t size)
      : data_(data), size_(size), file_(new GgufFile()) {
    file_->file_name_ = std::move(file_name);
  }

  absl::StatusOr<std::unique_ptr<GgufFile>> Run() {
    uint64_t n_tensors = 0, n_kv = 0;
    RETURN_IF_ERROR(ReadHeader(&n_tensors, &n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) RETURN_IF_ERROR(ReadKv(i));
    RETURN_IF_ERROR(ReadAlignment());
    file_->tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) RETURN_IF_ERROR(ReadTensorInfo(i));
    RETURN_IF_ERROR(PlaceData());
    return std::move(file_);
  }

 private:
  const std::string& name() const { return file_->file_name_; }
  uint64_t remaining() const { return size_ - pos_; }

  absl::Status Truncated(uint64_t need, const std::string& what) const {
    return absl::DataLossError(absl::StrCat(
        name(), ": ", what, ": file truncated: need ", need,
        " bytes at offset ", pos_, ", only ", remaining(), " remain (file size ",
        size_, ")"));
  }
  absl::Status Invalid(const std::string& what, const std::string& problem) const {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": ", what, ": ", problem));
  }

  absl::Status Need(uint64_t n, const std::string& what) const {
    if (n > remaining()) return Truncated(n, what);
    return absl::OkStatus();
  }

  template <typename T>
  absl::StatusOr<T> Read(const std::string& what) {
    RETURN_IF_ERROR(Need(sizeof(T), what));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  absl::StatusOr<std::string> ReadString(const std::string& what) {
    ASSIGN_OR_RETURN(uint64_t len, Read<uint64_t>(what + " length"));
    if (len > remaining()) {
      return absl::DataLossError(absl::StrCat(
          name(), ": ", what, ": string length ", len, " at offset ", pos_ - 8,
          " exceeds the ", remaining(), " bytes remaining in the file"));
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

  // `at` is the offset the count was read from (for the message).
  absl::Status CheckCount(uint64_t count, uint64_t min_bytes,
                          const std::string& what, uint64_t at) const {
    uint64_t need = 0;
    if (MulOverflows(count, min_bytes, &need) || need > remaining()) {
      return absl::DataLossError(absl::StrCat(
          name(), ": ", what, ": count ", count, " at offset ", at,
          " needs at least ", min_bytes, " bytes each but only ", remaining(),
          " bytes remain in the file"));
    }
    return absl::OkStatus();
  }

  absl::Status ReadHeader(uint64_t* n_tensors, uint64_t* n_kv) {
    ASSIGN_OR_RETURN(uint32_t magic, Read<uint32_t>("header magic"));
    if (magic != kGgufMagic) {
      // The bytes found are not quoted: an error must not reveal the
      // contents of whatever file was named.
      return Invalid("header magic", "expected 'GGUF': not a GGUF file");
    }
    ASSIGN_OR_RETURN(uint32_t version, Read<uint32_t>("header version"));
    if (version == 1) {
      return Invalid("header version",
                     "1 is not supported (GGUF v1 used 32-bit counts; v2 and v3 are read)");
    }
    if (version != 2 && version != 3) {
      std::string hint = (version & 0xffff) == 0 ? " (a big-endian GGUF? only little-endian is read)" : "";
      return Invalid("header version",
                     absl::StrCat(version, " is not supported (v2 and v3 are)", hint));
    }
    file_->version_ = version;
    ASSIGN_OR_RETURN(*n_tensors, Read<uint64_t>("header tensor_count"));
    ASSIGN_OR_RETURN(*n_kv, Read<uint64_t>("header metadata_kv_count"));
    RETURN_IF_ERROR(CheckCount(*n_kv, kMinKvBytes, "header metadata_kv_count", pos_ - 8));
    // Tensor infos follow the metadata; this bound is loose but stops
    // absurd counts before anything is reserved for them.
    RETURN_IF_ERROR(CheckCount(*n_tensors, kMinTensorInfoBytes, "header tensor_count",
                               pos_ - 16));
    return absl::OkStatus();
  }

  absl::StatusOr<GgufType> ReadType(const std::string& what) {
    ASSIGN_OR_RETURN(uint32_t id, Read<uint32_t>(what));
    if (id > static_cast<uint32_t>(GgufType::kFloat64)) {
      return Invalid(what, absl::StrCat("unknown GGUF value type id ", id,
                                        " at offset ", pos_ - 4));
    }
    return static_cast<GgufType>(id);
  }

  absl::StatusOr<GgufValue> ReadValue(GgufType type, int depth,
                                      const std::string& what) {
    if (type == GgufType::kString) {
      ASSIGN_OR_RETURN(std::string s, ReadString(what));
      return GgufValue::String(std::move(s));
    }
    if (type == GgufType::kArray) return ReadArray(depth + 1, what);
    const uint32_t n = GgufTypeSize(type);
    RETURN_IF_ERROR(Need(n, what));
    if (type == GgufType::kBool && data_[pos_] > 1) {
      return Invalid(what, absl::StrCat("BOOL value ", data_[pos_],
                                        " at offset ", pos_, " is neither 0 nor 1"));
    }
    GgufValue v = GgufValue::DecodeScalar(type, data_ + pos_);
    pos_ += n;
    return v;
  }

  absl::StatusOr<GgufValue> ReadArray(int depth, const std::string& what) {
    if (depth > kMaxArrayDepth) {
      return Invalid(what, absl::StrCat("arrays nested ", depth,
                                        " deep exceed the limit of ", kMaxArrayDepth));
    }
    ASSIGN_OR_RETURN(GgufType elem, ReadType(what + " array element type"));
    ASSIGN_OR_RETURN(uint64_t count, Read<uint64_t>(what + " array count"));
    if (elem == GgufType::kString) {
      RETURN_IF_ERROR(CheckCount(count, kMinStringBytes, what + " array", pos_ - 8));
      std::vector<std::string> strings;
      strings.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        ASSIGN_OR_RETURN(std::string s, ReadString(absl::StrCat(what, "[", i, "]")));
        strings.push_back(std::move(s));
      }
      return GgufValue::StringArray(std::move(strings));
    }
    if (elem == GgufType::kArray) {
      RETURN_IF_ERROR(CheckCount(count, kMinArrayBytes, what + " array", pos_ - 8));
      std::vector<GgufValue> arrays;
      arrays.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        ASSIGN_OR_RETURN(GgufValue a, ReadArray(depth + 1, absl::StrCat(what, "[", i, "]")));
        arrays.push_back(std::move(a));
      }
      return GgufValue::NestedArray(std::move(arrays));
    }
    const uint32_t elem_size = GgufTypeSize(elem);
    RETURN_IF_ERROR(CheckCount(count, elem_size, what + " array", pos_ - 8));
    const uint64_t n_bytes = count * elem_size;  // checked by CheckCount
    if (elem == GgufType::kBool) {
      for (uint64_t i = 0; i < count; ++i) {
        if (data_[pos_ + i] > 1) {
          return Invalid(absl::StrCat(what, "[", i, "]"),
                         absl::StrCat("BOOL value ", data_[pos_ + i], " at offset ",
                                      pos_ + i, " is neither 0 nor 1"));
        }
      }
    }
    std::vector<uint8_t> raw(data_ + pos_, data_ + pos_ + n_bytes);
    pos_ += n_bytes;
    return GgufValue::PackedArray(elem, std::move(raw));
  }

  absl::Status ReadKv(uint64_t index) {
    const std::string entry = absl::StrCat("metadata entry ", index);
    ASSIGN_OR_RETURN(std::string key, ReadString(entry + " key"));
    const std::string what = absl::StrCat("metadata key ", Printable(key));
    if (file_->index_.count(key) != 0) {
      return Invalid(what, absl::StrCat("duplicate key (entry ", index, " repeats entry ",
                                        file_->index_[key], ")"));
    }
    ASSIGN_OR_RETURN(GgufType type, ReadType(what + " value type"));
    ASSIGN_OR_RETURN(GgufValue value, ReadValue(type, 0, what));
    file_->index_.emplace(key, file_->metadata_.size());
    file_->metadata_.push_back(GgufKv{std::move(key), std::move(value)});
    return absl::OkStatus();
  }

  absl::Status ReadAlignment() {
    const GgufValue* v = file_->Find("general.alignment");
    if (v == nullptr) return absl::OkStatus();
    const std::string what = "metadata key 'general.alignment'";
    std::optional<uint64_t> a = v->AsU64();
    if (!IsGgufIntegerType(v->type()) || !a.has_value()) {
      return Invalid(what, absl::StrCat("expected a non-negative integer, found ",
                                        std::string(GgufTypeName(v->type())), " ",
                                        v->DebugString()));
    }
    if (*a == 0 || (*a & (*a - 1)) != 0) {
      return Invalid(what, absl::StrCat(*a, " is not a nonzero power of two"));
    }
    file_->alignment_ = *a;
    return absl::OkStatus();
  }

  absl::Status ReadTensorInfo(uint64_t index) {
    ASSIGN_OR_RETURN(std::string tname,
                     ReadString(absl::StrCat("tensor info ", index, " name")));
    TensorInfo t;
    t.name = std::move(tname);
    const std::string what = absl::StrCat("tensor ", Printable(t.name));
    ASSIGN_OR_RETURN(t.n_dims, Read<uint32_t>(what + " n_dims"));
    if (t.n_dims == 0 || t.n_dims > kMaxDims) {
      return Invalid(what + " n_dims",
                     absl::StrCat(t.n_dims, " is outside 1..", kMaxDims));
    }
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      ASSIGN_OR_RETURN(t.ne[d], Read<uint64_t>(absl::StrCat(what, " ne[", d, "]")));
    }
    ASSIGN_OR_RETURN(uint32_t type_id, Read<uint32_t>(what + " type"));
    ASSIGN_OR_RETURN(t.offset, Read<uint64_t>(what + " offset"));
    std::optional<GgmlTypeTraits> traits = LookupGgmlType(type_id);
    if (!traits) {
      return Invalid(what + " type", absl::StrCat("unknown ggml type id ", type_id));
    }
    t.type = traits->type;
    RETURN_IF_ERROR(SizeTensor(what, *traits, t));
    if (t.offset % file_->alignment_ != 0) {
      return Invalid(what + " offset",
                     absl::StrCat(t.offset, " is not a multiple of the alignment ",
                                  file_->alignment_));
    }
    if (!tensor_names_.insert(t.name).second) {
      return Invalid(what, absl::StrCat("duplicate tensor name (tensor info ", index,
                                        " repeats an earlier one)"));
    }
    file_->tensors_.push_back(std::move(t));
    return absl::OkStatus();
  }

  absl::Status SizeTensor(const std::string& what, const GgmlTypeTraits& traits,
                          TensorInfo& t) const {
    uint64_t elements = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const std::string field = absl::StrCat(what, " ne[", d, "]");
      if (t.ne[d] == 0) return Invalid(field, "0 (every dimension must be >= 1)");
      if (t.ne[d] > kMaxI64) {
        return Invalid(field, absl::StrCat(t.ne[d], " exceeds INT64_MAX"));
      }
      if (MulOverflows(elements, t.ne[d], &elements) || elements > kMaxI64) {
        return Invalid(what + " ne", absl::StrCat("element count of ", DimsString(t),
                                                  " overflows int64"));
      }
    }
    if (t.ne[0] % traits.block_size != 0) {
      return Invalid(what + " ne[0]",
                     absl::StrCat(t.ne[0], " is not a multiple of the ",
                                  std::string(traits.name), " block size ",
                                  traits.block_size));
    }
    uint64_t bytes = (t.ne[0] / traits.block_size) * traits.bytes_per_block;
    // Types with more bytes than elements per block (f64, i64, q8_0 ...) can
    // wrap 64 bits even when the element count fits; check every product.
    if (MulOverflows(t.ne[0] / traits.block_size, traits.bytes_per_block, &bytes) ||
        MulOverflows(bytes, t.ne[1], &bytes) || MulOverflows(bytes, t.ne[2], &bytes) ||
        MulOverflows(bytes, t.ne[3], &bytes)) {
      return Invalid(what + " n_bytes",
                     absl::StrCat("byte size of ", DimsString(t), " ",
                                  std::string(traits.name), " overflows 64 bits"));
    }
    t.n_bytes = bytes;
    return absl::OkStatus();
  }

  static std::string DimsString(const TensorInfo& t) {
    std::string s = "[";
    for (uint32_t d = 0; d < t.n_dims; ++d) absl::StrAppend(&s, d ? ", " : "", t.ne[d]);
    return s + "]";
  }

  // Computes the data section start and checks every tensor lies inside the
  // file and that no two tensors share bytes.
  absl::Status PlaceData() {
    const uint64_t a = file_->alignment_;
    uint64_t start = 0;
    if (AddOverflows(pos_, a - 1, &start)) {
      return Invalid("data section offset", "overflows 64 bits");
    }
    file_->data_offset_ = start / a * a;
    std::vector<size_t> order(file_->tensors_.size());
    std::iota(order.begin(), order.end(), 0);
    for (const TensorInfo& t : file_->tensors_) {
      uint64_t begin = 0, end = 0;
      if (AddOverflows(file_->data_offset_, t.offset, &begin) ||
          AddOverflows(begin, t.n_bytes, &end) || end > size_) {
        return absl::DataLossError(absl::StrCat(
            name(), ": tensor ", Printable(t.name), " data: offset ", t.offset,
            " + n_bytes ", t.n_bytes, " (", DimsString(t), " ",
            std::string(TraitsOf(t.type).name), ") from data section at ",
            file_->data_offset_, " runs past the end of the file (size ", size_, ")"));
      }
    }
    const std::vector<TensorInfo>& ts = file_->tensors_;
    std::sort(order.begin(), order.end(),
              [&](size_t x, size_t y) { return ts[x].offset < ts[y].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& prev = ts[order[k - 1]];
      const TensorInfo& cur = ts[order[k]];
      if (prev.offset + prev.n_bytes > cur.offset) {  // both bounded by size_
        return Invalid(absl::StrCat("tensor ", Printable(prev.name), " data"),
                       absl::StrCat("bytes [", prev.offset, ", ",
                                    prev.offset + prev.n_bytes,
                                    ") of the data section overlap tensor ",
                                    Printable(cur.name), " at offset ", cur.offset));
      }
    }
    return absl::OkStatus();
  }

  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::unique_ptr<GgufFile> file_;
  std::unordered_set<std::string> tensor_names_;
};

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(std::string file_name,
                                                          const uint8_t* data,
                                                          uint64_t size) {
  if (data == nullptr) size = 0;
  return GgufParser(std::move(file_name), data, size).Run();
}

}  // namespace sluice
