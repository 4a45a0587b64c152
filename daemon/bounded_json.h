// A JSON parse whose memory is bounded by the caller, for request bodies
// that come from untrusted clients.
//
// Why: nlohmann's DOM costs ~16-100 bytes per value, so a 60 MB body holding
// an array of zeros (2 bytes per value) in a field nobody reads took more
// than 1 GB to parse. This parse keeps only the top-level members that
// `keep_member` accepts (others are parsed and dropped without building
// anything), and fails past `max_depth` nesting or `max_values` kept values,
// so what it holds is at most a small multiple of the body.
//
// Thread-safety: a free function.
#ifndef SLUICE_DAEMON_BOUNDED_JSON_H_
#define SLUICE_DAEMON_BOUNDED_JSON_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace sluice::daemon {

struct JsonBounds {
  int max_depth = 32;
  size_t max_values = size_t{1} << 18;  // kept values, containers included
};

// InvalidArgument "the request body is not JSON: ..." for malformed JSON or a
// number that overflows a double; "... nests deeper than N" / "... holds more
// than N values" past the bounds. A top-level value other than an object is
// kept whole (within the bounds).
// Members keep the body's order (a JSON Schema's properties are generated
// in the order written).
absl::StatusOr<nlohmann::ordered_json> ParseBoundedJson(
    absl::string_view text, const std::function<bool(const std::string&)>& keep_member,
    const JsonBounds& bounds = JsonBounds());

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_BOUNDED_JSON_H_
