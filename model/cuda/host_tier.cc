#include "model/cuda/host_tier.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/model_files.h"
#include "memory/direct_read.h"

namespace sluice {

using memory::AlignDownDirect;
using memory::DirectRead;

uint64_t HostTier::SlotBytes(const std::vector<std::array<ExpertMatrix, 3>>& layers) {
  std::array<uint64_t, 3> part{};
  for (const std::array<ExpertMatrix, 3>& l : layers) {
    for (int p = 0; p < 3; ++p) {
      part[p] = std::max(part[p], memory::DirectSpanBytes(l[p].slice_bytes));
    }
  }
  return part[0] + part[1] + part[2];
}

absl::StatusOr<std::unique_ptr<HostTier>> HostTier::Create(
    const ModelFiles& files, std::vector<std::array<ExpertMatrix, 3>> layers,
    uint64_t bytes, int threads, uint64_t read_piece_bytes, std::string_view policy) {
  if (read_piece_bytes % memory::kDirectAlign != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host tier: read pieces of ", read_piece_bytes,
        " bytes are not a multiple of ", memory::kDirectAlign));
  }
  auto t = std::unique_ptr<HostTier>(new HostTier());
  t->read_piece_bytes_ = read_piece_bytes;
  const std::vector<ShardFd> shard_fds = files.fds();
  for (const ShardFd& s : shard_fds) {
    absl::StatusOr<memory::DirectFd> fd = memory::ReopenDirect(s.fd, s.name);
    if (!fd.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("host tier: ", fd.status().message()));
    }
    if (!fd->direct) {
      // Some filesystems (tmpfs, some overlays) refuse O_DIRECT: read through
      // the page cache there, and say so once.
      std::fprintf(stderr,
                   "host tier: %s does not support O_DIRECT; reading it "
                   "through the page cache\n",
                   s.name.c_str());
    }
    t->fds_.push_back(fd->fd);
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
      // The aligned span around any slice.
      t->part_bytes_[p] =
          std::max(t->part_bytes_[p], memory::DirectSpanBytes(m.slice_bytes));
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
  ASSIGN_OR_RETURN(std::unique_ptr<memory::EvictionPolicy> chosen,
                   memory::MakePolicy(policy));
  ASSIGN_OR_RETURN(t->cache_, memory::SlotCache::Create(o, std::move(chosen)));
  t->pool_ = std::make_unique<ThreadPool>(std::max(1, threads));
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
    s[p] = base + (off - AlignDownDirect(off));
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
  // (slot, part) reads of the misses, done by the pool in pieces.
  std::vector<DirectRead> reads;
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
      reads.push_back(memory::AlignedSpan(fds_[part.file], FileOffset(layer, p, experts[i]),
                                          part.stride, base));
      base += part_bytes_[p];
    }
  }
  // Pieces are taken by whichever reader is free. Whole slices (3 per
  // expert) handed out in equal-count ranges, as before, left readers idle
  // when a call had few misses or a slice count that does not divide among
  // them (k = 10: 30 slices over 8 readers take 4 rounds where 3.75 would
  // do); with pieces every reader stays busy until the call's last piece.
  const absl::Status read = memory::ReadAll(
      *pool_, read_piece_bytes_ == 0 ? reads : memory::SplitReads(reads, read_piece_bytes_));
  if (!read.ok()) {
    return absl::DataLossError(absl::StrCat("host tier: reading layer ", layer,
                                            "'s experts from disk: ", read.message()));
  }
  return absl::OkStatus();
}

}  // namespace sluice
