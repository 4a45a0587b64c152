// The flags of the tools that build an engine (tools/generate, tools/parity)
// with the names sluiced uses for the same things: --backend cpu|cuda and
// --device N (config/device_flag.h), and the expert flags of
// config/expert_flags.h. The old spellings still work, each
// with a deprecation line on stderr: --device cpu|cuda (now --backend) and
// --gpu N (now --device N).
#ifndef SLUICE_TOOLS_ENGINE_FLAGS_H_
#define SLUICE_TOOLS_ENGINE_FLAGS_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "config/expert_config.h"
#include "model/engine.h"

namespace sluice::tools {

using LogLine = std::function<void(const std::string& line)>;

struct EngineFlags {
  Backend backend = Backend::kCpu;
  int device = 0;
  config::ExpertConfig experts;  // as given, before the fit planner
};

// The flags' values. InvalidArgument naming the flag and the value (the
// expert flags' errors are config::ExpertConfigFromFlags's). Deprecated
// spellings go to `log`.
absl::StatusOr<EngineFlags> EngineFlagsFromFlags(const LogLine& log);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_ENGINE_FLAGS_H_
