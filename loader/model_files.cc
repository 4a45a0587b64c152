#include "loader/model_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace sluice {

namespace {

constexpr char kSplitCount[] = "split.count";
constexpr char kSplitNo[] = "split.no";
constexpr char kSplitTensors[] = "split.tensors.count";

// Like ParseSplitName but keeps indices outside 1..count, so that strays
// such as "-00004-of-00003" are recognised as members-gone-wrong.
std::optional<SplitName> ParseSplitNameLoose(const std::string& path) {
  // "-NNNNN-of-MMMMM.gguf" is 20 characters.
  constexpr size_t kSuffix = 20;
  if (path.size() < kSuffix) return std::nullopt;
  const std::string tail = path.substr(path.size() - kSuffix);
  auto digits = [&](size_t at) {
    for (size_t i = at; i < at + 5; ++i) {
      if (tail[i] < '0' || tail[i] > '9') return false;
    }
    return true;
  };
  if (tail[0] != '-' || !digits(1) || tail.compare(6, 4, "-of-") != 0 ||
      !digits(10) || tail.compare(15, 5, ".gguf") != 0) {
    return std::nullopt;
  }
  SplitName n;
  n.prefix = path.substr(0, path.size() - kSuffix);
  n.index = static_cast<uint32_t>(std::stoul(tail.substr(1, 5)));
  n.count = static_cast<uint32_t>(std::stoul(tail.substr(10, 5)));
  return n;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

absl::Status ErrnoError(int err, const std::string& path, const char* action) {
  return absl::ErrnoToStatus(err, absl::StrCat(path, ": cannot ", action));
}

// Files beside the set that look like members of it but are not.
absl::Status CheckNoStrays(const SplitName& want) {
  const std::string dir = DirName(want.prefix);
  const std::string base = BaseName(want.prefix);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ErrnoError(errno, dir, "list directory");
  absl::Status status;
  while (dirent* ent = readdir(d)) {
    std::optional<SplitName> n = ParseSplitNameLoose(ent->d_name);
    if (!n || n->prefix != base) continue;
    if (n->count != want.count || n->index == 0 || n->index > want.count) {
      status = absl::FailedPreconditionError(absl::StrFormat(
          "%s/%s: extra or mismatched shard beside the %u-shard set %s: its name "
          "says shard %u of %u",
          dir, ent->d_name, want.count, MakeSplitName(want.prefix, 1, want.count),
          n->index, n->count));
      break;
    }
  }
  closedir(d);
  return status;
}

}  // namespace

std::optional<SplitName> ParseSplitName(const std::string& path) {
  std::optional<SplitName> n = ParseSplitNameLoose(path);
  if (!n || n->index == 0 || n->count == 0 || n->index > n->count) {
    return std::nullopt;
  }
  return n;
}

std::string MakeSplitName(const std::string& prefix, uint32_t index,
                          uint32_t count) {
  return absl::StrFormat("%s-%05u-of-%05u.gguf", prefix, index, count);
}

ModelFiles::~ModelFiles() {
  for (const ShardInfo& s : shards_) {
    if (s.base != nullptr) {
      munmap(const_cast<uint8_t*>(s.base), s.size);
    }
  }
  for (int fd : fds_) close(fd);
}

uint64_t ModelFiles::total_file_bytes() const {
  uint64_t total = 0;
  for (const ShardInfo& s : shards_) total += s.size;
  return total;
}

std::vector<ShardFd> ModelFiles::fds() const {
  std::vector<ShardFd> out;
  for (size_t i = 0; i < shards_.size(); ++i) {
    out.push_back(ShardFd{shards_[i].path, fds_[i]});
  }
  return out;
}

absl::StatusOr<std::unique_ptr<ModelFiles>> ModelFiles::Open(
    const std::string& any_shard_path, const OpenedCheck& check) {
  std::vector<std::string> paths;
  if (std::optional<SplitName> split = ParseSplitName(any_shard_path)) {
    for (uint32_t i = 1; i <= split->count; ++i) {
      paths.push_back(MakeSplitName(split->prefix, i, split->count));
    }
    for (const std::string& p : paths) {
      if (access(p.c_str(), F_OK) != 0) {
        return absl::NotFoundError(absl::StrFormat(
            "%s: shard %u of %u missing (set opened from %s)", p,
            static_cast<uint32_t>(&p - paths.data()) + 1, split->count,
            any_shard_path));
      }
    }
    RETURN_IF_ERROR(CheckNoStrays(*split));
  } else {
    paths.push_back(any_shard_path);
  }
  std::vector<ShardFd> fds;
  for (const std::string& p : paths) {
    // O_NONBLOCK: a FIFO must not block the open (it is refused as not a
    // regular file below); it changes nothing for regular files.
    int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      const int err = errno;
      for (ShardFd& f : fds) close(f.fd);
      return ErrnoError(err, p, "open");
    }
    fds.push_back(ShardFd{p, fd});
    if (absl::Status s = check ? check(p, fd) : absl::OkStatus(); !s.ok()) {
      for (ShardFd& f : fds) close(f.fd);
      return s;
    }
  }
  return FromFdsImpl(std::move(fds), /*unsplit_name=*/!ParseSplitName(any_shard_path));
}

