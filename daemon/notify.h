// systemd service notification (sd_notify), degrading to no-ops when the
// daemon does not run under systemd (NOTIFY_SOCKET unset).
//
// Thread-safety: all functions may be called from any thread.
#ifndef SLUICE_DAEMON_NOTIFY_H_
#define SLUICE_DAEMON_NOTIFY_H_

#include <string>

#include "absl/time/time.h"

namespace sluice::daemon {

void NotifyReady(const std::string& status);
void NotifyStatus(const std::string& status);
void NotifyStopping();
void NotifyWatchdog();
// The interval at which WATCHDOG=1 must be sent (systemd WatchdogSec),
// or ZeroDuration when the watchdog is off.
absl::Duration WatchdogInterval();

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_NOTIFY_H_
