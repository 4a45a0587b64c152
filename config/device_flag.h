// --backend (cpu or cuda) and --device (the CUDA device ordinal), defined
// once for sluiced (its workers' backend and device) and the tools (their
// engine's), so that each name means one thing everywhere. sluiced's old
// --worker_kind and the tools' --device cpu|cuda and --gpu N are their own
// deprecated aliases (config/flag_alias.h).
#ifndef SLUICE_CONFIG_DEVICE_FLAG_H_
#define SLUICE_CONFIG_DEVICE_FLAG_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"

// Declared for ResolveRenamedFlag, which needs the flag itself to resolve a
// binary's old name for it.
ABSL_DECLARE_FLAG(std::string, backend);

namespace sluice::config {

// The largest ordinal --device takes (no machine has more devices).
inline constexpr int kMaxDevice = 255;

// --device as given (default "0").
std::string DeviceFlagText();
// Whether --device was given (config/flag_alias.h's FlagGiven).
bool DeviceFlagGiven();

// An ordinal 0..kMaxDevice; InvalidArgument "--device='TEXT': expected a
// CUDA device ordinal in 0..255" otherwise.
absl::StatusOr<int> ParseDeviceOrdinal(absl::string_view text);

// What a backend name that is neither "cpu" nor "cuda" gets, from any flag
// that takes one: InvalidArgument "--FLAG='TEXT': expected cpu or cuda".
absl::Status UnknownBackendError(absl::string_view flag, absl::string_view text);

}  // namespace sluice::config

#endif  // SLUICE_CONFIG_DEVICE_FLAG_H_
