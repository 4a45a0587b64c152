#include "config/device_flag.h"

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "config/flag_alias.h"

ABSL_FLAG(std::string, backend, "cpu",
          "Backend: cpu or cuda (sluiced: of its workers; the tools: of their engine).");
ABSL_FLAG(std::string, device, "0",
          "CUDA device ordinal (sluiced: of its CUDA workers; the tools: of their engine), "
          "with --backend=cuda.");

namespace sluice::config {

std::string DeviceFlagText() { return absl::GetFlag(FLAGS_device); }

bool DeviceFlagGiven() { return FlagGiven(absl::GetFlagReflectionHandle(FLAGS_device)); }

absl::StatusOr<int> ParseDeviceOrdinal(absl::string_view text) {
  int ordinal = -1;
  if (!absl::SimpleAtoi(text, &ordinal) || ordinal < 0 || ordinal > kMaxDevice) {
    return absl::InvalidArgumentError(absl::StrCat("--device='", text.substr(0, 64),
                                                   "': expected a CUDA device ordinal in 0..",
                                                   kMaxDevice));
  }
  return ordinal;
}

absl::Status UnknownBackendError(absl::string_view flag, absl::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "='", text.substr(0, 64), "': expected cpu or cuda"));
}

}  // namespace sluice::config
