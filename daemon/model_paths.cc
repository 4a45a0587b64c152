#include "daemon/model_paths.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sluice::daemon {
namespace {

constexpr size_t kMaxPathBytes = 4096;

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot be resolved"));
  }
  return std::string(resolved);
}

// "/a/./b/../c" -> "/a/c", without touching the file system.
std::string Normalize(const std::string& path) {
  std::vector<std::string> parts;
  for (absl::string_view p : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (p == ".") continue;
    if (p == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.emplace_back(p);
  }
  std::string out;
  for (const std::string& p : parts) absl::StrAppend(&out, "/", p);
  return out.empty() ? "/" : out;
}

}  // namespace

std::string QuotePrefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  // Do not cut a UTF-8 sequence: back up to a lead byte.
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(absl::string_view(text.data(), cut), "... (", text.size(), " bytes)");
}

absl::StatusOr<ModelPathPolicy> ModelPathPolicy::Create(const std::vector<std::string>& dirs) {
  std::vector<std::string> resolved;
  for (const std::string& d : dirs) {
    if (d.empty()) continue;
    absl::StatusOr<std::string> r = RealPath(d);
    struct stat st;
    if (!r.ok() || stat(r->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model_dir='", d, "': not an existing directory"));
    }
    if (*r == "/") {
      return absl::InvalidArgumentError("--model_dir='/': would allow every file");
    }
    resolved.push_back(*std::move(r));
  }
  return ModelPathPolicy(std::move(resolved));
}

bool ModelPathPolicy::Inside(const std::string& resolved) const {
  for (const std::string& d : dirs_) {
    if (resolved.size() > d.size() + 1 && resolved.compare(0, d.size(), d) == 0 &&
        resolved[d.size()] == '/') {
      return true;
    }
  }
  return false;
}

absl::Status ModelPathPolicy::Check(std::string_view path) const {
  if (path.empty()) return absl::InvalidArgumentError("LoadModel: path is empty");
  if (path.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("LoadModel: path contains a NUL byte");
  }
  if (path.size() > kMaxPathBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LoadModel: path of ", path.size(), " bytes exceeds ", kMaxPathBytes));
  }
  if (dirs_.empty()) {
    return absl::FailedPreconditionError(
        "LoadModel: no --model_dir is configured, so models cannot be loaded over the API");
  }
  const std::string p(path);
  const absl::Status outside = absl::PermissionDeniedError(absl::StrCat(
      "LoadModel path='", QuotePrefix(p), "': not a model file inside a --model_dir"));
  absl::StatusOr<std::string> resolved = RealPath(p);
  if (!resolved.ok()) {
    // Missing: allowed through only when the name itself is inside, so that
    // the answer says nothing about files elsewhere.
    return p.front() == '/' && Inside(Normalize(p)) ? absl::OkStatus() : outside;
  }
  if (!Inside(*resolved)) return outside;
  struct stat st;
  if (stat(resolved->c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    // Refused before any open(): a FIFO would block it.
    return absl::InvalidArgumentError(
        absl::StrCat("LoadModel path='", QuotePrefix(p), "': not a regular file"));
  }
  return absl::OkStatus();
}

absl::Status ModelPathPolicy::CheckOpened(std::string_view path, int fd) const {
  const absl::Status outside = absl::PermissionDeniedError(absl::StrCat(
      "LoadModel path='", QuotePrefix(path), "': not a model file inside a --model_dir"));
  char link[PATH_MAX];
  const ssize_t n =
      readlink(absl::StrCat("/proc/self/fd/", fd).c_str(), link, sizeof(link) - 1);
  if (n <= 0) return outside;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_nlink == 0 || !Inside(std::string(link, n))) return outside;
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoadModel path='", QuotePrefix(path), "': not a regular file"));
  }
  return absl::OkStatus();
}

}  // namespace sluice::daemon
