#include "daemon/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace sluice::daemon {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteFile(const std::string& path, const std::string& value) {
  FILE* f = fopen(path.c_str(), "we");
  if (f == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, " for writing: ", strerror(errno)));
  }
  const bool ok = fputs(value.c_str(), f) >= 0;
  const bool closed = fclose(f) == 0;
  if (!ok || !closed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot write '", value, "' to ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

// "oom_kill N" from a flat keyed file; 0 when absent.
uint64_t KeyedValue(const std::string& text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> kv = absl::StrSplit(line, ' ');
    uint64_t v = 0;
    if (kv.size() == 2 && kv[0] == key && absl::SimpleAtoi(kv[1], &v)) return v;
  }
  return 0;
}

// The mount point of a hierarchy from /proc/self/mountinfo: the cgroup2
// mount when `v1_controller` is empty, else the v1 mount carrying it.
std::string FindMount(absl::string_view v1_controller) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::vector<std::string> pre = absl::StrSplit(line.substr(0, sep), ' ');
    std::vector<std::string> post = absl::StrSplit(line.substr(sep + 3), ' ');
    if (pre.size() < 5 || post.size() < 3) continue;
    if (v1_controller.empty() && post[0] == "cgroup2") return pre[4];
    if (!v1_controller.empty() && post[0] == "cgroup") {
      for (absl::string_view opt : absl::StrSplit(post[2], ',')) {
        if (opt == v1_controller) return pre[4];
      }
    }
  }
  return "";
}

// This process's path in a hierarchy from /proc/self/cgroup ("0::/x" for v2,
// "N:memory:/x" for the v1 memory controller).
std::string OwnCgroupPath(bool v2) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (v2 && f[0] == "0" && f[1].empty()) return f[2];
    if (!v2) {
      for (absl::string_view c : absl::StrSplit(f[1], ',')) {
        if (c == "memory") return f[2];
      }
    }
  }
  return "";
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::Status ProbeMkdir(const std::string& dir) {
  const std::string probe = absl::StrCat(dir, "/sluice-probe-", getpid());
  if (mkdir(probe.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create a cgroup under ", dir, ": ", strerror(errno)));
  }
  rmdir(probe.c_str());
  return absl::OkStatus();
}

std::string LimitText(uint64_t limit) {
  return limit == 0 ? "no memory limit"
                    : absl::StrCat("memory limit ", limit, " bytes");
}

}  // namespace

absl::string_view OomModeName(OomMode mode) {
  switch (mode) {
    case OomMode::kCgroupV2: return "cgroup_v2";
    case OomMode::kCgroupV1: return "cgroup_v1";
    case OomMode::kNone: return "none";
  }
  return "none";
}

absl::Status OomContainment::SetUpV2(const std::string& dir) {
  if (!IsDirectory(dir)) {
    return absl::FailedPreconditionError(absl::StrCat("no cgroup v2 directory ", dir));
  }
  ASSIGN_OR_RETURN(std::string controllers, ReadFile(dir + "/cgroup.controllers"));
  bool has_memory = false;
  for (absl::string_view c : absl::StrSplit(controllers, absl::ByAnyChar(" \n"))) {
    has_memory |= c == "memory";
  }
  if (!has_memory) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cgroup v2 ", dir, " has no memory controller (cgroup.controllers: '",
        absl::StripTrailingAsciiWhitespace(controllers), "')"));
  }
  RETURN_IF_ERROR(ProbeMkdir(dir));
  // No internal processes: move ourselves (only ourselves: other processes
  // are not ours to move) into a leaf before enabling the memory controller
  // for the workers' cgroups. With others left in `dir` the kernel refuses
  // the controller (EBUSY) and the error below says so.
  ASSIGN_OR_RETURN(std::string procs, ReadFile(dir + "/cgroup.procs"));
  const std::string self = absl::StrCat(getpid());
  bool inside = false;
  for (absl::string_view pid : absl::StrSplit(procs, '\n', absl::SkipEmpty())) {
    inside |= pid == self;
  }
  if (inside) {
    const std::string leaf = dir + "/supervisor";
    if (mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create ", leaf, ": ", strerror(errno)));
    }
    RETURN_IF_ERROR(WriteFile(leaf + "/cgroup.procs", self));
  }
  if (absl::Status s = WriteFile(dir + "/cgroup.subtree_control", "+memory"); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        s.message(), " (other processes in ", dir,
        "? run sluiced as a systemd service with Delegate=yes, or give --cgroup_path a "
        "delegated subtree)"));
  }
  mode_ = OomMode::kCgroupV2;
  base_ = dir;
  description_ = absl::StrCat("cgroup v2 under ", dir, ", ", LimitText(memory_limit_));
  return absl::OkStatus();
}

