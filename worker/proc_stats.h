// Memory and fault counters of the calling process, from /proc/self.
#ifndef SLUICE_WORKER_PROC_STATS_H_
#define SLUICE_WORKER_PROC_STATS_H_

#include <cstdint>
#include <string>

namespace sluice::worker {

struct ProcStats {
  uint64_t rss_anon_bytes = 0;  // RssAnon
  uint64_t rss_file_bytes = 0;  // RssFile (mapped model pages count here)
  uint64_t swap_bytes = 0;      // VmSwap
  uint64_t major_faults = 0;    // field 12 of stat
};

// Reads `status_path` (/proc/PID/status format) and `stat_path` (/proc/PID/stat
// format); fields that cannot be read stay 0.
ProcStats ReadProcStats(const std::string& status_path = "/proc/self/status",
                        const std::string& stat_path = "/proc/self/stat");

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_PROC_STATS_H_
