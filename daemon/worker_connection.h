// What the supervisor needs from one running worker, apart from how the
// worker runs (issue 19's Supervisor shape): send it messages (a request, a
// cancel, a stats query), hear its messages and its exit, kill it, stop it.
// WorkerProcess (daemon/worker_process.h) is the real one, a process on the
// wire/ channel; daemon/testing/fake_worker.h is a fake for tests that run
// the supervisor in-process.
//
// Contract shared by every implementation, which the supervisor relies on:
// - The handlers given to WorkerLauncher::Launch are never called from
//   inside a method of the connection or of the launcher (the supervisor
//   calls those under its lock, and its handlers take that lock).
// - The exit handler runs exactly once, after the last message.
// - Send() never blocks on the worker; it may be called under any lock.
// - Stop() and the destructor return after the exit handler has run (or when
//   it never will), so they are called with no lock a handler takes.
#ifndef SLUICE_DAEMON_WORKER_CONNECTION_H_
#define SLUICE_DAEMON_WORKER_CONNECTION_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/sluice/worker/v1/worker.pb.h"

namespace sluice::daemon {

struct WorkerExit {
  enum class Reason { kExit, kSignal, kOomKill, kProtocolError, kHung };
  Reason reason = Reason::kExit;
  int code = 0;  // exit status, or the signal number
  // "exited with code 3", "killed by signal 9 (SIGKILL)",
  // "killed by the kernel OOM killer (cgroup_v1 memory limit)".
  std::string description;
};

// "exit", "signal", "oom_kill", "protocol_error", "hung": the label of
// sluice_worker_restarts_total.
absl::string_view ExitReasonLabel(WorkerExit::Reason reason);

class WorkerConnection {
 public:
  using MessageHandler = std::function<void(worker::v1::WorkerMessage)>;
  using ExitHandler = std::function<void(const WorkerExit&)>;

  virtual ~WorkerConnection() = default;

  virtual pid_t pid() const = 0;
  // Queues `msg`; Unavailable once the worker is gone.
  virtual absl::Status Send(const worker::v1::SupervisorMessage& msg) = 0;
  // Ends the worker now; its exit is reported through the exit handler.
  virtual void Kill() = 0;
  // Ends a worker judged hung; its exit is reported with Reason::kHung and
  // `why` in the description.
  virtual void KillHung(const std::string& why) = 0;
  // Asks the worker to shut down, waits up to `grace`, then kills it.
  virtual void Stop(absl::Duration grace) = 0;
};

// Starts workers. One per supervisor; Launch is called under the
// supervisor's lock.
class WorkerLauncher {
 public:
  virtual ~WorkerLauncher() = default;

  // Starts a worker on `hello` and the shard fds (owned by the caller, open
  // while the model is loaded). `serial` is unique per launch.
  virtual absl::StatusOr<std::unique_ptr<WorkerConnection>> Launch(
      uint64_t serial, const worker::v1::Hello& hello, const std::vector<int>& shard_fds,
      WorkerConnection::MessageHandler on_message, WorkerConnection::ExitHandler on_exit) = 0;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_WORKER_CONNECTION_H_
