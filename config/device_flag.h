// --device, the CUDA device ordinal, defined once for sluiced (the device of
// its CUDA workers) and the tools (the device of their CUDA backend), so the
// name means one thing everywhere. The backend itself is sluiced's
// --worker_kind and the tools' --backend.
#ifndef SLUICE_CONFIG_DEVICE_FLAG_H_
#define SLUICE_CONFIG_DEVICE_FLAG_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

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

}  // namespace sluice::config

#endif  // SLUICE_CONFIG_DEVICE_FLAG_H_
