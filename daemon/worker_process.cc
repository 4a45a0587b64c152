#include "daemon/worker_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string_view>

#include "absl/strings/str_cat.h"
#include "daemon/forker.h"
#include "wire/channel.h"

namespace sluice::daemon {
namespace {

constexpr int kChildSocketFd = 3;

// Async-signal-safe pieces for the child between fork and exec.
void WriteSmall(const char* path, const char* text, size_t n) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t ignored = write(fd, text, n);
  (void)ignored;
  close(fd);
}

bool WritePidTo(const char* path) {
  char digits[24];
  int n = 0;
  for (long v = getpid(); v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  char text[24];
  for (int i = 0; i < n; ++i) text[i] = digits[n - 1 - i];
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text, n) == n;
  close(fd);
  return ok;
}

[[noreturn]] void ExecChild(pid_t parent, int socket_fd, const char* procs_file,
                            char* const argv[], char* const envp[]) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(125);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  WriteSmall("/proc/self/oom_score_adj", "1000", 4);
  if (procs_file != nullptr && !WritePidTo(procs_file)) _exit(126);
  if (socket_fd == kChildSocketFd) {
    fcntl(socket_fd, F_SETFD, 0);
  } else if (dup2(socket_fd, kChildSocketFd) < 0) {
    _exit(125);
  }
  if (syscall(SYS_close_range, kChildSocketFd + 1, ~0u, 0) != 0) {
    for (int fd = kChildSocketFd + 1; fd < 4096; ++fd) close(fd);
  }
  execve(argv[0], argv, envp);
  _exit(127);
}

// The variables a worker may need from the daemon's environment; nothing
// else crosses over (no secrets, no test switches, no LD_PRELOAD).
// LD_LIBRARY_PATH is the operator's: where sluiced itself finds its shared
// libraries (a relocated install, the CUDA runtime), so does its worker.
constexpr const char* kPassedThrough[] = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                                          "LD_LIBRARY_PATH", "TZ", "LANG", "LC_ALL"};
// And the CUDA backend's kernel switches (SLUICE_CUDA_Q8=0, ...; listed in
// docs/CUDA_KERNELS.md): they choose among kernels of the same results or
// measured variants, and a worker is where they act.
constexpr std::string_view kPassedPrefix = "SLUICE_CUDA_";

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : "unknown signal";
}

}  // namespace

std::vector<std::string> WorkerEnvironment() {
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  for (const char* name : kPassedThrough) {
    if (const char* value = getenv(name)) env.push_back(absl::StrCat(name, "=", value));
  }
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view var(*e);
    if (var.substr(0, kPassedPrefix.size()) == kPassedPrefix &&
        var.find('=') != std::string_view::npos) {
      env.emplace_back(var);
    }
  }
  return env;
}

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Spawn(
    const WorkerSpawnOptions& options, const worker::v1::Hello& hello,
    const std::vector<int>& shard_fds, MessageHandler on_message,
    ExitHandler on_exit) {
  std::unique_ptr<WorkerProcess> w(new WorkerProcess());
  w->oom_ = options.oom;
  w->on_message_ = std::move(on_message);
  w->on_exit_ = std::move(on_exit);
  auto cgroup = options.oom->PrepareWorker(options.serial);
  if (!cgroup.ok()) return cgroup.status();
  w->cgroup_ = *cgroup;

  std::vector<std::string> args = {options.binary,
                                   absl::StrCat("--socket_fd=", kChildSocketFd)};
  args.insert(args.end(), options.args.begin(), options.args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = WorkerEnvironment();
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    options.oom->Remove(w->cgroup_);
    return absl::InternalError(absl::StrCat("socketpair: ", strerror(errno)));
  }
  const char* procs =
      w->cgroup_.procs_file.empty() ? nullptr : w->cgroup_.procs_file.c_str();
  const pid_t parent = getpid();
  // Not fork(): see daemon/forker.h for why the forking thread matters.
  const pid_t pid =
      ForkOnLongLivedThread([&] { ExecChild(parent, sv[1], procs, argv.data(), envp.data()); });
  if (pid < 0) {
    const int err = -pid;
    close(sv[0]);
    close(sv[1]);
    options.oom->Remove(w->cgroup_);
    return absl::InternalError(absl::StrCat("fork: ", strerror(err)));
  }
  close(sv[1]);
  w->pid_ = pid;
  w->socket_fd_ = sv[0];
  w->pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));

  w->writer_ = std::make_unique<wire::FrameWriter>(w->socket_fd_);
  worker::v1::SupervisorMessage msg;
  *msg.mutable_hello() = hello;
  // A worker that dies before reading the Hello is reported by the monitor.
  (void)w->writer_->Send(msg, shard_fds);
  WorkerProcess* raw = w.get();
  w->monitor_ = std::thread([raw] { raw->Monitor(); });
  return w;
}

