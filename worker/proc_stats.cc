#include "worker/proc_stats.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace sluice::worker {

ProcStats ReadProcStats(const std::string& status_path, const std::string& stat_path) {
  ProcStats s;
  std::ifstream status(status_path);
  std::string line;
  while (std::getline(status, line)) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(": \t"), absl::SkipEmpty());
    uint64_t kib = 0;
    if (f.size() < 2 || !absl::SimpleAtoi(f[1], &kib)) continue;
    if (f[0] == "RssAnon") s.rss_anon_bytes = kib * 1024;
    if (f[0] == "RssFile") s.rss_file_bytes = kib * 1024;
    if (f[0] == "VmSwap") s.swap_bytes = kib * 1024;
  }
  std::ifstream stat(stat_path);
  std::stringstream ss;
  ss << stat.rdbuf();
  const std::string text = ss.str();
  // The command name (field 2) may hold spaces; fields after its ')' are
  // space-separated, majflt being the 10th of them.
  const size_t paren = text.rfind(')');
  if (paren != std::string::npos) {
    std::vector<absl::string_view> f =
        absl::StrSplit(absl::string_view(text).substr(paren + 1), ' ', absl::SkipEmpty());
    if (f.size() > 9) (void)absl::SimpleAtoi(f[9], &s.major_faults);
  }
  return s;
}

}  // namespace sluice::worker
