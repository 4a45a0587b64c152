#include "model/cuda/host_tier.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/model_files.h"

namespace sluice {
namespace {

// O_DIRECT's alignment of offsets, lengths and buffers.
constexpr uint64_t kDirectAlign = 4096;

uint64_t AlignDown(uint64_t v) { return v / kDirectAlign * kDirectAlign; }
uint64_t AlignUpDirect(uint64_t v) {
  return (v + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostTier>> HostTier::Create(
    const ModelFiles& files, std::vector<std::array<ExpertMatrix, 3>> layers,
    uint64_t bytes, int threads) {
  auto t = std::unique_ptr<HostTier>(new HostTier());
  const std::vector<ShardFd> shard_fds = files.fds();
  for (const ShardFd& s : shard_fds) {
    // The shard is reopened, not dup()ed: O_DIRECT is a property of the open
    // file description, and the mapping's fd must stay as it is.
    const std::string proc = absl::StrCat("/proc/self/fd/", s.fd);
    int fd = open(proc.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0 && errno == EINVAL) {
      // Some filesystems (tmpfs, some overlays) refuse O_DIRECT: read through
      // the page cache there, and say so once.
      std::fprintf(stderr,
                   "host tier: %s does not support O_DIRECT; reading it "
                   "through the page cache\n",
                   s.name.c_str());
      fd = open(proc.c_str(), O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "host tier: cannot reopen ", s.name, " with O_DIRECT: ",
          std::strerror(errno)));
    }
    t->fds_.push_back(fd);
  }
  int32_t n_expert = 0;
  for (const std::array<ExpertMatrix, 3>& l : layers) {
    std::array<Part, 3> parts;
    for (int p = 0; p < 3; ++p) {
      const ExpertMatrix& m = l[p];
      n_expert = static_cast<int32_t>(m.n_expert);
      int shard = -1;
      for (int i = 0; i < files.shard_count(); ++i) {
        const ShardInfo& s = files.shard(i);
        if (m.data >= s.base && m.data < s.base + s.size) shard = i;
      }
      if (shard < 0) {
        return absl::InvalidArgumentError(
            "host tier: an expert tensor lies outside every shard's mapping");
      }
      parts[p] = {shard, static_cast<uint64_t>(m.data - files.shard(shard).base),
                  m.slice_bytes};
      // The aligned span around any slice: its length plus the worst
      // misalignment at each end.
      t->part_bytes_[p] = std::max(t->part_bytes_[p],
                                   AlignUpDirect(m.slice_bytes) + 2 * kDirectAlign);
    }
    t->layers_.push_back(parts);
  }
  t->slot_bytes_ = t->part_bytes_[0] + t->part_bytes_[1] + t->part_bytes_[2];
  t->n_slots_ = static_cast<int64_t>(bytes / t->slot_bytes_);
  if (t->n_slots_ < n_expert) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host tier: ", bytes, " bytes hold ", t->n_slots_, " expert slices of ",
        t->slot_bytes_, " bytes; one layer's ", n_expert, " experts need at least ",
        n_expert * t->slot_bytes_, " bytes"));
  }
  ASSIGN_OR_RETURN(t->pinned_,
                   cuda::PinnedBuffer::Create(t->n_slots_ * t->slot_bytes_));
  memory::SlotCacheOptions o;
  o.n_layer = static_cast<int32_t>(layers.size());
  o.n_expert = n_expert;
  o.n_slots = static_cast<int32_t>(t->n_slots_);
  o.slice_bytes = t->slot_bytes_;
  ASSIGN_OR_RETURN(std::unique_ptr<memory::EvictionPolicy> lru,
                   memory::MakePolicy("lru"));
  ASSIGN_OR_RETURN(t->cache_, memory::SlotCache::Create(o, std::move(lru)));
  t->pool_ = std::make_unique<kernels::ThreadPool>(std::max(1, threads));
  return t;
}

HostTier::~HostTier() {
  for (int fd : fds_) close(fd);
}

HostTier::Slices HostTier::SlicesIn(int32_t slot, int layer,
                                    int32_t expert) const {
  Slices s;
  const uint8_t* base = SlotBase(slot);
  for (int p = 0; p < 3; ++p) {
    const uint64_t off = FileOffset(layer, p, expert);
    s[p] = base + (off - AlignDown(off));
    base += part_bytes_[p];
  }
  return s;
}

std::optional<HostTier::Slices> HostTier::Peek(int layer, int32_t expert) const {
  std::optional<int32_t> slot = cache_->Peek({layer, expert});
  if (!slot.has_value()) return std::nullopt;
  return SlicesIn(*slot, layer, expert);
}

absl::Status HostTier::Load(int layer, absl::Span<const int32_t> experts,
                            std::vector<Slices>& out,
                            std::vector<bool>& from_disk) {
  cache_->BeginStep();
  ASSIGN_OR_RETURN(std::vector<memory::SlotAssignment> got,
                   cache_->Acquire(layer, experts));
  out.assign(experts.size(), Slices{});
  from_disk.assign(experts.size(), false);
  // (slot, part) reads of the misses, done by the pool.
  struct Read {
    int fd;
    uint64_t begin, length;
    uint8_t* dst;
  };
  std::vector<Read> reads;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].kind == memory::SlotAssignment::kForced) {
      // Create guarantees a layer's experts fit.
      return absl::InternalError("host tier: no slot for an expert of one step");
    }
    out[i] = SlicesIn(got[i].slot, layer, experts[i]);
    if (got[i].kind != memory::SlotAssignment::kMiss) continue;
    from_disk[i] = true;
    uint8_t* base = SlotBase(got[i].slot);
    for (int p = 0; p < 3; ++p) {
      const Part& part = layers_[layer][p];
      const uint64_t off = FileOffset(layer, p, experts[i]);
      const uint64_t begin = AlignDown(off);
      reads.push_back({fds_[part.file], begin, AlignUpDirect(off + part.stride) - begin,
                       base});
      base += part_bytes_[p];
    }
  }
  std::atomic<int> failed_errno{0};
  pool_->ParallelFor(static_cast<int64_t>(reads.size()), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const Read& rd = reads[r];
      uint64_t done = 0;
      while (done < rd.length) {
        const ssize_t n = pread(rd.fd, rd.dst + done, rd.length - done, rd.begin + done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          // A short read at the end of the file is the aligned span running
          // past it: the slice itself was read.
          if (n == 0 && done > 0) break;
          failed_errno.store(n < 0 ? errno : EIO);
          break;
        }
        done += static_cast<uint64_t>(n);
      }
    }
  });
  if (failed_errno.load() != 0) {
    return absl::DataLossError(absl::StrCat("host tier: reading layer ", layer,
                                            "'s experts from disk: ",
                                            std::strerror(failed_errno.load())));
  }
  return absl::OkStatus();
}

}  // namespace sluice
