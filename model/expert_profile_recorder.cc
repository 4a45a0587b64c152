#include "model/expert_profile_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sluice {

void ExpertProfileRecorder::OnRouting(int64_t layer, int64_t n_expert_used,
                                      absl::Span<const Routing> routes) {
  std::vector<int32_t> used;
  for (const Routing& r : routes) used.insert(used.end(), r.expert, r.expert + n_expert_used);
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  absl::MutexLock lock(&mu_);
  if (!profile_.Record(static_cast<int32_t>(layer), used).ok()) {
    dropped_ += used.size();
    return;
  }
  unsaved_ += used.size();
}

absl::Status ExpertProfileRecorder::Save(const std::string& path) const {
  std::string bytes;
  uint64_t pending = 0;
  {
    absl::MutexLock lock(&mu_);
    bytes = profile_.Serialize();
    pending = unsaved_;
  }
  const std::string tmp = absl::StrCat(path, ".tmp");
  const auto fail = [&](const char* what) {
    const int err = errno;
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot save the expert profile (", what, " ", tmp, ": ",
                     std::strerror(err), ")"));
  };
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("open");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = fail("write");
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    absl::Status s = fail("fsync");
    close(fd);
    unlink(tmp.c_str());
    return s;
  }
  if (close(fd) != 0) return fail("close");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = fail("rename");
    unlink(tmp.c_str());
    return s;
  }
  absl::MutexLock lock(&mu_);
  unsaved_ -= pending;
  return absl::OkStatus();
}

memory::ExpertProfile ExpertProfileRecorder::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return profile_;
}

uint64_t ExpertProfileRecorder::unsaved() const {
  absl::MutexLock lock(&mu_);
  return unsaved_;
}

uint64_t ExpertProfileRecorder::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

}  // namespace sluice
