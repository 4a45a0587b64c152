#include "daemon/notify.h"

#include <systemd/sd-daemon.h>

#include "absl/strings/str_cat.h"

namespace sluice::daemon {

// sd_notify returns 0 without NOTIFY_SOCKET and < 0 on a send error; neither
// is a reason to stop serving, so the results are deliberately ignored.
void NotifyReady(const std::string& status) {
  (void)sd_notify(0, absl::StrCat("READY=1\nSTATUS=", status).c_str());
}

void NotifyStatus(const std::string& status) {
  (void)sd_notify(0, absl::StrCat("STATUS=", status).c_str());
}

void NotifyStopping() { (void)sd_notify(0, "STOPPING=1"); }

void NotifyWatchdog() { (void)sd_notify(0, "WATCHDOG=1"); }

absl::Duration WatchdogInterval() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0) return absl::ZeroDuration();
  return absl::Microseconds(static_cast<int64_t>(usec));
}

}  // namespace sluice::daemon
