// The host tier of the expert cache for checkpoints whose experts do not fit
// in host RAM: a fixed pinned cache of expert slices (memory::SlotCache;
// policy memory::kDefaultHostTierPolicy unless told otherwise) in front of
// the disk. Misses are read with O_DIRECT (never through
// the page cache, which this tier would otherwise fight for the same RAM)
// by a pool of persistent threads, straight into pinned slots, from which
// the device copies them (or reads them in place). A call's missed slices
// are read in 1 MiB pieces, in file order, through io_uring
// (memory/uring_reader.h: a deep queue from one thread, the slots registered
// with the ring), or, where the kernel refuses io_uring or
// SLUICE_HOST_TIER_READER=threads says so, by a pool of pread threads taking
// pieces as they come free (memory/direct_read.h). On this development
// machine's disk io_uring read about twice what 8 threads did
// (docs/SLOT_CACHE.md); the GPU machine's disk is measured by tools/coldread.
//
// A host slot holds one expert's gate, up and down slices, each read as the
// 4096-byte-aligned span around it (O_DIRECT's rule), so a slice starts a
// few bytes into its part of the slot.
//
// Inclusive (the default): every expert Load brings in stays in the tier,
// so an expert the device holds usually has a host copy too. Exclusive
// (memory/expert_tiers.h, the design): an expert lives in the device arena
// or in this tier, not both, so the two hold D + H distinct experts instead
// of about max(D, H). The caller then
//   - Loads a device miss with `pass_through`: found here, it is held
//     through the step (and Promoted, its slot freed, once the device copy
//     is queued); not found, it is read from disk into one of n_expert
//     staging slots kept outside the cache, and takes no slot here;
//   - Demotes each device victim: the tier's policy may take it (a slot to
//     copy it into, before the device slot is refilled) or refuse it.
// Staging and cache share the pinned bytes: exclusive needs 2 x n_expert
// slots at least.
//
// Thread-safety: one caller at a time (the model's forward lock).
#ifndef SLUICE_MODEL_CUDA_HOST_TIER_H_
#define SLUICE_MODEL_CUDA_HOST_TIER_H_

#include <array>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/thread_pool.h"
#include "kernels/cuda/device.h"
#include "memory/direct_read.h"
#include "memory/slot_cache.h"
#include "memory/uring_reader.h"
#include "model/weights.h"

namespace sluice {

class ModelFiles;

class HostTier {
 public:
  // Pointers to one expert's slices in a host slot (pinned: the device can
  // copy from them at full speed or read them in place).
  using Slices = std::array<const uint8_t*, 3>;

  static constexpr uint64_t kDefaultReadPieceBytes = uint64_t{1} << 20;
  // Reads in the kernel at once through io_uring (coldread measured 32 and
  // 64 alike on this development machine).
  static constexpr uint32_t kUringDepth = 64;
  struct Options {
    uint64_t bytes = 0;  // of slots (staging included when exclusive)
    int threads = 8;     // disk readers
    // Each missed slice is read in pieces of this many bytes (a multiple
    // of 4096; 0: whole slices), which tools/coldread compares.
    uint64_t read_piece_bytes = kDefaultReadPieceBytes;
    // MakePolicy's names; "": memory::kDefaultHostTierPolicy.
    std::string policy = memory::kDefaultHostTierPolicy;
    bool exclusive = false;
    // false: plain page-aligned memory instead of pinned (tests without a
    // GPU; the device cannot DMA from it at full speed).
    bool pinned = true;
    // How misses are read: kAuto is io_uring unless the kernel refuses it
    // or SLUICE_HOST_TIER_READER=threads; kThreads the pread pool.
    enum class Reader { kAuto, kUring, kThreads };
    Reader reader = Reader::kAuto;
  };
  // At least one layer's experts must fit in the cache (a step never needs
  // more), and exclusive needs as many staging slots again: InvalidArgument
  // otherwise (with the numbers), also for a policy name MakePolicy does
  // not know or a piece size that is not a multiple of 4096; the driver's
  // error when pinning fails; the OS error when a shard cannot be reopened
  // with O_DIRECT.
  static absl::StatusOr<std::unique_ptr<HostTier>> Create(
      const ModelFiles& files, std::vector<std::array<ExpertMatrix, 3>> layers,
      const Options& options);
  ~HostTier();

  // Bytes of one pinned slot for these layers' experts (each slice's aligned
  // span, the largest over the layers): Create needs at least n_expert of
  // them.
  static uint64_t SlotBytes(const std::vector<std::array<ExpertMatrix, 3>>& layers);
  // The fewest bytes Create accepts for these layers: one layer's experts,
  // twice when exclusive (its staging slots).
  static uint64_t MinBytes(const std::vector<std::array<ExpertMatrix, 3>>& layers,
                           bool exclusive);