absl::StatusOr<std::unique_ptr<ModelFiles>> ModelFiles::FromFds(
    std::vector<ShardFd> shards) {
  return FromFdsImpl(std::move(shards), /*unsplit_name=*/false);
}

absl::StatusOr<std::unique_ptr<ModelFiles>> ModelFiles::FromFdsImpl(
    std::vector<ShardFd> shards, bool unsplit_name) {
  std::unique_ptr<ModelFiles> files(new ModelFiles());
  // Take ownership first so every return path closes them.
  for (const ShardFd& s : shards) files->fds_.push_back(s.fd);
  if (shards.empty()) {
    return absl::InvalidArgumentError("ModelFiles::FromFds: no shards given");
  }
  for (const ShardFd& s : shards) {
    ShardInfo info;
    info.path = s.name;
    struct stat st;
    if (fstat(s.fd, &st) != 0) return ErrnoError(errno, s.name, "stat");
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(s.name, ": not a regular file"));
    }
    info.size = static_cast<uint64_t>(st.st_size);
    if (info.size > 0) {
      void* p = mmap(nullptr, info.size, PROT_READ, MAP_SHARED, s.fd, 0);
      if (p == MAP_FAILED) return ErrnoError(errno, s.name, "mmap");
      info.base = static_cast<const uint8_t*>(p);
    }
    files->shards_.push_back(std::move(info));
    ShardInfo& added = files->shards_.back();
    ASSIGN_OR_RETURN(added.file, GgufFile::Parse(s.name, added.base, added.size));
  }
  return FromOpenShards(std::move(files), unsplit_name);
}

absl::StatusOr<std::unique_ptr<ModelFiles>> ModelFiles::FromOpenShards(
    std::unique_ptr<ModelFiles> files, bool unsplit_name) {
  const uint32_t n = static_cast<uint32_t>(files->shards_.size());
  std::vector<ShardView> views;
  for (const ShardInfo& s : files->shards_) views.push_back({s.file.get(), s.base});
  ASSIGN_OR_RETURN(files->table_,
                   TensorTable::Build(files->shards_[0].path, views));
  for (uint32_t i = 0; i < n; ++i) {
    const GgufFile& f = *files->shards_[i].file;
    auto mismatch = [&](const char* key, uint64_t found, const std::string& want) {
      return absl::InvalidArgumentError(absl::StrCat(
          f.file_name(), ": metadata key '", key, "' is ", found, " but ", want));
    };
    if (n == 1 && f.Find(kSplitCount) == nullptr) break;  // a plain file
    ASSIGN_OR_RETURN(uint64_t count, f.GetU64(kSplitCount));
    ASSIGN_OR_RETURN(uint64_t no, f.GetU64Or(kSplitNo, 0));
    if (n == 1 && count <= 1 && no == 0) break;  // a 1-shard set
    if (unsplit_name && count > 1) {
      // Without the name suffix there is no way to find the other shards.
      return mismatch(kSplitCount, count,
                      "the file name has no -NNNNN-of-MMMMM.gguf suffix to find the "
                      "other shards by");
    }
    if (count != n) {
      return mismatch(kSplitCount, count,
                      absl::StrCat("the set has ", n, " shards"));
    }
    ASSIGN_OR_RETURN(no, f.GetU64(kSplitNo));
    if (no != i) {
      return mismatch(kSplitNo, no, absl::StrCat("the file is shard ", i + 1, " of ", n,
                                                 " (split.no counts from 0)"));
    }
    if (i == 0 || f.Find(kSplitTensors) != nullptr) {
      ASSIGN_OR_RETURN(uint64_t total, f.GetU64(kSplitTensors));
      if (total != files->table_.size()) {
        return mismatch(kSplitTensors, total,
                        absl::StrCat("the ", n, " shards hold ", files->table_.size(),
                                     " tensors"));
      }
    }
  }
  return files;
}

}  // namespace sluice
