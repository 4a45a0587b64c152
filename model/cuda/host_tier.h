// The host tier of the expert cache for checkpoints whose experts do not fit
// in host RAM: a fixed pinned cache of expert slices (memory::SlotCache;
// policy memory::kDefaultHostTierPolicy unless told otherwise) in front of
// the disk. Misses are read with O_DIRECT (never through
// the page cache, which this tier would otherwise fight for the same RAM)
// by a pool of persistent threads, straight into pinned slots, from which
// the device copies them (or reads them in place). A call's missed slices
// are read in 1 MiB pieces taken by whichever reader is free
// (memory/direct_read.h), so a few large slices still keep every reader busy.
//
// A host slot holds one expert's gate, up and down slices, each read as the
// 4096-byte-aligned span around it (O_DIRECT's rule), so a slice starts a
// few bytes into its part of the slot.
//
// Thread-safety: one caller at a time (the model's forward lock).
#ifndef SLUICE_MODEL_CUDA_HOST_TIER_H_
#define SLUICE_MODEL_CUDA_HOST_TIER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/thread_pool.h"
#include "kernels/cuda/device.h"
#include "memory/slot_cache.h"
#include "model/weights.h"

namespace sluice {

class ModelFiles;

class HostTier {
 public:
  // Pointers to one expert's slices in a host slot (pinned: the device can
  // copy from them at full speed or read them in place).
  using Slices = std::array<const uint8_t*, 3>;

  // `bytes` of pinned slots; at least one layer's experts must fit (a step
  // never needs more). InvalidArgument otherwise (with the numbers); the
  // driver's error when pinning fails; the OS error when a shard cannot be
  // reopened with O_DIRECT.
  // `threads` readers; each missed slice is read in pieces of
  // `read_piece_bytes` (a multiple of 4096; 0: whole slices), which
  // tools/coldread compares. `policy`: memory::MakePolicy's names
  // (InvalidArgument for another).
  static constexpr uint64_t kDefaultReadPieceBytes = uint64_t{1} << 20;
  static absl::StatusOr<std::unique_ptr<HostTier>> Create(
      const ModelFiles& files, std::vector<std::array<ExpertMatrix, 3>> layers,
      uint64_t bytes, int threads,
      uint64_t read_piece_bytes = kDefaultReadPieceBytes,
      std::string_view policy = memory::kDefaultHostTierPolicy);
  ~HostTier();

  // Bytes of one pinned slot for these layers' experts (each slice's aligned
  // span, the largest over the layers): Create needs at least n_expert of
  // them.
  static uint64_t SlotBytes(const std::vector<std::array<ExpertMatrix, 3>>& layers);

  // Makes every expert of `experts` (distinct, of `layer`) present, reading
  // the missing ones from disk in parallel; they stay put until the next
  // Load. out[i] are experts[i]'s slices; from_disk[i] says whether it was
  // read now.
  absl::Status Load(int layer, absl::Span<const int32_t> experts,
                    std::vector<Slices>& out, std::vector<bool>& from_disk);
  // The slices of `expert` when the tier holds it (no lookup counted).
  std::optional<Slices> Peek(int layer, int32_t expert) const;

  int64_t slots() const { return n_slots_; }
  uint64_t bytes() const { return pinned_.bytes(); }
  memory::SlotCacheCounters Snapshot() const { return cache_->Snapshot(); }

 private:
  struct Part {
    int file = 0;         // index into fds_
    uint64_t offset = 0;  // of expert 0's slice in that file
    uint64_t stride = 0;  // slice bytes
  };
  HostTier() = default;
  Slices SlicesIn(int32_t slot, int layer, int32_t expert) const;
  // Where part p (gate, up, down) of `expert` of `layer` starts in its file.
  uint64_t FileOffset(int layer, int p, int32_t expert) const {
    const Part& part = layers_[layer][p];
    return part.offset + static_cast<uint64_t>(expert) * part.stride;
  }
  uint8_t* SlotBase(int32_t slot) const {
    return pinned_.as<uint8_t>() + static_cast<uint64_t>(slot) * slot_bytes_;
  }

  std::vector<std::array<Part, 3>> layers_;
  std::array<uint64_t, 3> part_bytes_{};  // span reserved per part in a slot
  uint64_t slot_bytes_ = 0;
  uint64_t read_piece_bytes_ = 0;  // 0: whole slices
  int64_t n_slots_ = 0;
  std::vector<int> fds_;  // O_DIRECT, one per shard
  cuda::PinnedBuffer pinned_;
  std::unique_ptr<memory::SlotCache> cache_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_HOST_TIER_H_