void WorkerProcess::Monitor() {
  pthread_setname_np(pthread_self(), "worker-monitor");
  bool socket_open = true;
  while (true) {
    pollfd pfds[2];
    int n = 0;
    if (socket_open) pfds[n++] = {socket_fd_, POLLIN, 0};
    if (pidfd_ >= 0) pfds[n++] = {pidfd_, POLLIN, 0};
    if (n == 0) break;  // socket closed and no pidfd: waitpid blocks below
    if (poll(pfds, n, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    const bool child_gone = pidfd_ >= 0 && (pfds[n - 1].revents & POLLIN);
    if (socket_open && pfds[0].revents != 0) {
      worker::v1::WorkerMessage wm;
      absl::StatusOr<bool> got = wire::ReceiveFrame(socket_fd_, &wm, nullptr);
      if (got.ok() && *got) {
        on_message_(std::move(wm));
        continue;
      }
      socket_open = false;
      // A malformed frame means a broken worker, not a dying one: it is not
      // trusted to exit by itself.
      if (!got.ok() && got.status().code() == absl::StatusCode::kInvalidArgument) {
        protocol_error_ = std::string(got.status().message());
        SendKill();
      }
    }
    if (child_gone && !socket_open) break;
    if (child_gone) continue;  // keep draining until the socket reports EOF
  }
  WorkerExit exit = Reap();
  {
    absl::MutexLock lock(&exit_mu_);
    exited_ = true;
  }
  on_exit_(exit);
}

WorkerExit WorkerProcess::Reap() {
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  WorkerExit exit;
  if (WIFSIGNALED(status)) {
    exit.reason = WorkerExit::Reason::kSignal;
    exit.code = WTERMSIG(status);
    exit.description = absl::StrCat("killed by signal ", exit.code, " (",
                                    SignalName(exit.code), ")");
  } else {
    exit.code = WEXITSTATUS(status);
    exit.description = absl::StrCat("exited with code ", exit.code);
    if (exit.code == 127) absl::StrAppend(&exit.description, " (could not exec the worker binary)");
    if (exit.code == 126) absl::StrAppend(&exit.description, " (could not join its cgroup)");
  }
  {
    absl::MutexLock lock(&exit_mu_);
    if (!hung_.empty()) {
      exit.reason = WorkerExit::Reason::kHung;
      exit.description = absl::StrCat("was hung (", hung_, ") and was killed; ",
                                      exit.description);
    }
  }
  if (!protocol_error_.empty()) {
    exit.reason = WorkerExit::Reason::kProtocolError;
    exit.description = absl::StrCat("broke the protocol (", protocol_error_,
                                    ") and was killed; ", exit.description);
  }
  if (oom_->OomKilled(cgroup_)) {
    exit.reason = WorkerExit::Reason::kOomKill;
    exit.description = absl::StrCat(
        "killed by the kernel OOM killer (", OomModeName(oom_->mode()),
        " memory limit of its cgroup; ", exit.description, ")");
  }
  oom_->Remove(cgroup_);
  return exit;
}

absl::Status WorkerProcess::Send(const worker::v1::SupervisorMessage& msg) {
  if (writer_ == nullptr) return absl::UnavailableError("the worker has stopped");
  return writer_->Send(msg);
}

size_t WorkerProcess::PendingBytes() {
  return writer_ == nullptr ? 0 : writer_->PendingBytes();
}

void WorkerProcess::Kill() {
  absl::MutexLock lock(&exit_mu_);
  if (!exited_) SendKill();
}

void WorkerProcess::KillHung(const std::string& why) {
  absl::MutexLock lock(&exit_mu_);
  if (exited_ || !hung_.empty()) return;
  hung_ = why;
  SendKill();
}

void WorkerProcess::SendKill() {
  // Through the pidfd the signal cannot reach a recycled pid.
  if (pidfd_ < 0 || syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0) != 0) {
    kill(pid_, SIGKILL);
  }
}

void WorkerProcess::Stop(absl::Duration grace) {
  if (monitor_.joinable()) {
    worker::v1::SupervisorMessage msg;
    msg.mutable_shutdown();
    (void)Send(msg);
    auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(exit_mu_) { return exited_; };
    {
      absl::MutexLock lock(&exit_mu_);
      exit_mu_.AwaitWithTimeout(absl::Condition(&done), grace);
    }
    Kill();
    monitor_.join();
  }
  if (writer_ != nullptr) writer_->Close();
  if (socket_fd_ >= 0) close(socket_fd_);
  if (pidfd_ >= 0) close(pidfd_);
  socket_fd_ = pidfd_ = -1;
}

WorkerProcess::~WorkerProcess() { Stop(absl::ZeroDuration()); }

absl::StatusOr<std::unique_ptr<WorkerConnection>> ProcessLauncher::Launch(
    uint64_t serial, const worker::v1::Hello& hello, const std::vector<int>& shard_fds,
    WorkerConnection::MessageHandler on_message, WorkerConnection::ExitHandler on_exit) {
  WorkerSpawnOptions spawn{binary_, args_, oom_, serial};
  auto worker =
      WorkerProcess::Spawn(spawn, hello, shard_fds, std::move(on_message), std::move(on_exit));
  if (!worker.ok()) return worker.status();
  return std::unique_ptr<WorkerConnection>(std::move(*worker));
}

}  // namespace sluice::daemon
