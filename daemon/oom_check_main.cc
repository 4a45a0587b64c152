// sluiced-oom-check: shows which out-of-memory containment sluiced would use
// on this host and proves it works: a child process joins a fresh worker
// cgroup with a small memory limit, allocates until the kernel kills it, and
// the kill must be recognised as an OOM kill. Run it as the user sluiced runs
// as (under systemd: systemd-run -p Delegate=yes --wait --pty sluiced-oom-check).
//
// Exit status: 0 when the kill was recognised, 1 when containment is
// unavailable or the kill was not recognised, 2 for bad usage.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "daemon/cgroup.h"

namespace {

[[noreturn]] void Hog(const std::string& procs_file) {
  const int fd = open(procs_file.c_str(), O_WRONLY | O_CLOEXEC);
  const std::string pid = std::to_string(getpid());
  if (fd < 0 || write(fd, pid.data(), pid.size()) != static_cast<ssize_t>(pid.size())) {
    _exit(126);
  }
  close(fd);
  FILE* adj = fopen("/proc/self/oom_score_adj", "we");
  if (adj != nullptr) {
    fputs("1000", adj);
    fclose(adj);
  }
  while (true) {
    char* p = static_cast<char*>(malloc(8u << 20));
    if (p != nullptr) memset(p, 1, 8u << 20);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "auto", path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--cgroup_mode=", 0) == 0) {
      mode = a.substr(14);
    } else if (a.rfind("--cgroup_path=", 0) == 0) {
      path = a.substr(14);
    } else {
      fprintf(stderr, "usage: %s [--cgroup_mode=auto|v2|v1] [--cgroup_path=DIR]\n", argv[0]);
      return 2;
    }
  }
  constexpr uint64_t kLimit = 64u << 20;
  auto oom = sluice::daemon::OomContainment::Create(mode, path, kLimit);
  if (!oom.ok()) {
    printf("containment: unavailable: %s\n", std::string(oom.status().message()).c_str());
    return 1;
  }
  printf("containment: %s\n", (*oom)->description().c_str());
  if ((*oom)->mode() == sluice::daemon::OomMode::kNone) return 1;
  auto cg = (*oom)->PrepareWorker(1);
  if (!cg.ok()) {
    printf("cannot create a worker cgroup: %s\n", std::string(cg.status().message()).c_str());
    return 1;
  }
  const pid_t child = fork();
  if (child == 0) Hog(cg->procs_file);
  int status = 0;
  waitpid(child, &status, 0);
  const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  const bool oom_killed = (*oom)->OomKilled(*cg);
  (*oom)->Remove(*cg);
  printf("child %d: %s; cgroup oom_kill counter %s\n", child,
         killed ? "killed by SIGKILL" : "not killed by SIGKILL", oom_killed ? "> 0" : "0");
  printf("%s\n", killed && oom_killed ? "OK: the OOM kill was contained and recognised"
                                       : "FAILED: the OOM kill was not recognised");
  return killed && oom_killed ? 0 : 1;
}
