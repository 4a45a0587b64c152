#include "daemon/restart_policy.h"

#include <algorithm>

namespace sluice::daemon {

absl::Duration RestartBackoff(int consecutive_failures, absl::Duration initial,
                              absl::Duration max) {
  absl::Duration backoff = initial;
  for (int i = 1; i < consecutive_failures && backoff < max; ++i) backoff *= 2;
  return std::min(backoff, max);
}

}  // namespace sluice::daemon
