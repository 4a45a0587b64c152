// One worker process as seen from the supervisor: spawn (fork + exec with a
// Unix socketpair), the Hello hand-off (shard fds as SCM_RIGHTS), message
// traffic, and death detection. The real WorkerConnection
// (daemon/worker_connection.h); ProcessLauncher starts them.
//
// Death is noticed at once: a monitor thread polls the socket and a pidfd
// (pidfd_open) of the child; when the child exits it drains what the worker
// still wrote, reaps it (waitpid), classifies the exit (exit code, signal,
// kernel OOM kill from the worker's cgroup) and calls the exit handler once.
//
// The child runs with oom_score_adj 1000, in its own cgroup where the
// OomContainment has one, dies with the supervisor (PR_SET_PDEATHSIG, armed
// on a thread that lives as long as the process: daemon/forker.h) and
// inherits no fd but the socket (as fd 3) and no environment but
// WorkerEnvironment().
//
// Messages to the worker leave through a FrameWriter: Send() only queues, so
// it may be called under any lock without risk of blocking on the socket.
//
// Thread-safety: Send() and Kill() may be called from any thread. Handlers run
// on the monitor thread; they must not call Stop() or destroy the object.
// Stop() and the destructor join the monitor thread, so they must not be
// called while holding a lock that a handler takes.
#ifndef SLUICE_DAEMON_WORKER_PROCESS_H_
#define SLUICE_DAEMON_WORKER_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/cgroup.h"
#include "daemon/worker_connection.h"
#include "proto/sluice/worker/v1/worker.pb.h"
#include "wire/frame_writer.h"

namespace sluice::daemon {

// The worker's whole environment: a fixed PATH, a few pass-through
// variables (CUDA device selection, library path, time zone, locale) when
// set, and every SLUICE_CUDA_* kernel switch.
std::vector<std::string> WorkerEnvironment();

struct WorkerSpawnOptions {
  std::string binary;
  std::vector<std::string> args;          // after argv[0] and --socket_fd=3
  const OomContainment* oom = nullptr;    // required
  uint64_t serial = 0;                    // names the worker's cgroup
};

class WorkerProcess : public WorkerConnection {
 public:

  // Forks and execs the worker, sends `hello` with `shard_fds` (which stay
  // owned by the caller) and starts the monitor thread. Errors: Internal for
  // a failed fork/socketpair, FailedPrecondition for a cgroup that cannot be
  // set up. An exec failure shows up as an exit with code 127.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Spawn(
      const WorkerSpawnOptions& options, const worker::v1::Hello& hello,
      const std::vector<int>& shard_fds, MessageHandler on_message,
      ExitHandler on_exit);

  ~WorkerProcess() override;  // Stop(absl::ZeroDuration())
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const override { return pid_; }
  // Queues `msg`; never blocks on the socket. Unavailable once the worker is
  // gone.
  absl::Status Send(const worker::v1::SupervisorMessage& msg) override;
  // Bytes queued for the worker and not yet written.
  size_t PendingBytes();
  void Kill() override;
  // SIGKILLs a worker judged hung; its exit is reported with Reason::kHung
  // and `why` in the description.
  void KillHung(const std::string& why) override;
  // Sends Shutdown, waits up to `grace` for the exit, then SIGKILLs, and
  // joins the monitor thread (the exit handler has run when this returns).
  void Stop(absl::Duration grace) override;

 private:
  WorkerProcess() = default;
  void Monitor();
  WorkerExit Reap();
  void SendKill();

  pid_t pid_ = -1;
  int socket_fd_ = -1;
  int pidfd_ = -1;
  const OomContainment* oom_ = nullptr;
  WorkerCgroup cgroup_;
  MessageHandler on_message_;
  ExitHandler on_exit_;
  std::unique_ptr<wire::FrameWriter> writer_;
  absl::Mutex exit_mu_;
  bool exited_ ABSL_GUARDED_BY(exit_mu_) = false;
  std::string hung_ ABSL_GUARDED_BY(exit_mu_);
  std::string protocol_error_;  // monitor thread only
  std::thread monitor_;
};

// Starts WorkerProcesses of one binary with the same arguments.
class ProcessLauncher : public WorkerLauncher {
 public:
  // `oom` is required and outlives the launcher.
  ProcessLauncher(std::string binary, std::vector<std::string> args, const OomContainment* oom)
      : binary_(std::move(binary)), args_(std::move(args)), oom_(oom) {}

  absl::StatusOr<std::unique_ptr<WorkerConnection>> Launch(
      uint64_t serial, const worker::v1::Hello& hello, const std::vector<int>& shard_fds,
      WorkerConnection::MessageHandler on_message,
      WorkerConnection::ExitHandler on_exit) override;

 private:
  const std::string binary_;
  const std::vector<std::string> args_;
  const OomContainment* const oom_;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_WORKER_PROCESS_H_
