#include "daemon/testing/fake_worker_connection.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::daemon::testing {

using worker::v1::SupervisorMessage;
using worker::v1::WorkerMessage;

// What the supervisor owns; the FakeWorker it points to is the test's.
class FakeConnection : public WorkerConnection {
 public:
  explicit FakeConnection(std::shared_ptr<FakeWorker> worker) : worker_(std::move(worker)) {}

  pid_t pid() const override { return worker_->pid(); }
  absl::Status Send(const SupervisorMessage& msg) override { return worker_->Send(msg); }
  void Kill() override { worker_->Kill(""); }
  void KillHung(const std::string& why) override { worker_->Kill(why); }
  // A real worker exits on Shutdown: this one does so at once, and the exit
  // handler has run when Stop returns, as the contract asks.
  void Stop(absl::Duration) override {
    SupervisorMessage shutdown;
    shutdown.mutable_shutdown();
    (void)worker_->Send(shutdown);
    worker_->Exit({WorkerExit::Reason::kExit, 0, "exited with code 0"});
  }

 private:
  const std::shared_ptr<FakeWorker> worker_;
};

std::vector<SupervisorMessage> FakeWorker::Sent() {
  absl::MutexLock lock(&mu_);
  return sent_;
}

absl::StatusOr<SupervisorMessage> FakeWorker::WaitForSent(
    const std::function<bool(const SupervisorMessage&)>& match) {
  absl::MutexLock lock(&mu_);
  const SupervisorMessage* found = nullptr;
  auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const SupervisorMessage& m : sent_) {
      if (match(m)) {
        found = &m;
        return true;
      }
    }
    return false;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&seen), kFakeWaitLimit)) {
    return absl::NotFoundError(absl::StrCat("worker ", pid_, " was sent no such message; ",
                                            sent_.size(), " were sent"));
  }
  return *found;
}

absl::StatusOr<std::string> FakeWorker::WaitKilled() {
  absl::MutexLock lock(&mu_);
  auto killed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return killed_; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&killed), kFakeWaitLimit)) {
    return absl::DeadlineExceededError(absl::StrCat("worker ", pid_, " was not killed"));
  }
  return hung_why_;
}

void FakeWorker::Deliver(WorkerMessage msg) { on_message_(std::move(msg)); }

void FakeWorker::Ready(int64_t vocab_size, int64_t context_length) {
  WorkerMessage msg;
  msg.mutable_ready()->mutable_model()->set_vocab_size(vocab_size);
  msg.mutable_ready()->mutable_model()->set_context_length(context_length);
  Deliver(std::move(msg));
}

void FakeWorker::Exit(const WorkerExit& exit) {
  {
    absl::MutexLock lock(&mu_);
    if (exited_) return;
    exited_ = true;
  }
  on_exit_(exit);
}

bool FakeWorker::exited() {
  absl::MutexLock lock(&mu_);
  return exited_;
}

absl::Status FakeWorker::Send(const SupervisorMessage& msg) {
  absl::MutexLock lock(&mu_);
  if (exited_) return absl::UnavailableError("the worker has stopped");
  sent_.push_back(msg);
  return absl::OkStatus();
}

void FakeWorker::Kill(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (killed_ || exited_) return;
  killed_ = true;
  hung_why_ = why;
}

absl::StatusOr<std::unique_ptr<WorkerConnection>> FakeWorkerLauncher::Launch(
    uint64_t serial, const worker::v1::Hello& hello, const std::vector<int>&,
    WorkerConnection::MessageHandler on_message, WorkerConnection::ExitHandler on_exit) {
  absl::MutexLock lock(&mu_);
  auto worker = std::make_shared<FakeWorker>(kFirstPid + static_cast<pid_t>(workers_.size()),
                                             serial, hello, std::move(on_message),
                                             std::move(on_exit));
  workers_.push_back(worker);
  return std::unique_ptr<WorkerConnection>(new FakeConnection(std::move(worker)));
}

absl::StatusOr<std::shared_ptr<FakeWorker>> FakeWorkerLauncher::WaitForLaunch(int index) {
  absl::MutexLock lock(&mu_);
  auto launched = [this, index]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(workers_.size()) > index;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&launched), kFakeWaitLimit)) {
    return absl::NotFoundError(
        absl::StrCat("launch ", index, " did not happen; ", workers_.size(), " did"));
  }
  return workers_[index];
}

int FakeWorkerLauncher::launches() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(workers_.size());
}

}  // namespace sluice::daemon::testing
