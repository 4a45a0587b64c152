#include "loader/gguf_writer.h"

#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace sluice {

namespace {

void AppendU32(uint32_t v, std::string& out) {
  out.append(reinterpret_cast<const char*>(&v), 4);
}
void AppendU64(uint64_t v, std::string& out) {
  out.append(reinterpret_cast<const char*>(&v), 8);
}
void AppendStr(const std::string& s, std::string& out) {
  AppendU64(s.size(), out);
  out.append(s);
}

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

void AppendGgufValue(const GgufValue& value, std::string& out) {
  if (value.type() == GgufType::kString) {
    AppendStr(*value.AsString(), out);
    return;
  }
  if (!value.is_array()) {
    std::vector<uint8_t> bytes;
    const GgufType t = value.type();
    if (t == GgufType::kFloat32 || t == GgufType::kFloat64) {
      gguf_internal::AppendScalarBytes(t, 0, 0, *value.AsF64(), bytes);
    } else if (t == GgufType::kBool) {
      gguf_internal::AppendScalarBytes(t, *value.AsBool() ? 1 : 0, 0, 0, bytes);
    } else if (value.AsI64().has_value()) {
      // Every integer fits int64 except uint64 values >= 2^63, which AsU64
      // carries; the low bytes are what the file needs either way.
      gguf_internal::AppendScalarBytes(t, static_cast<uint64_t>(*value.AsI64()),
                                       *value.AsI64(), 0, bytes);
    } else {
      gguf_internal::AppendScalarBytes(t, *value.AsU64(), 0, 0, bytes);
    }
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return;
  }
  AppendU32(static_cast<uint32_t>(value.element_type()), out);
  AppendU64(value.array_size(), out);
  if (value.element_type() == GgufType::kString) {
    for (const std::string& s : value.strings()) AppendStr(s, out);
  } else if (value.element_type() == GgufType::kArray) {
    for (const GgufValue& a : value.arrays()) AppendGgufValue(a, out);
  } else {
    out.append(reinterpret_cast<const char*>(value.raw().data()), value.raw().size());
  }
}

GgufWriter::~GgufWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::StatusOr<std::unique_ptr<GgufWriter>> GgufWriter::Create(
    const std::string& path, uint32_t version) {
  if (version != 2 && version != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": GGUF version ", version, " cannot be written (2 or 3)"));
  }
  std::unique_ptr<GgufWriter> w(new GgufWriter());
  w->path_ = path;
  w->version_ = version;
  w->file_ = std::fopen(path.c_str(), "wb");
  if (w->file_ == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot create"));
  }
  return w;
}

absl::Status GgufWriter::Add(std::string key, GgufValue value) {
  if (header_written_) {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, ": metadata key '", key, "' added after tensor data started"));
  }
  if (!keys_.insert(key).second) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": metadata key '", key, "' added twice"));
  }
  if (key == "general.alignment") {
    std::optional<uint64_t> a = value.AsU64();
    if (!a || *a == 0 || (*a & (*a - 1)) != 0 || !tensors_.empty()) {
      keys_.erase(key);
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": metadata key 'general.alignment' = ", value.DebugString(),
          " must be a nonzero power of two, added before any tensor"));
    }
    alignment_ = *a;
  }
  metadata_.push_back(GgufKv{std::move(key), std::move(value)});
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensorInfo(std::string name, GgmlType type,
                                       std::vector<uint64_t> ne) {
  const std::string what = absl::StrCat(path_, ": tensor '", name, "'");
  if (header_written_) {
    return absl::FailedPreconditionError(what + " declared after tensor data started");
  }
  if (ne.empty() || ne.size() > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": n_dims ", ne.size(), " is outside 1..", kMaxDims));
  }
  const GgmlTypeTraits& traits = TraitsOf(type);
  uint64_t bytes = traits.bytes_per_block;
  for (size_t d = 0; d < ne.size(); ++d) {
    uint64_t factor = d == 0 ? ne[0] / traits.block_size : ne[d];
    if (ne[d] == 0 || (d == 0 && ne[0] % traits.block_size != 0) ||
        __builtin_mul_overflow(bytes, factor, &bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ne[", d, "] = ", ne[d], " is zero, overflows, or is not a multiple "
          "of the ", std::string(traits.name), " block size ", traits.block_size));
    }
  }
  if (!tensor_names_.insert(name).second) {
    return absl::InvalidArgumentError(what + " declared twice");
  }
  tensors_.push_back(PendingTensor{std::move(name), type, std::move(ne), data_size_, bytes});
  data_size_ += AlignUp(bytes, alignment_);
  return absl::OkStatus();
}

