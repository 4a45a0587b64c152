#include "model/cuda/host_tier.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
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

uint64_t HostTier::MinBytes(const std::vector<std::array<ExpertMatrix, 3>>& layers,
                            bool exclusive) {
  const uint64_t n_expert = layers.empty() ? 0 : layers[0][0].n_expert;
  return SlotBytes(layers) * n_expert * (exclusive ? 2 : 1);
}

absl::StatusOr<std::unique_ptr<HostTier>> HostTier::Create(
    const ModelFiles& files, std::vector<std::array<ExpertMatrix, 3>> layers,
    const Options& options) {
  if (options.read_piece_bytes % memory::kDirectAlign != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host tier: read pieces of ", options.read_piece_bytes,
        " bytes are not a multiple of ", memory::kDirectAlign));
  }
  auto t = std::unique_ptr<HostTier>(new HostTier());
  t->read_piece_bytes_ = options.read_piece_bytes;
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
  RETURN_IF_ERROR(t->Allocate(options, n_expert));
  memory::SlotCacheOptions o;
  o.n_layer = static_cast<int32_t>(layers.size());
  o.n_expert = n_expert;
  o.n_slots = static_cast<int32_t>(t->n_slots_);
  o.slice_bytes = t->slot_bytes_;
  ASSIGN_OR_RETURN(std::unique_ptr<memory::EvictionPolicy> chosen,
                   memory::MakePolicy(options.policy.empty()
                                          ? memory::kDefaultHostTierPolicy
                                          : options.policy));
  ASSIGN_OR_RETURN(t->cache_, memory::SlotCache::Create(o, std::move(chosen)));
  t->pool_ = std::make_unique<ThreadPool>(std::max(1, options.threads));
  RETURN_IF_ERROR(t->ChooseReader(options));
  return t;
}

absl::Status HostTier::ChooseReader(const Options& options) {
  Options::Reader want = options.reader;
  if (want == Options::Reader::kAuto) {
    const char* env = std::getenv("SLUICE_HOST_TIER_READER");
    if (env != nullptr && std::string_view(env) == "threads") want = Options::Reader::kThreads;
  }
  if (want == Options::Reader::kThreads) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<memory::UringReader>> r = memory::UringReader::Create(
      {.queue_depth = kUringDepth, .buffers = {absl::MakeSpan(memory_, bytes_)}});
  if (r.ok()) {
    uring_ = *std::move(r);
    return absl::OkStatus();
  }
  if (want == Options::Reader::kUring) {
    return absl::FailedPreconditionError(
        absl::StrCat("host tier: io_uring: ", r.status().message()));
  }
  std::fprintf(stderr, "host tier: io_uring unavailable (%s); reading with %d threads\n",
               std::string(r.status().message()).c_str(), std::max(1, options.threads));
  return absl::OkStatus();
}

absl::Status HostTier::Allocate(const Options& options, int32_t n_expert) {
  const int64_t all = static_cast<int64_t>(options.bytes / slot_bytes_);
  staging_slots_ = options.exclusive ? n_expert : 0;
  n_slots_ = all - staging_slots_;
  if (n_slots_ < n_expert) {
    const int64_t need = n_expert + staging_slots_;
    return absl::InvalidArgumentError(absl::StrCat(
        "host tier: ", options.bytes, " bytes hold ", all, " expert slices of ",
        slot_bytes_, " bytes; one layer's ", n_expert, " experts need at least ",
        need * slot_bytes_, " bytes",
        options.exclusive ? " (room for them twice: exclusive tiers stage disk reads apart)"
                          : ""));
  }
  bytes_ = static_cast<uint64_t>(all) * slot_bytes_;
  if (options.pinned) {
    ASSIGN_OR_RETURN(pinned_, cuda::PinnedBuffer::Create(bytes_));
    memory_ = pinned_.as<uint8_t>();
  } else {
    plain_.reset(static_cast<uint8_t*>(std::aligned_alloc(memory::kDirectAlign, bytes_)));
    if (plain_ == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("host tier: cannot allocate ", bytes_, " bytes"));
    }
    memory_ = plain_.get();
  }
  return absl::OkStatus();
}

HostTier::~HostTier() {
  for (int fd : fds_) close(fd);
}

HostTier::Destinations HostTier::SlicesAt(uint8_t* base, int layer, int32_t expert) const {
  Destinations s;
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
  return Read(SlicesAt(SlotBase(*slot), layer, expert));
}

void HostTier::AddReads(int layer, int32_t expert, uint8_t* base,
                        std::vector<DirectRead>& reads) const {
  for (int p = 0; p < 3; ++p) {
    const Part& part = layers_[layer][p];
    reads.push_back(memory::AlignedSpan(fds_[part.file], FileOffset(layer, p, expert),
                                        part.stride, base));
    base += part_bytes_[p];
  }
}

