#include "memory/routing_trace.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::memory {
namespace {

uint32_t LoadU32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

void StoreU32(uint32_t v, std::string& out) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void StoreU32(uint32_t v, std::vector<uint8_t>& out) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t RecordBytes(const RoutingTraceHeader& h) {
  return 4ull * (2 + h.k);
}

// What is wrong with one record, or "" when it fits the header. A repeated
// expert is found by a quadratic scan: k is at most a few dozen.
std::string RecordProblem(const RoutingTraceHeader& h, uint32_t layer,
                          absl::Span<const int32_t> experts) {
  if (experts.size() != h.k) {
    return absl::StrCat(experts.size(), " experts, the header says k = ", h.k);
  }
  if (layer >= h.n_layer) {
    return absl::StrCat("layer ", layer, " >= n_layer ", h.n_layer);
  }
  for (size_t i = 0; i < experts.size(); ++i) {
    if (experts[i] < 0 || static_cast<uint32_t>(experts[i]) >= h.n_expert) {
      return absl::StrCat("layer ", layer, " expert ", experts[i],
                          " out of range [0, ", h.n_expert, ")");
    }
    for (size_t j = 0; j < i; ++j) {
      if (experts[j] == experts[i]) {
        return absl::StrCat("layer ", layer, " expert ", experts[i],
                            " repeated in one record");
      }
    }
  }
  return "";
}

std::string HeaderProblem(const RoutingTraceHeader& h) {
  if (h.n_layer < 1 || h.n_expert < 1 || h.k < 1 || h.k > h.n_expert) {
    return absl::StrCat("bad routing trace header: n_layer ", h.n_layer,
                        ", n_expert ", h.n_expert, ", k ", h.k,
                        " (need n_layer >= 1, 1 <= k <= n_expert)");
  }
  return "";
}

std::string HeaderBytes(const RoutingTraceHeader& h) {
  std::string out(kRoutingTraceMagic, 4);
  StoreU32(kRoutingTraceVersion, out);
  StoreU32(h.n_layer, out);
  StoreU32(h.n_expert, out);
  StoreU32(h.k, out);
  return out;
}

}  // namespace

void RoutingTrace::Add(uint32_t token_index, uint32_t layer_id,
                       absl::Span<const int32_t> ids) {
  token.push_back(token_index);
  layer.push_back(layer_id);
  experts.insert(experts.end(), ids.begin(), ids.end());
}

absl::Status ValidateRoutingTraceHeader(const RoutingTraceHeader& h,
                                        std::string_view name) {
  if (std::string why = HeaderProblem(h); !why.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(name), ": ", why));
  }
  return absl::OkStatus();
}

absl::StatusOr<RoutingTrace> ParseRoutingTrace(std::string_view bytes,
                                               std::string_view name) {
  const std::string n(name);
  if (bytes.size() < kRoutingTraceHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        n, ": ", bytes.size(), " bytes, shorter than the ",
        kRoutingTraceHeaderBytes, "-byte routing trace header"));
  }
  if (std::memcmp(bytes.data(), kRoutingTraceMagic, 4) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(n, ": byte offset 0: not a routing trace (magic is not "
                        "\"SLRT\")"));
  }
  const uint32_t version = LoadU32(bytes.data() + 4);
  if (version != kRoutingTraceVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(n, ": byte offset 4: routing trace version ", version,
                     ", this build reads ", kRoutingTraceVersion));
  }
  RoutingTrace t;
  t.header = {LoadU32(bytes.data() + 8), LoadU32(bytes.data() + 12),
              LoadU32(bytes.data() + 16)};
  if (std::string why = HeaderProblem(t.header); !why.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(n, ": byte offset 8: ", why));
  }
  const uint64_t rec = RecordBytes(t.header);
  const uint64_t body = bytes.size() - kRoutingTraceHeaderBytes;
  if (body % rec != 0) {
    const uint64_t last = kRoutingTraceHeaderBytes + body / rec * rec;
    return absl::InvalidArgumentError(absl::StrCat(
        n, ": byte offset ", last, ": truncated record (", body % rec,
        " of ", rec, " bytes)"));
  }
  const uint64_t count = body / rec;
  t.token.reserve(count);
  t.layer.reserve(count);
  t.experts.reserve(count * t.header.k);
  std::vector<int32_t> ids(t.header.k);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t off = kRoutingTraceHeaderBytes + i * rec;
    const char* p = bytes.data() + off;
    const uint32_t layer = LoadU32(p + 4);
    for (uint32_t j = 0; j < t.header.k; ++j) {
      ids[j] = static_cast<int32_t>(LoadU32(p + 8 + 4 * j));
    }
    if (std::string why = RecordProblem(t.header, layer, ids); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          n, ": byte offset ", off, " (record ", i, "): ", why));
    }
    t.Add(LoadU32(p), layer, ids);
  }
  return t;
}

