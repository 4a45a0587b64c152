// Routing traces: which experts each token chose in each MoE layer, as a
// file, so that slot-cache policies can be compared offline on the same
// routing (tools/slotsim) without running the model.
//
// File format (all integers little-endian uint32; docs/SLOT_CACHE.md):
//
//   offset 0   magic     "SLRT" (0x53 0x4c 0x52 0x54)
//          4   version   1
//          8   n_layer   layer ids are [0, n_layer)
//         12   n_expert  expert ids are [0, n_expert)
//         16   k         experts per record (the model's n_expert_used)
//         20   records, each 4 x (2 + k) bytes, to the end of the file:
//                token   the token's index among those this layer has
//                        routed since recording began (0, 1, 2, ...)
//                layer
//                k expert ids, distinct, in the router's order
//
// Records are in the order the model routed them: for a micro-batch of n
// tokens, layer 0's n records, then layer 1's, ...; for decode (one token
// per forward pass) token-major. A file whose size is not 20 + a whole
// number of records is malformed (a recording cut short).
//
// Thread-safety: RoutingTraceWriter is not thread-safe (its user, the
// recorder, serialises calls); RoutingTrace is plain data.
#ifndef SLUICE_MEMORY_ROUTING_TRACE_H_
#define SLUICE_MEMORY_ROUTING_TRACE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sluice::memory {

inline constexpr char kRoutingTraceMagic[4] = {'S', 'L', 'R', 'T'};
inline constexpr uint32_t kRoutingTraceVersion = 1;
inline constexpr uint64_t kRoutingTraceHeaderBytes = 20;

struct RoutingTraceHeader {
  uint32_t n_layer = 0;
  uint32_t n_expert = 0;
  uint32_t k = 0;
};

// A whole trace in memory: record i is token[i], layer[i] and
// experts[i * k, (i + 1) * k).
struct RoutingTrace {
  RoutingTraceHeader header;
  std::vector<uint32_t> token;
  std::vector<uint32_t> layer;
  std::vector<int32_t> experts;

  size_t size() const { return layer.size(); }
  absl::Span<const int32_t> Experts(size_t i) const {
    return absl::MakeConstSpan(experts).subspan(i * header.k, header.k);
  }
  // Appends one record (no validation: ValidateRoutingTrace checks).
  void Add(uint32_t token_index, uint32_t layer_id,
           absl::Span<const int32_t> ids);
};

// InvalidArgument unless 1 <= k <= n_expert and n_layer >= 1; `name` (a
// file name) starts the message.
absl::Status ValidateRoutingTraceHeader(const RoutingTraceHeader& header,
                                        std::string_view name);

// Parses the bytes of a trace file. Errors (InvalidArgument; the message
// starts with `name` and gives the byte offset of the fault): bad magic, an
// unknown version, a bad header, a truncated record, a layer or expert out of
// range, an expert repeated within a record.
absl::StatusOr<RoutingTrace> ParseRoutingTrace(std::string_view bytes,
                                               std::string_view name);

// Reads and parses the file at `path` (NotFound / PermissionDenied-style
// errors name the path).
absl::StatusOr<RoutingTrace> ReadRoutingTrace(const std::string& path);

// The bytes of `trace` in the file format (after the same checks as
// parsing: InvalidArgument naming the record index).
absl::StatusOr<std::string> SerializeRoutingTrace(const RoutingTrace& trace);

// Writes `trace` to `path` in one go (synthetic traces, tests).
absl::Status WriteRoutingTrace(const std::string& path,
                               const RoutingTrace& trace);

// Streams records to a file as they are produced (the recorder).
class RoutingTraceWriter {
 public:
  // Creates (truncates) `path` and writes the header. Errors: a bad header;
  // the file cannot be created (the message names the path and errno).
  static absl::StatusOr<std::unique_ptr<RoutingTraceWriter>> Create(
      const std::string& path, RoutingTraceHeader header);
  ~RoutingTraceWriter();

  // InvalidArgument for a record that does not fit the header (wrong number
  // of experts, layer or expert out of range, a repeated expert); an I/O
  // error names the path.
  absl::Status Append(uint32_t token, uint32_t layer,
                      absl::Span<const int32_t> experts);
  // Flushes and closes; the first I/O error of the file's life, if any.
  absl::Status Close();

  uint64_t records() const { return records_; }
  const RoutingTraceHeader& header() const { return header_; }

 private:
  RoutingTraceWriter(std::string path, RoutingTraceHeader header,
                     std::FILE* file)
      : path_(std::move(path)), header_(header), file_(file) {}

  std::string path_;
  RoutingTraceHeader header_;
  std::FILE* file_;
  uint64_t records_ = 0;
  std::vector<uint8_t> buffer_;
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_ROUTING_TRACE_H_
