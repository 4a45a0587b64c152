// Where LoadModel may read from: the --model_dir directories, nothing else.
//
// Why: LoadModel used to open any path the daemon could read, so a client
// could probe for files, read their first bytes through the error message,
// or hang a handler on a FIFO. Loading is an operator action; a client may
// only name a regular file inside a configured directory (symlinks resolved
// before the check).
//
// Thread-safety: immutable after Create(); Check() may be called concurrently.
#ifndef SLUICE_DAEMON_MODEL_PATHS_H_
#define SLUICE_DAEMON_MODEL_PATHS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::daemon {

class ModelPathPolicy {
 public:
  // `dirs` must exist; they are resolved (realpath) now. An empty list makes
  // every Check() fail: the daemon then serves only its --model.
  static absl::StatusOr<ModelPathPolicy> Create(const std::vector<std::string>& dirs);

  // OK when `path` names a regular file inside one of the directories, or a
  // missing one whose name is inside (the loader then reports it missing).
  // Errors never say whether a file outside exists: InvalidArgument for a
  // NUL byte, an over-long path or a non-regular file; PermissionDenied for
  // anything outside; FailedPrecondition when no directory is configured.
  // Messages quote at most a short prefix of the path.
  absl::Status Check(std::string_view path) const;

  // The same rule for a file already opened as `fd` (requested as `path`,
  // quoted in messages): the fd's own path (/proc/self/fd) must lie inside a
  // directory and name a regular file. This is the check that counts: the
  // name-based Check() races with a symlink changed before the open.
  absl::Status CheckOpened(std::string_view path, int fd) const;

  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  explicit ModelPathPolicy(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}
  bool Inside(const std::string& resolved) const;

  std::vector<std::string> dirs_;  // resolved, without a trailing '/'
};

// At most `max_bytes` of `text` for an error message, "..." marking a cut.
std::string QuotePrefix(std::string_view text, size_t max_bytes = 64);

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_MODEL_PATHS_H_