absl::StatusOr<RoutingTrace> ReadRoutingTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        path, ": cannot open routing trace: ", std::strerror(errno)));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat(path, ": read error"));
  }
  return ParseRoutingTrace(bytes.str(), path);
}

absl::StatusOr<std::string> SerializeRoutingTrace(const RoutingTrace& trace) {
  const RoutingTraceHeader& h = trace.header;
  if (absl::Status s = ValidateRoutingTraceHeader(h, "routing trace");
      !s.ok()) {
    return s;
  }
  if (trace.token.size() != trace.size() ||
      trace.experts.size() != trace.size() * h.k) {
    return absl::InvalidArgumentError(
        "routing trace: token, layer and experts sizes disagree");
  }
  std::string out = HeaderBytes(h);
  out.reserve(kRoutingTraceHeaderBytes + trace.size() * RecordBytes(h));
  for (size_t i = 0; i < trace.size(); ++i) {
    if (std::string why = RecordProblem(h, trace.layer[i], trace.Experts(i));
        !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("routing trace: record ", i, ": ", why));
    }
    StoreU32(trace.token[i], out);
    StoreU32(trace.layer[i], out);
    for (int32_t e : trace.Experts(i)) StoreU32(static_cast<uint32_t>(e), out);
  }
  return out;
}

absl::Status WriteRoutingTrace(const std::string& path,
                               const RoutingTrace& trace) {
  absl::StatusOr<std::string> bytes = SerializeRoutingTrace(trace);
  if (!bytes.ok()) return bytes.status();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  out.close();
  if (!out) {
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot write routing trace"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RoutingTraceWriter>> RoutingTraceWriter::Create(
    const std::string& path, RoutingTraceHeader header) {
  if (absl::Status s = ValidateRoutingTraceHeader(header, path); !s.ok()) {
    return s;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        path, ": cannot create routing trace: ", std::strerror(errno)));
  }
  const std::string head = HeaderBytes(header);
  if (std::fwrite(head.data(), 1, head.size(), f) != head.size()) {
    std::fclose(f);
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot write routing trace header"));
  }
  return std::unique_ptr<RoutingTraceWriter>(
      new RoutingTraceWriter(path, header, f));
}

RoutingTraceWriter::~RoutingTraceWriter() {
  if (file_ != nullptr) (void)Close();
}

absl::Status RoutingTraceWriter::Append(uint32_t token, uint32_t layer,
                                        absl::Span<const int32_t> experts) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": routing trace already closed"));
  }
  if (std::string why = RecordProblem(header_, layer, experts); !why.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": record ", records_, ": ", why));
  }
  buffer_.clear();
  StoreU32(token, buffer_);
  StoreU32(layer, buffer_);
  for (int32_t e : experts) StoreU32(static_cast<uint32_t>(e), buffer_);
  // stdio buffers the small writes.
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) !=
      buffer_.size()) {
    return absl::UnavailableError(absl::StrCat(
        path_, ": write failed at record ", records_, ": ",
        std::strerror(errno)));
  }
  ++records_;
  return absl::OkStatus();
}

absl::Status RoutingTraceWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  const bool error = std::ferror(file_) != 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (error || !closed) {
    return absl::UnavailableError(
        absl::StrCat(path_, ": error writing routing trace"));
  }
  return absl::OkStatus();
}

}  // namespace sluice::memory
