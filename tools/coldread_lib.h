// coldread: how fast cold routed experts come off the disk, through the
// expert host tier (model/cuda/host_tier.h) against the disk's own rate.
// Issue 13 asks for cold reads at >= 80% of what the disk can deliver.
//
//  - The disk's rate: the expert tensors' byte ranges read in order, in big
//    aligned blocks with O_DIRECT (so no page cache serves them), by N
//    threads each pulling the next block (queue depth N); and the same
//    blocks through io_uring (memory/uring_reader.h) from one thread at
//    queue depth D.
//  - The host tier's rate: a fresh (cold) tier Loads every expert of every
//    layer, in routing-sized calls (n_expert_used experts, as decode does) or
//    whole-layer calls (as a prefill wave does); bytes are the slices of the
//    experts Load says it read from disk, over the calls' wall time.
//
// This library is the part without CUDA (ranges, blocks, batches, the disk
// measurement, the report); coldread_tier.h runs the host tier.
#ifndef SLUICE_TOOLS_COLDREAD_LIB_H_
#define SLUICE_TOOLS_COLDREAD_LIB_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "loader/model_files.h"
#include "memory/direct_read.h"
#include "model/weights.h"

namespace sluice::coldread {

// Gate, up and down of each layer, as the host tier takes them.
using LayerExperts = std::vector<std::array<ExpertMatrix, 3>>;

// Bytes over seconds, in GB/s (1e9 bytes).
struct Rate {
  uint64_t bytes = 0;
  double seconds = 0;
  double gbps() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
};

// [begin, end) of shard `shard`'s file.
struct FileRange {
  int shard = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  bool operator==(const FileRange& o) const {
    return shard == o.shard && begin == o.begin && end == o.end;
  }
};

// Sorted by (shard, begin), with overlapping or touching ranges merged and
// empty ones dropped.
std::vector<FileRange> MergeRanges(std::vector<FileRange> ranges);

// Where the expert tensors of `layers` lie in the files (merged).
// InvalidArgument when a tensor lies outside every shard's mapping.
absl::StatusOr<std::vector<FileRange>> ExpertRanges(const ModelFiles& files,
                                                    const LayerExperts& layers);

// The shards reopened for O_DIRECT (memory::ReopenDirect); closed on
// destruction.
class DirectShards {
 public:
  static absl::StatusOr<DirectShards> Open(const ModelFiles& files);
  DirectShards(DirectShards&& o) noexcept : fds_(std::move(o.fds_)) { o.fds_.clear(); }
  DirectShards& operator=(DirectShards&&) = delete;
  ~DirectShards();
  int fd(int shard) const { return fds_[shard].fd; }
  // True when every shard reads with O_DIRECT (false: some filesystem
  // refused it, and the page cache may serve those reads).
  bool all_direct() const;

 private:
  DirectShards() = default;
  std::vector<memory::DirectFd> fds_;
};

// The ranges widened to O_DIRECT alignment and cut into reads of
// `block_bytes` (rounded down to a multiple of 4096) in file order, stopping
// once `max_bytes` are covered (0: all). `fds[shard]` is each shard's fd;
// dst is left null (the reader supplies buffers).
std::vector<memory::DirectRead> DiskBlocks(absl::Span<const FileRange> ranges,
                                           absl::Span<const int> fds,
                                           uint64_t block_bytes, uint64_t max_bytes);

// Reads every block once with `threads` threads, each into its own aligned
// buffer, each thread taking the next unread block. The bytes are the
// blocks' lengths (the last block of a file may end up to 4095 bytes early).
absl::StatusOr<Rate> MeasureDisk(absl::Span<const memory::DirectRead> blocks,
                                 int threads);

// One layer's experts 0..n_expert-1 as Load calls of `k` (the last call takes
// the rest), shuffled with `seed` when `shuffle` (as routing picks them) or in
// order. Every expert appears exactly once.
std::vector<std::vector<int32_t>> Batches(int32_t n_expert, int32_t k, bool shuffle,
                                          uint64_t seed);

struct DiskRun {
  int threads = 0;
  Rate rate;
};

// One io_uring run of the disk's blocks.
struct UringRun {
  int depth = 0;
  bool registered = false;  // the buffers were registered with the ring
  Rate rate;
};

// The same blocks read through one memory::UringReader: up to `depth`
// reads in the kernel at once, from one thread, into `depth` registered
// buffers used in turn (a buffer is reused once its previous block's ticket
// has been waited). Unavailable where io_uring is refused.
absl::StatusOr<UringRun> MeasureDiskUring(absl::Span<const memory::DirectRead> blocks,
                                          int depth);

struct TierRun {
  int batch = 0;    // experts per Load call
  std::string reader = "threads";  // "uring" or "threads" (HostTier's)
  int threads = 0;  // the pool's readers ("threads")
  uint64_t piece_bytes = 0;  // read pieces (0: whole slices)
  Rate rate;        // bytes of the experts read from disk
  int64_t calls = 0;
  int64_t experts_from_disk = 0;
  int64_t experts_loaded = 0;
};

struct Report {
  std::string model;
  int shards = 0;
  int layers = 0;  // measured
  int n_layer = 0;  // of the model
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  uint64_t expert_bytes = 0;  // of the measured layers
  bool o_direct = false;
  uint64_t block_bytes = 0;
  std::vector<DiskRun> disk;
  std::vector<UringRun> uring;
  std::string uring_skipped;  // why no io_uring figures (empty: none asked, or ran)
  std::vector<TierRun> tier;
  // Why no tier figures: "disk_only", or the error that stopped them.
  std::string tier_skipped;
};

// The disk run with the highest rate; nullptr when there is none.
const DiskRun* BestDisk(const Report& r);

// Human-readable lines, one per run, with host-tier/disk ratios.
std::string FormatText(const Report& r);
// One JSON object on one line (fields: docs/BENCHMARKS.md, "Cold reads").
std::string FormatJson(const Report& r);

}  // namespace sluice::coldread

#endif  // SLUICE_TOOLS_COLDREAD_LIB_H_
