// sluiced's command line: its flag definitions (the expert ones, --backend
// and --device are config/'s, shared with the tools), the config file's
// expansion into arguments, and the values read back. A library apart from
// sluiced_main.cc so that tests can parse sluiced's flags as sluiced does.
#ifndef SLUICE_DAEMON_SLUICED_FLAGS_H_
#define SLUICE_DAEMON_SLUICED_FLAGS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/config.h"
#include "daemon/http_front.h"

namespace sluice::daemon {

// argv with the --config file's entries first (so that command-line flags
// override them) and repeated --model_dir merged into one. Errors are
// ReadConfigFile's.
absl::StatusOr<std::vector<std::string>> ExpandConfig(int argc, char** argv);

// The flags' Config, validated (ValidateConfig). Errors name the flag as it
// was given. A deprecated name (--worker_kind, now --backend) sends `log`
// its deprecation line.
absl::StatusOr<Config> ConfigFromFlags(const std::function<void(const std::string&)>& log);

// --http_max_body_bytes, --http_memory_budget and the HTTP timeouts and
// connection caps. InvalidArgument naming the flag.
absl::StatusOr<HttpLimits> HttpLimitsFromFlags();

// --model_dir, every occurrence.
std::vector<std::string> ModelDirsFromFlags();

// --http_header_timeout_s.
absl::Duration HttpHeaderTimeoutFromFlags();

// --http_request_timeout_s: an HTTP generation's whole time (infinite for
// 0). InvalidArgument naming the flag for a negative value.
absl::StatusOr<absl::Duration> HttpRequestTimeoutFromFlags();

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_SLUICED_FLAGS_H_
