#include "tools/engine_flags.h"

#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "config/device_flag.h"
#include "config/expert_flags.h"
#include "config/flag_alias.h"

ABSL_FLAG(int, gpu, 0, "deprecated: --device");

namespace sluice::tools {

absl::StatusOr<EngineFlags> EngineFlagsFromFlags(const LogLine& log) {
  EngineFlags f;
  std::string backend = absl::GetFlag(FLAGS_backend);
  std::string device = config::DeviceFlagText();
  const bool backend_given =
      config::FlagGiven(absl::GetFlagReflectionHandle(FLAGS_backend));
  if (device == "cpu" || device == "cuda") {
    if (backend_given && backend != device) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--backend=", backend, " and --device=", device,
          ": --device names the CUDA device ordinal; give the backend once, as --backend"));
    }
    if (log) {
      log(absl::StrCat("--device=", device, " as a backend is deprecated; use --backend=", device,
                       " (--device is the CUDA device ordinal, as in sluiced)"));
    }
    backend = device;
    device = "0";
  } else {
    ASSIGN_OR_RETURN(f.device, config::ParseDeviceOrdinal(device));
  }
  if (config::FlagGiven(absl::GetFlagReflectionHandle(FLAGS_gpu))) {
    const int gpu = absl::GetFlag(FLAGS_gpu);
    if (device != "0" && f.device != gpu) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--device=", f.device, " and --gpu=", gpu,
          ": --gpu is the old name of --device; give one of them"));
    }
    if (log) log(config::DeprecationLine("gpu", "device"));
    ASSIGN_OR_RETURN(f.device, config::ParseDeviceOrdinal(absl::StrCat(gpu)));
  }
  const std::optional<Backend> parsed = ParseBackend(backend);
  if (!parsed.has_value()) {
    return config::UnknownBackendError("backend", backend);
  }
  f.backend = *parsed;
  ASSIGN_OR_RETURN(f.experts, config::ExpertConfigFromFlags());
  if (!f.experts.profile.empty()) {
    return absl::InvalidArgumentError(
        "--expert_profile is sluiced's (its worker counts, saves and warms from the profile); "
        "the tools do not use it");
  }
  return f;
}

}  // namespace sluice::tools
