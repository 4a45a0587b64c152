// Out-of-memory containment for workers.
//
// Every worker runs with oom_score_adj 1000 (set by the spawner). On top of
// that, where a writable memory cgroup is available, each worker gets a cgroup
// of its own, created fresh per start and removed after the worker is reaped:
//   * cgroup v2 (a delegated subtree: systemd Delegate=yes, or --cgroup_path):
//     memory.max = limit, memory.swap.max = 0 when a limit is set, and
//     memory.oom.group = 1. Because v2 forbids processes in a cgroup whose
//     controllers are enabled for children, the supervisor first moves itself
//     into a "supervisor" child of the subtree.
//   * cgroup v1 (the memory controller mounted at /sys/fs/cgroup/memory):
//     memory.limit_in_bytes = limit and, with swap accounting,
//     memory.memsw.limit_in_bytes = limit.
// A kernel OOM kill is recognised afterwards from the worker cgroup's
// "oom_kill" counter (v2 memory.events, v1 memory.oom_control). With neither
// hierarchy writable the mode is kNone: the score alone decides the victim.
//
// Thread-safety: Create() once; the other methods may be called from any
// thread (they only touch the file system).
#ifndef SLUICE_DAEMON_CGROUP_H_
#define SLUICE_DAEMON_CGROUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace sluice::daemon {

enum class OomMode { kCgroupV2, kCgroupV1, kNone };

// "cgroup_v2", "cgroup_v1", "none" (the label values of the metric).
absl::string_view OomModeName(OomMode mode);

struct WorkerCgroup {
  std::string dir;         // "" in kNone mode
  std::string procs_file;  // the child writes its pid here before exec
};

// Removes "sluice-worker-PID-SERIAL" directories under `base` whose PID is
// not a live process: cgroups left behind by a sluiced that was SIGKILLed
// (its workers died with it, so the cgroups are empty). Returns how many
// were removed.
int RemoveStaleWorkerCgroups(const std::string& base);

class OomContainment {
 public:
  // `mode` is auto | v2 | v1 | none. With an explicit v2/v1 that cannot be set
  // up, FailedPrecondition says why; auto falls back v2 -> v1 -> none.
  // `path` (optional) is the cgroup directory to create workers under.
  static absl::StatusOr<std::unique_ptr<OomContainment>> Create(
      const std::string& mode, const std::string& path, uint64_t memory_limit);

  OomMode mode() const { return mode_; }
  // One line for the log: mode, directory, limit, or why none.
  const std::string& description() const { return description_; }

  // Creates the cgroup for a worker about to start. `serial` makes the name
  // unique within this supervisor.
  absl::StatusOr<WorkerCgroup> PrepareWorker(uint64_t serial) const;

  // True when the kernel OOM-killed a process in `cg` (reads the counter).
  bool OomKilled(const WorkerCgroup& cg) const;

  // Removes the (now empty) cgroup; retries briefly while the kernel still
  // accounts the exiting task. Errors are logged, not returned.
  void Remove(const WorkerCgroup& cg) const;

 private:
  OomContainment() = default;
  static absl::StatusOr<std::unique_ptr<OomContainment>> CreateImpl(
      const std::string& mode, const std::string& path, uint64_t memory_limit);
  absl::Status SetUpV2(const std::string& dir);
  absl::Status SetUpV1(const std::string& dir);

  OomMode mode_ = OomMode::kNone;
  std::string base_;
  uint64_t memory_limit_ = 0;
  std::string description_;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_CGROUP_H_