absl::Status GgufWriter::WriteBytes(const void* data, size_t n) {
  if (n > 0 && std::fwrite(data, 1, n, file_) != n) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path_, ": write failed"));
  }
  position_ += n;
  return absl::OkStatus();
}

absl::Status GgufWriter::PadTo(uint64_t alignment) {
  static const char kZeros[256] = {};
  uint64_t pad = AlignUp(position_, alignment) - position_;
  while (pad > 0) {
    const uint64_t n = pad < sizeof(kZeros) ? pad : sizeof(kZeros);
    RETURN_IF_ERROR(WriteBytes(kZeros, n));
    pad -= n;
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::WriteHeader() {
  std::string out;
  AppendU32(kGgufMagic, out);
  AppendU32(version_, out);
  AppendU64(tensors_.size(), out);
  AppendU64(metadata_.size(), out);
  for (const GgufKv& kv : metadata_) {
    AppendStr(kv.key, out);
    AppendU32(static_cast<uint32_t>(kv.value.type()), out);
    AppendGgufValue(kv.value, out);
  }
  for (const PendingTensor& t : tensors_) {
    AppendStr(t.name, out);
    AppendU32(static_cast<uint32_t>(t.ne.size()), out);
    for (uint64_t n : t.ne) AppendU64(n, out);
    AppendU32(static_cast<uint32_t>(t.type), out);
    AppendU64(t.offset, out);
  }
  RETURN_IF_ERROR(WriteBytes(out.data(), out.size()));
  RETURN_IF_ERROR(PadTo(alignment_));
  header_written_ = true;
  return absl::OkStatus();
}

absl::Status GgufWriter::WriteTensor(std::string_view name,
                                     absl::Span<const uint8_t> bytes) {
  if (current_ >= tensors_.size() || tensors_[current_].name != name ||
      current_done_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, ": tensor '", std::string(name), "' written out of order (next is '",
        current_ < tensors_.size() ? tensors_[current_].name : "<none>", "')"));
  }
  if (bytes.size() != tensors_[current_].n_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": tensor '", std::string(name), "' given ", bytes.size(),
        " bytes, its shape needs ", tensors_[current_].n_bytes));
  }
  return AppendTensorData(bytes);
}

absl::Status GgufWriter::AppendTensorData(absl::Span<const uint8_t> bytes) {
  if (finished_) return absl::FailedPreconditionError(path_ + ": already finished");
  if (!header_written_) RETURN_IF_ERROR(WriteHeader());
  while (!bytes.empty()) {
    if (current_ >= tensors_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": ", bytes.size(), " bytes beyond the last tensor"));
    }
    const PendingTensor& t = tensors_[current_];
    const uint64_t take = std::min<uint64_t>(bytes.size(), t.n_bytes - current_done_);
    RETURN_IF_ERROR(WriteBytes(bytes.data(), take));
    bytes.remove_prefix(take);
    current_done_ += take;
    if (current_done_ == t.n_bytes) {
      RETURN_IF_ERROR(PadTo(alignment_));
      ++current_;
      current_done_ = 0;
    }
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::Finish() {
  if (finished_) return absl::FailedPreconditionError(path_ + ": already finished");
  if (!header_written_) RETURN_IF_ERROR(WriteHeader());
  if (current_ != tensors_.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, ": Finish with tensor '", tensors_[current_].name, "' (",
        current_ + 1, " of ", tensors_.size(), ") not fully written"));
  }
  finished_ = true;
  std::FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path_, ": close failed"));
  }
  return absl::OkStatus();
}

uint64_t GgufWriter::TensorBytes(std::string_view name) const {
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) return t.n_bytes;
  }
  return 0;
}

}  // namespace sluice
