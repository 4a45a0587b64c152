// The host's memory as the fit planner needs it: MemTotal and MemAvailable
// from /proc/meminfo, behind a small interface so that planner decisions are
// tested with any host (FakeHostProbe) and the real one stays a file read.
//
// Thread-safety: implementations may be called concurrently.
#ifndef SLUICE_MEMORY_HOST_PROBE_H_
#define SLUICE_MEMORY_HOST_PROBE_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace sluice::memory {

struct HostMemory {
  uint64_t total_bytes = 0;      // MemTotal
  uint64_t available_bytes = 0;  // MemAvailable: what can be had without swapping
};

// Parses /proc/meminfo text ("MemTotal:  131072 kB" lines). INVALID_ARGUMENT
// naming `source` and the key when MemTotal or MemAvailable is missing or
// not a number.
absl::StatusOr<HostMemory> ParseMeminfo(absl::string_view text,
                                        absl::string_view source = "/proc/meminfo");

class HostProbe {
 public:
  virtual ~HostProbe() = default;
  virtual absl::StatusOr<HostMemory> Memory() = 0;
};

// Reads `path` (default /proc/meminfo) on every call.
class ProcHostProbe : public HostProbe {
 public:
  explicit ProcHostProbe(std::string path = "/proc/meminfo") : path_(std::move(path)) {}
  absl::StatusOr<HostMemory> Memory() override;

 private:
  std::string path_;
};

// Answers what it was given (tests).
class FakeHostProbe : public HostProbe {
 public:
  explicit FakeHostProbe(HostMemory memory) : memory_(memory) {}
  absl::StatusOr<HostMemory> Memory() override { return memory_; }

 private:
  HostMemory memory_;
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_HOST_PROBE_H_
