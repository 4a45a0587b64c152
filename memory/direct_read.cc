#include "memory/direct_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sluice::memory {

std::vector<DirectRead> SplitReads(absl::Span<const DirectRead> reads,
                                   uint64_t chunk_bytes) {
  const uint64_t chunk = std::max(kDirectAlign, AlignDownDirect(chunk_bytes));
  std::vector<DirectRead> out;
  for (const DirectRead& r : reads) {
    for (uint64_t done = 0; done < r.length; done += chunk) {
      out.push_back({r.fd, r.offset + done, std::min(chunk, r.length - done),
                     r.dst == nullptr ? nullptr : r.dst + done});
    }
  }
  return out;
}

absl::Status ReadFully(const DirectRead& r) {
  uint64_t done = 0;
  while (done < r.length) {
    const ssize_t n = pread(r.fd, r.dst + done, r.length - done,
                            static_cast<off_t>(r.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && done > 0) break;  // the aligned span's tail past the end
    if (n <= 0) {
      return absl::DataLossError(absl::StrCat(
          "reading ", r.length, " bytes at offset ", r.offset, ": ",
          n < 0 ? std::strerror(errno) : "unexpected end of file"));
    }
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ReadAll(ThreadPool& pool, absl::Span<const DirectRead> reads) {
  if (reads.empty()) return absl::OkStatus();  // no wake-up of the pool
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<absl::Status> errors(static_cast<size_t>(pool.num_threads()));
  // One range per participant; each pulls reads until none is left.
  pool.ParallelFor(pool.num_threads(), [&](int64_t b, int64_t e) {
    for (int64_t me = b; me < e; ++me) {
      for (size_t i = next.fetch_add(1); i < reads.size(); i = next.fetch_add(1)) {
        if (failed.load(std::memory_order_relaxed)) return;
        absl::Status s = ReadFully(reads[i]);
        if (!s.ok()) {
          errors[me] = std::move(s);
          failed.store(true);
          return;
        }
      }
    }
  });
  for (const absl::Status& s : errors) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<DirectFd> ReopenDirect(int fd, const std::string& name) {
  const std::string proc = absl::StrCat("/proc/self/fd/", fd);
  DirectFd out;
  out.fd = open(proc.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  out.direct = out.fd >= 0;
  if (out.fd < 0 && errno == EINVAL) {
    out.fd = open(proc.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (out.fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot reopen ", name, " with O_DIRECT: ", std::strerror(errno)));
  }
  return out;
}

}  // namespace sluice::memory
