#include "memory/host_probe.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sluice::memory {
namespace {

// Sets *bytes to the value of `key` (kB in the file); false when the key is
// absent or its value is not a number.
bool Field(absl::string_view text, absl::string_view key, uint64_t* bytes) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(": \t"), absl::SkipEmpty());
    if (f.size() < 2 || f[0] != key) continue;
    uint64_t kib = 0;
    if (!absl::SimpleAtoi(f[1], &kib)) return false;
    *bytes = kib * 1024;
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<HostMemory> ParseMeminfo(absl::string_view text, absl::string_view source) {
  HostMemory m;
  if (!Field(text, "MemTotal", &m.total_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": MemTotal is missing or not a number of kB"));
  }
  if (!Field(text, "MemAvailable", &m.available_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": MemAvailable is missing or not a number of kB"));
  }
  return m;
}

absl::StatusOr<HostMemory> ProcHostProbe::Memory() {
  std::ifstream in(path_);
  if (!in) return absl::UnavailableError(absl::StrCat(path_, ": cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseMeminfo(text.str(), path_);
}

}  // namespace sluice::memory