  // Makes every expert of `experts` (distinct, of `layer`) present, reading
  // the missing ones from disk in parallel; they stay put until the next
  // Load. out[i] are experts[i]'s slices; from_disk[i] says whether it was
  // read now. Exclusive only: where pass_through[i] is set (a device miss)
  // and the tier lacks experts[i], it is read into a staging slot instead
  // and takes no slot here (valid until the next Load).
  absl::Status Load(int layer, absl::Span<const int32_t> experts,
                    std::vector<Slices>& out, std::vector<bool>& from_disk,
                    absl::Span<const bool> pass_through = {});
  // The slices of `expert` when the tier holds it (no lookup counted).
  std::optional<Slices> Peek(int layer, int32_t expert) const;

  // Exclusive: `expert` moved up into a device slot; its slot here is free
  // from the next Load on (the caller's copy out of it must be done by then).
  void Promote(int layer, int32_t expert);
  // Exclusive: the device evicts `expert`; where to copy its slices (they
  // land there before the next Load reads or refills the slot), or nullopt
  // when the tier holds it already or its policy does not take it over its
  // own victim. Not a lookup (counted as offered / admitted).
  using Destinations = std::array<uint8_t*, 3>;
  absl::StatusOr<std::optional<Destinations>> Demote(int layer, int32_t expert);

  // Places `keys` (a usage profile's most used first) before any lookup,
  // reading them from disk in parallel, until the cache is full: the
  // number placed. Not lookups.
  absl::StatusOr<int64_t> Warm(absl::Span<const memory::ExpertKey> keys);

  int64_t slots() const { return n_slots_; }  // the cache's, staging apart
  // Whether misses are read through io_uring (else the pread pool).
  bool uring() const { return uring_ != nullptr; }
  bool exclusive() const { return staging_slots_ > 0; }
  uint64_t bytes() const { return bytes_; }
  memory::SlotCacheCounters Snapshot() const { return cache_->Snapshot(); }

 private:
  struct Part {
    int file = 0;         // index into fds_
    uint64_t offset = 0;  // of expert 0's slice in that file
    uint64_t stride = 0;  // slice bytes
  };
  HostTier() = default;
  // Splits options.bytes into staging and cache slots and allocates them.
  absl::Status Allocate(const Options& options, int32_t n_expert);
  // The reader options.reader asks for: io_uring over the slots, or the
  // pool (kUring fails where kAuto falls back).
  absl::Status ChooseReader(const Options& options);
  // The slices of `expert` of `layer` in the slot at `base`.
  // (Writable: a demotion copies into them; Read gives the readers' view.)
  Destinations SlicesAt(uint8_t* base, int layer, int32_t expert) const;
  static Slices Read(const Destinations& d) { return {d[0], d[1], d[2]}; }
  // Where part p (gate, up, down) of `expert` of `layer` starts in its file.
  uint64_t FileOffset(int layer, int p, int32_t expert) const {
    const Part& part = layers_[layer][p];
    return part.offset + static_cast<uint64_t>(expert) * part.stride;
  }
  // Cache slot `slot`; staging slots come first.
  uint8_t* SlotBase(int32_t slot) const {
    return StagingBase(staging_slots_ + slot);
  }
  uint8_t* StagingBase(int64_t i) const {
    return memory_ + static_cast<uint64_t>(i) * slot_bytes_;
  }
  // Adds the reads of `expert`'s three slices into the slot at `base`.
  void AddReads(int layer, int32_t expert, uint8_t* base,
                std::vector<memory::DirectRead>& reads) const;
  // Reads `reads` with the pool, in file order, in pieces; DataLoss
  // naming `what`.
  absl::Status ReadAll(std::vector<memory::DirectRead> reads, absl::string_view what);

  std::vector<std::array<Part, 3>> layers_;
  std::array<uint64_t, 3> part_bytes_{};  // span reserved per part in a slot
  uint64_t slot_bytes_ = 0;
  uint64_t read_piece_bytes_ = 0;  // 0: whole slices
  int64_t n_slots_ = 0;        // the cache's
  int64_t staging_slots_ = 0;  // exclusive: n_expert, else 0
  std::vector<int> fds_;  // O_DIRECT, one per shard
  // The slots: pinned_, or plain_ when not pinned.
  cuda::PinnedBuffer pinned_;
  std::unique_ptr<uint8_t, void (*)(void*)> plain_{nullptr, std::free};
  uint8_t* memory_ = nullptr;
  uint64_t bytes_ = 0;
  std::unique_ptr<memory::SlotCache> cache_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<memory::UringReader> uring_;  // or null: the pool reads
};

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_HOST_TIER_H_
