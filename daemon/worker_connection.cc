#include "daemon/worker_connection.h"

namespace sluice::daemon {

absl::string_view ExitReasonLabel(WorkerExit::Reason reason) {
  switch (reason) {
    case WorkerExit::Reason::kExit: return "exit";
    case WorkerExit::Reason::kSignal: return "signal";
    case WorkerExit::Reason::kOomKill: return "oom_kill";
    case WorkerExit::Reason::kProtocolError: return "protocol_error";
    case WorkerExit::Reason::kHung: return "hung";
  }
  return "exit";
}

}  // namespace sluice::daemon
