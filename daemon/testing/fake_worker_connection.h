// A WorkerLauncher whose workers are played by the test, for supervisor
// tests in-process (no fork, no socket, no sleeps).
//
// Each launch makes a FakeWorker, the test's side of that worker: what the
// supervisor sent it, whether it was killed, and the worker's messages and
// exit, which the test delivers on its own thread (never from inside a
// call of the supervisor's, as WorkerConnection's contract requires). The
// FakeWorker outlives the connection the supervisor owns, so a test may look
// at a worker the supervisor has already let go.
#ifndef SLUICE_DAEMON_TESTING_FAKE_WORKER_CONNECTION_H_
#define SLUICE_DAEMON_TESTING_FAKE_WORKER_CONNECTION_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/worker_connection.h"
#include "proto/sluice/worker/v1/worker.pb.h"

namespace sluice::daemon::testing {

// How long a Wait* below waits for the supervisor before it reports failure
// (real time: a bound so that a broken supervisor fails the test instead of
// hanging it, not a sleep).
inline constexpr absl::Duration kFakeWaitLimit = absl::Seconds(10);

class FakeWorker {
 public:
  FakeWorker(pid_t pid, uint64_t serial, worker::v1::Hello hello,
             WorkerConnection::MessageHandler on_message, WorkerConnection::ExitHandler on_exit)
      : pid_(pid),
        serial_(serial),
        hello_(std::move(hello)),
        on_message_(std::move(on_message)),
        on_exit_(std::move(on_exit)) {}

  pid_t pid() const { return pid_; }
  uint64_t serial() const { return serial_; }
  const worker::v1::Hello& hello() const { return hello_; }

  // Everything the supervisor sent after the Hello, in order.
  std::vector<worker::v1::SupervisorMessage> Sent();
  // Waits for the first message sent that `match` accepts; NotFound after
  // kFakeWaitLimit.
  absl::StatusOr<worker::v1::SupervisorMessage> WaitForSent(
      const std::function<bool(const worker::v1::SupervisorMessage&)>& match);
  // Waits until the supervisor killed the worker (Kill, KillHung or Stop);
  // returns KillHung's reason, or "" for a plain kill. DeadlineExceeded after
  // kFakeWaitLimit.
  absl::StatusOr<std::string> WaitKilled();

  // The worker sends `msg` (calls the supervisor's handler here and now).
  void Deliver(worker::v1::WorkerMessage msg);
  // The worker says Ready with this vocabulary and context.
  void Ready(int64_t vocab_size = 1000, int64_t context_length = 4096);
  // The worker exits (once; later calls do nothing).
  void Exit(const WorkerExit& exit);
  bool exited();

 private:
  friend class FakeConnection;
  absl::Status Send(const worker::v1::SupervisorMessage& msg);
  void Kill(const std::string& why);

  const pid_t pid_;
  const uint64_t serial_;
  const worker::v1::Hello hello_;
  const WorkerConnection::MessageHandler on_message_;
  const WorkerConnection::ExitHandler on_exit_;
  absl::Mutex mu_;
  std::vector<worker::v1::SupervisorMessage> sent_ ABSL_GUARDED_BY(mu_);
  bool killed_ ABSL_GUARDED_BY(mu_) = false;
  std::string hung_why_ ABSL_GUARDED_BY(mu_);
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
};

class FakeWorkerLauncher : public WorkerLauncher {
 public:
  absl::StatusOr<std::unique_ptr<WorkerConnection>> Launch(
      uint64_t serial, const worker::v1::Hello& hello, const std::vector<int>& shard_fds,
      WorkerConnection::MessageHandler on_message,
      WorkerConnection::ExitHandler on_exit) override;

  // Waits for launch number `index` (0-based) and returns its worker;
  // NotFound after kFakeWaitLimit.
  absl::StatusOr<std::shared_ptr<FakeWorker>> WaitForLaunch(int index);
  int launches();

  // The first fake worker's pid; each launch takes the next.
  static constexpr pid_t kFirstPid = 1000;

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<FakeWorker>> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::daemon::testing

#endif  // SLUICE_DAEMON_TESTING_FAKE_WORKER_CONNECTION_H_
