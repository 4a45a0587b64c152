// Byte counts as operators write them: "123", "64K", "512M", "8G", "1T",
// "1.5G" (powers of 1024; an optional trailing "B" or "iB", any case; a
// fraction is rounded to the nearest byte). Every flag
// and config key that takes a size parses it here, so `64G` means the same
// to sluiced, the worker's Hello and the tools.
#ifndef SLUICE_CONFIG_BYTE_SIZE_H_
#define SLUICE_CONFIG_BYTE_SIZE_H_

#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace sluice::config {

// InvalidArgument "WHAT='VALUE': expected a byte count such as 536870912,
// 512M, 1.5G or 8G" for anything else, for an empty value and for a count that
// overflows 64 bits. `what` is how the caller names the value ("--flag").
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view what, absl::string_view value);

}  // namespace sluice::config

#endif  // SLUICE_CONFIG_BYTE_SIZE_H_
