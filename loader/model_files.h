// ModelFiles: an opened, validated, read-only mapped set of GGUF shards.
//
// A model is one GGUF file or a split set "<prefix>-NNNNN-of-MMMMM.gguf"
// (NNNNN 1-based, as written by llama-gguf-split). Every shard is opened once,
// mapped PROT_READ / MAP_SHARED in full, parsed (GgufFile) and checked:
//   * every sibling 00001..MMMMM exists (NotFound naming the missing path);
//   * no other file "<prefix>-NNNNN-of-XXXXX.gguf" sits beside them with a
//     different count or an index beyond MMMMM (FailedPrecondition naming it);
//   * each shard's split.no (0-based) equals its position, split.count equals
//     MMMMM, and shard 0's split.tensors.count equals the number of tensors
//     found in all shards (InvalidArgument naming the file, key and value);
//   * a tensor name appears in only one shard.
// A file whose name has no -NNNNN-of-MMMMM suffix is a 1-shard set; if it
// carries split.count > 1 that is an error.
//
// Metadata (architecture, hyper-parameters, vocabulary) is read from shard 0.
//
// Lifetime: the mappings and fds live as long as the ModelFiles; TensorEntry::
// data pointers and metadata() references die with it.
//
// Thread-safety: immutable after construction; const methods may be called
// concurrently. The mapped bytes are read-only: writing through them faults.
#ifndef SLUICE_LOADER_MODEL_FILES_H_
#define SLUICE_LOADER_MODEL_FILES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/gguf_file.h"
#include "loader/tensor_table.h"

namespace sluice {

// A shard as a name (its path, or any label for error messages) and an fd.
struct ShardFd {
  std::string name;
  int fd = -1;
};

// Parsed "<prefix>-NNNNN-of-MMMMM.gguf"; nullopt when `path` does not have that
// form (or NNNNN is 0 or above MMMMM). `prefix` keeps any directory part.
struct SplitName {
  std::string prefix;
  uint32_t index = 0;  // 1-based, as in the file name
  uint32_t count = 0;
};
std::optional<SplitName> ParseSplitName(const std::string& path);
// "<prefix>-NNNNN-of-MMMMM.gguf" for 1-based `index`.
std::string MakeSplitName(const std::string& prefix, uint32_t index,
                          uint32_t count);

struct ShardInfo {
  std::string path;  // as opened, or the ShardFd name
  uint64_t size = 0;
  const uint8_t* base = nullptr;  // read-only mapping of the whole file
  std::unique_ptr<GgufFile> file;
};

class ModelFiles {
 public:
  ~ModelFiles();  // unmaps and closes every fd it owns
  ModelFiles(const ModelFiles&) = delete;
  ModelFiles& operator=(const ModelFiles&) = delete;

  // Called with each shard's path and fd right after it is opened, before
  // anything is read or mapped; an error fails the Open with that status.
  // Why: a caller confining paths (daemon/model_paths.h) must check what was
  // opened, not a name that may point elsewhere by the time it is opened.
  using OpenedCheck = std::function<absl::Status(const std::string& path, int fd)>;

  // Opens the model that `any_shard_path` belongs to (any shard of a split
  // set, or a single file). NotFound when a file does not exist.
  static absl::StatusOr<std::unique_ptr<ModelFiles>> Open(
      const std::string& any_shard_path, const OpenedCheck& check = nullptr);

  // Maps shards received as fds (e.g. over SCM_RIGHTS), in shard order,
  // without opening any path. The fds must be distinct, open for reading and
  // refer to regular files. Ownership of EVERY fd passes to this call: on
  // success the ModelFiles closes them on destruction, on failure they are
  // closed before returning. The same split checks as Open apply, except the
  // sibling search (there are no paths).
  static absl::StatusOr<std::unique_ptr<ModelFiles>> FromFds(
      std::vector<ShardFd> shards);

  // Shard 0's header: the model's metadata.
  const GgufFile& metadata() const { return *shards_[0].file; }
  const TensorTable& tensors() const { return table_; }

  int shard_count() const { return static_cast<int>(shards_.size()); }
  const ShardInfo& shard(int i) const { return shards_[i]; }
  uint64_t total_file_bytes() const;

  // The fds for handing to another process, in shard order. They remain
  // owned by this ModelFiles: do not close them (sendmsg duplicates them in
  // the receiver; dup() if a caller needs its own).
  std::vector<ShardFd> fds() const;

 private:
  ModelFiles() = default;
  // `unsplit_name`: opened by a path without the -NNNNN-of-MMMMM suffix.
  static absl::StatusOr<std::unique_ptr<ModelFiles>> FromFdsImpl(
      std::vector<ShardFd> shards, bool unsplit_name);
  static absl::StatusOr<std::unique_ptr<ModelFiles>> FromOpenShards(
      std::unique_ptr<ModelFiles> files, bool unsplit_name);

  std::vector<ShardInfo> shards_;
  std::vector<int> fds_;
  TensorTable table_;
};

}  // namespace sluice

#endif  // SLUICE_LOADER_MODEL_FILES_H_