absl::Status OomContainment::SetUpV1(const std::string& dir) {
  if (!IsDirectory(dir) || access((dir + "/memory.limit_in_bytes").c_str(), F_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no cgroup v1 memory directory ", dir));
  }
  RETURN_IF_ERROR(ProbeMkdir(dir));
  mode_ = OomMode::kCgroupV1;
  base_ = dir;
  description_ = absl::StrCat("cgroup v1 under ", dir, ", ", LimitText(memory_limit_));
  return absl::OkStatus();
}

int RemoveStaleWorkerCgroups(const std::string& base) {
  DIR* d = opendir(base.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  constexpr char kPrefix[] = "sluice-worker-";
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = name.substr(sizeof(kPrefix) - 1);
    int pid = 0;
    if (!absl::SimpleAtoi(rest.substr(0, rest.find('-')), &pid) || pid <= 0) continue;
    if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;  // still alive
    if (rmdir(absl::StrCat(base, "/", name).c_str()) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

absl::StatusOr<std::unique_ptr<OomContainment>> OomContainment::Create(
    const std::string& mode, const std::string& path, uint64_t memory_limit) {
  auto c = CreateImpl(mode, path, memory_limit);
  if (c.ok() && (*c)->mode_ != OomMode::kNone) {
    if (const int stale = RemoveStaleWorkerCgroups((*c)->base_); stale > 0) {
      absl::StrAppend(&(*c)->description_, "; removed ", stale,
                      " stale worker cgroups of a previous sluiced");
    }
  }
  return c;
}

absl::StatusOr<std::unique_ptr<OomContainment>> OomContainment::CreateImpl(
    const std::string& mode, const std::string& path, uint64_t memory_limit) {
  std::unique_ptr<OomContainment> c(new OomContainment());
  c->memory_limit_ = memory_limit;
  std::string why_not;
  if (mode == "v2" || mode == "auto") {
    const std::string mount = FindMount("");
    const std::string dir = !path.empty() ? path
                            : mount.empty() ? std::string()
                                            : mount + OwnCgroupPath(true);
    absl::Status s = dir.empty() ? absl::FailedPreconditionError("no cgroup2 mount")
                                 : c->SetUpV2(dir);
    if (s.ok()) return c;
    if (mode == "v2") return s;
    why_not = std::string(s.message());
  }
  if (mode == "v1" || mode == "auto") {
    const std::string mount = FindMount("memory");
    const std::string dir = !path.empty() ? path
                            : mount.empty() ? std::string()
                                            : mount + OwnCgroupPath(false);
    absl::Status s = dir.empty()
                         ? absl::FailedPreconditionError("no cgroup v1 memory mount")
                         : c->SetUpV1(dir);
    if (s.ok()) return c;
    if (mode == "v1") return s;
    absl::StrAppend(&why_not, "; ", s.message());
  }
  c->mode_ = OomMode::kNone;
  c->description_ = absl::StrCat(
      "no memory cgroup (", mode == "none" ? "disabled by --cgroup_mode=none" : why_not,
      "): workers rely on oom_score_adj 1000 alone");
  return c;
}

absl::StatusOr<WorkerCgroup> OomContainment::PrepareWorker(uint64_t serial) const {
  WorkerCgroup cg;
  if (mode_ == OomMode::kNone) return cg;
  cg.dir = absl::StrCat(base_, "/sluice-worker-", getpid(), "-", serial);
  if (mkdir(cg.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create worker cgroup ", cg.dir, ": ", strerror(errno)));
  }
  cg.procs_file = cg.dir + "/cgroup.procs";
  if (mode_ == OomMode::kCgroupV2) {
    if (memory_limit_ != 0) {
      RETURN_IF_ERROR(WriteFile(cg.dir + "/memory.max", absl::StrCat(memory_limit_)));
      if (access((cg.dir + "/memory.swap.max").c_str(), F_OK) == 0) {
        RETURN_IF_ERROR(WriteFile(cg.dir + "/memory.swap.max", "0"));
      }
    }
    RETURN_IF_ERROR(WriteFile(cg.dir + "/memory.oom.group", "1"));
  } else if (memory_limit_ != 0) {
    RETURN_IF_ERROR(
        WriteFile(cg.dir + "/memory.limit_in_bytes", absl::StrCat(memory_limit_)));
    if (access((cg.dir + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0) {
      RETURN_IF_ERROR(WriteFile(cg.dir + "/memory.memsw.limit_in_bytes",
                                absl::StrCat(memory_limit_)));
    }
  }
  return cg;
}

bool OomContainment::OomKilled(const WorkerCgroup& cg) const {
  if (cg.dir.empty()) return false;
  const std::string file = mode_ == OomMode::kCgroupV2 ? "/memory.events"
                                                       : "/memory.oom_control";
  absl::StatusOr<std::string> text = ReadFile(cg.dir + file);
  return text.ok() && KeyedValue(*text, "oom_kill") > 0;
}

void OomContainment::Remove(const WorkerCgroup& cg) const {
  if (cg.dir.empty()) return;
  for (int attempt = 0; attempt < 200; ++attempt) {
    if (rmdir(cg.dir.c_str()) == 0 || errno == ENOENT) return;
    if (errno != EBUSY) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::cerr << "sluiced: could not remove worker cgroup " << cg.dir << ": "
            << strerror(errno) << "\n";
}

}  // namespace sluice::daemon