absl::Status HostTier::ReadAll(std::vector<DirectRead> reads, absl::string_view what) {
  // In file order: a prefill chunk's layer reads most of its experts, and
  // a disk serves ascending offsets best (issue 22: "in file order").
  std::sort(reads.begin(), reads.end(), [](const DirectRead& a, const DirectRead& b) {
    return a.fd != b.fd ? a.fd < b.fd : a.offset < b.offset;
  });
  // Pieces are taken by whichever reader is free. Whole slices (3 per
  // expert) handed out in equal-count ranges, as before, left readers idle
  // when a call had few misses or a slice count that does not divide among
  // them (k = 10: 30 slices over 8 readers take 4 rounds where 3.75 would
  // do); with pieces every reader stays busy until the call's last piece.
  if (read_piece_bytes_ != 0) reads = memory::SplitReads(reads, read_piece_bytes_);
  absl::Status read;
  if (uring_ != nullptr) {
    uring_->Submit(reads);
    read = uring_->WaitAll();
  } else {
    read = memory::ReadAll(*pool_, reads);
  }
  if (!read.ok()) {
    return absl::DataLossError(
        absl::StrCat("host tier: reading ", what, " from disk: ", read.message()));
  }
  return absl::OkStatus();
}

absl::Status HostTier::Load(int layer, absl::Span<const int32_t> experts,
                            std::vector<Slices>& out, std::vector<bool>& from_disk,
                            absl::Span<const bool> pass_through) {
  cache_->BeginStep();
  out.assign(experts.size(), Slices{});
  from_disk.assign(experts.size(), false);
  // Exclusive device misses the tier lacks go to staging; the rest are
  // looked up (and kept).
  std::vector<int32_t> kept;
  std::vector<size_t> kept_at, staged_at;
  for (size_t i = 0; i < experts.size(); ++i) {
    const bool pass = exclusive() && i < pass_through.size() && pass_through[i];
    if (pass && !cache_->Peek({layer, experts[i]}).has_value()) {
      staged_at.push_back(i);
    } else {
      kept.push_back(experts[i]);
      kept_at.push_back(i);
    }
  }
  ASSIGN_OR_RETURN(std::vector<memory::SlotAssignment> got,
                   cache_->Acquire(layer, kept));
  std::vector<DirectRead> reads;
  for (size_t j = 0; j < got.size(); ++j) {
    if (got[j].kind == memory::SlotAssignment::kForced) {
      // Create guarantees a layer's experts fit.
      return absl::InternalError("host tier: no slot for an expert of one step");
    }
    const size_t i = kept_at[j];
    out[i] = Read(SlicesAt(SlotBase(got[j].slot), layer, experts[i]));
    if (got[j].kind != memory::SlotAssignment::kMiss) continue;
    from_disk[i] = true;
    AddReads(layer, experts[i], SlotBase(got[j].slot), reads);
  }
  for (size_t j = 0; j < staged_at.size(); ++j) {
    const size_t i = staged_at[j];
    out[i] = Read(SlicesAt(StagingBase(static_cast<int64_t>(j)), layer, experts[i]));
    from_disk[i] = true;
    AddReads(layer, experts[i], StagingBase(static_cast<int64_t>(j)), reads);
  }
  return ReadAll(std::move(reads), absl::StrCat("layer ", layer, "'s experts"));
}

void HostTier::Promote(int layer, int32_t expert) { cache_->Remove({layer, expert}); }

absl::StatusOr<std::optional<HostTier::Destinations>> HostTier::Demote(int layer,
                                                                       int32_t expert) {
  ASSIGN_OR_RETURN(const memory::SlotAssignment a, cache_->Offer({layer, expert}));
  if (a.kind != memory::SlotAssignment::kMiss) return std::nullopt;
  return SlicesAt(SlotBase(a.slot), layer, expert);
}

absl::StatusOr<int64_t> HostTier::Warm(absl::Span<const memory::ExpertKey> keys) {
  cache_->BeginStep();
  std::vector<DirectRead> reads;
  int64_t placed = 0;
  for (const memory::ExpertKey& k : keys) {
    if (k.layer < 0 || k.layer >= static_cast<int32_t>(layers_.size())) continue;
    ASSIGN_OR_RETURN(const memory::SlotAssignment a, cache_->Offer(k));
    if (a.kind != memory::SlotAssignment::kMiss) continue;
    // Offers protect what they placed through the step: a full cache
    // refuses the rest instead of evicting this call's own keys.
    AddReads(k.layer, k.expert, SlotBase(a.slot), reads);
    ++placed;
  }
  RETURN_IF_ERROR(ReadAll(std::move(reads), "a usage profile's experts"));
  return placed;
}

}  // namespace sluice
