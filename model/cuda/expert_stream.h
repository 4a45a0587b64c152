// Routed experts streamed into a fixed device arena of equal slots, with
// memory::SlotCache deciding which (layer, expert) each slot holds.
//
// Sources: the expert tensors of the read-only mapping, registered with the
// driver once in large page-aligned windows (read-only, mapped), so a miss
// is one DMA from the page cache at full PCIe speed, and an expert without
// a slot can be read in place by the kernels through its mapped device
// address ("forced": computed without taking a slot).
//
// The per-layer device pointer tables the grouped products read (gate then
// up, [2 x n_expert]; down, [n_expert]) always point somewhere valid: at the
// expert's slot when it holds one, at its registered host bytes otherwise.
// Acquire makes the routed experts of one layer resident (as far as slots
// allow), enqueues their copies on a copy stream and, on the compute stream,
// waits for those copies and rewrites the layer's tables. Numbers never
// change: only where the kernels read the same bytes from.
//
// Slot classes: layers whose expert slices have the same sizes share one
// class (one SlotCache, slots of one size); a Q4_K_M-like mix has two
// (ffn_down_exps in Q6_K or Q4_K). Slots are split among classes in
// proportion to their layers.
//
// Thread-safety: used by one forward pass at a time (the model's lock);
// Stats may be read concurrently.
#ifndef SLUICE_MODEL_CUDA_EXPERT_STREAM_H_
#define SLUICE_MODEL_CUDA_EXPERT_STREAM_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cuda/device.h"
#include "memory/miss_split.h"
#include "memory/prefetch_budget.h"
#include "memory/slot_cache.h"
#include "model/cuda/host_tier.h"
#include "model/expert_skip.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/weights.h"

namespace sluice {

// One layer's routed experts as they lie in the mapping.
struct LayerExpertViews {
  ExpertMatrix gate, up, down;
};

struct ExpertStreamOptions {
  // Total device slots over all classes; clamped to the number of experts.
  int64_t slots = 0;
  std::string policy = "lru";
  // 0: the mapping's expert pages are registered with the driver (the
  // experts must fit in host RAM). Otherwise a pinned host tier of this
  // many bytes in front of O_DIRECT disk reads (host_tier.h); `files` must
  // then be set.
  uint64_t host_tier_bytes = 0;
  const ModelFiles* files = nullptr;
  // The host tier's eviction policy (memory::MakePolicy's names; "": the
  // default).
  std::string host_tier_policy = memory::kDefaultHostTierPolicy;
  // With a host tier: an expert lives in the device arena or the host tier,
  // not both (host_tier.h): a device victim is copied down into the tier
  // (its policy willing) before its slot is refilled, and an expert moved
  // up leaves the tier.
  bool exclusive_tiers = false;
  // Where decode misses are computed (memory/miss_split.h); kCopy keeps
  // the logits bit-identical.
  memory::MissSplitOptions miss;
  // --expert_skip is on: skipped experts point at the zeroed block, which
  // then exists even under the copy policy.
  bool skipping = false;
};

// A routed expert the host CPU computes for this step instead of the
// device: its position in the Acquire call, its id and its weights in host
// memory (the mapping or a pinned host-tier slot).
struct HostExpert {
  int index = 0;
  int32_t expert = 0;
  ExpertWeights weights;
};

class ExpertStream {
 public:
  // Registers the mapping's expert windows, allocates the arena and the
  // pinned table mirrors, points every table entry at the host bytes.
  // `gate_up_tables[l]` / `down_tables[l]` are the device tables of layer l
  // (2 x n_expert and n_expert pointers). Errors: InvalidArgument for a bad
  // policy or inconsistent layers; RESOURCE_EXHAUSTED when the arena does not
  // fit (bytes needed and free); the driver's error when registration fails.
  static absl::StatusOr<std::unique_ptr<ExpertStream>> Create(
      std::vector<LayerExpertViews> layers,
      std::vector<void*> gate_up_tables, std::vector<void*> down_tables,
      const ExpertStreamOptions& options, cuda::Stream compute);
  ~ExpertStream();

  // Layer `layer`'s routed experts `experts` (distinct ids) are about to be
  // computed on `compute`. Precondition: every kernel that read a slot
  // before this call has completed (the caller synchronised `compute` to
  // read the routing back), so slots of earlier steps may be refilled.
  //
  // With `on_host` (decode) and a miss policy other than copy, the misses
  // are first split (memory::MissSplitter): those the host is to compute
  // are returned there, take no slot, and their table entries point at a
  // zeroed block, so the device's products for them are exactly zero and
  // the caller adds the host's results. Their bytes stay where they are
  // (a host-tier slot holding one is kept until the next Acquire).
  //
  // With `pending`, the compute stream does not wait for this call's
  // copies: `pending` receives the experts they fill (the others of
  // `experts` are ready on `compute` at once), and the caller runs
  // WaitForCopies(compute) before any kernel reads those.
  //
  // `skipped` (--expert_skip; distinct from `experts`): experts of this
  // step that are not computed. They take no slot and are not looked up;
  // their table entries point at the zeroed block, so the device's products
  // for them are exactly zero (the caller rescales the token's other
  // weights), and they count in Stats().counters.skipped.
  absl::Status Acquire(int layer, absl::Span<const int32_t> experts,
                       cuda::Stream compute,
                       std::vector<HostExpert>* on_host = nullptr,
                       std::vector<int32_t>* pending = nullptr,
                       absl::Span<const int32_t> skipped = {});

  // Whether expert `expert` of stream layer `layer` has its bytes in memory:
  // in a device slot or in the host tier, or anywhere without a host tier
  // (the mapping's registered pages). --expert_skip's residency.
  bool InMemory(int layer, int32_t expert) const;
  // Makes `compute` wait for the last Acquire's copies.
  absl::Status WaitForCopies(cuda::Stream compute) const {
    return cuda::StreamWaitEvent(compute, copied_);
  }

  // The host computed experts totalling `bytes` in `seconds` (feeds the
  // miss policy's cost model).
  void ObserveHost(uint64_t bytes, double seconds) {
    splitter_.ObserveHost(bytes, seconds);
  }
  const memory::MissSplitter& splitter() const { return splitter_; }

  // Ends a decode step: whether the next decode step runs the host path
  // (memory::MissSplitter::EndStep over this stream's layers; always false
  // for copy, always true for host). The caller runs the graph variant with
  // the host's segments exactly when it returns true; Acquire gives the host
  // a share only then.
  bool EndDecodeStep() {
    return splitter_.EndStep(static_cast<int>(layers_.size()));
  }
  bool host_path() const { return splitter_.host_path(); }


  // Brings layer `layer`'s predicted experts (most likely first) into slots
  // ahead of demand, on a low-priority stream that waits for this step's
  // demand copies first. Only experts that are not resident and find an
  // evictable slot move (the step in flight stays protected), at most the
  // layer's learnt budget of them (memory/prefetch_budget.h;
  // SLUICE_CUDA_PREFETCH_BUDGET=0: all). The layer's Acquire makes the
  // compute stream wait for these copies when it demands one still in
  // flight (a late prefetch). Same precondition as Acquire.
  absl::Status Prefetch(int layer, absl::Span<const int32_t> experts,
                        cuda::Stream compute);

  // Fills free slots with `keys` (most used first: a usage profile's
  // memory::PlanWarmStart) before the first request, without counting
  // lookups (the cache's Offer): each class until its slots are full, the
  // rest skipped. Bytes come from the mapping, or through the host tier
  // (read from disk where it lacks them). Returns the experts placed;
  // returns once their copies are done.
  absl::StatusOr<int64_t> Warm(absl::Span<const memory::ExpertKey> keys, cuda::Stream compute);

  // Places `keys` (PlanWarmStart's host list) in the host tier, read from
  // disk, until it is full: the number placed (0 without a host tier).
  absl::StatusOr<int64_t> WarmHost(absl::Span<const memory::ExpertKey> keys) {
    if (host_ == nullptr) return 0;
    return host_->Warm(keys);
  }

  int64_t slots() const { return total_slots_; }
  // The host tier's slots (staging apart); 0 without one.
  int64_t host_slots() const { return host_ == nullptr ? 0 : host_->slots(); }
  uint64_t arena_bytes() const;
  ExpertStreamStats Stats() const;

 private:
  struct SlotClass {
    uint64_t gate_bytes = 0, up_bytes = 0, down_bytes = 0;
    // In a slot: gate at 0, up and down at these offsets, each 256-byte
    // aligned; slot_bytes is the whole.
    uint64_t up_offset = 0, down_offset = 0, slot_bytes = 0;
    uint64_t expert_bytes() const { return gate_bytes + up_bytes + down_bytes; }
    std::vector<int> layers;
    std::unique_ptr<memory::SlotCache> cache;
    cuda::DeviceBuffer arena;
    // One zeroed slot (a miss policy other than copy): what the tables of a
    // host-computed expert point at. Every supported type decodes all-zero
    // bytes to 0 (each block's scale is 0).
    cuda::DeviceBuffer zero;
  };
  ExpertStream() = default;
  // Groups layers_ into classes_ by slice sizes (class_of_ per layer).
  absl::Status BuildClasses();
  // Splits options.slots among the classes in proportion to their layers
  // and allocates each class's cache, arena (and zeroed slot).
  absl::Status AllocateArena(const ExpertStreamOptions& options, cuda::Stream compute);
  // Registers the mapping's expert pages with the driver (no host tier).
  absl::Status RegisterWindows();
  // The device address of host bytes inside a registered window.
  const void* Mapped(const uint8_t* host) const;
  void* SlotAddress(const SlotClass& c, int32_t slot) const {
    return c.arena.as<uint8_t>() + static_cast<uint64_t>(slot) * c.slot_bytes;
  }
  // Points layer l's entries for `expert` at `gate` (up and down follow at
  // their offsets when in a slot) in the host mirror.
  void PointAtSlot(int layer, int32_t expert, const SlotClass& c,
                   int32_t slot);
  void PointAtHost(int layer, int32_t expert);
  // Points the entries of `expert` at its class's zeroed slot (host
  // computed this step) and remembers to point them back.
  void PointAtZero(int layer, int32_t expert);
  // Points the entries zeroed at layer `layer`'s previous step back at the
  // expert's bytes, unless something moved it into a slot since.
  void RestoreZeroed(int layer, std::vector<int>& dirty);
  // The host experts (on_host) among `experts`: the last of the misses the
  // host can reach, as many as the miss policy says (none while its host
  // path is off). Positions into `experts`.
  std::vector<size_t> SplitMisses(int layer, absl::Span<const int32_t> experts,
                                  const SlotClass& c);
  // Weights of `expert` of `layer` at `from` (its slices).
  ExpertWeights WeightsAt(int layer, int32_t expert,
                          const HostTier::Slices& from) const;
  // Waits for copies out of host slots (with a host tier) and completes the
  // prefetches whose copies landed: true when some are still in flight
  // (a kernel reading one must wait for them). Tells the budget, once a
  // batch, whether it had landed when `layer`'s Acquire came.
  absl::StatusOr<bool> SettlePrefetches(int layer);
  void CompletePrefetches();
  // `all` split into the device's `experts` and the miss policy's
  // `host_ids` (listed in on_host), none for copy or without on_host.
  void SplitHostShare(int layer, absl::Span<const int32_t> all, const SlotClass& c,
                      std::vector<HostExpert>* on_host, std::vector<int32_t>& experts,
                      std::vector<int32_t>& host_ids);
  // Where the bytes of a step's non-resident experts are: per device
  // expert (from, from_disk; unset for hits) and per host expert.
  struct Sources {
    std::vector<HostTier::Slices> from;
    std::vector<bool> from_disk;
    std::vector<HostTier::Slices> host_from;
  };
  absl::Status FindSources(int layer, absl::Span<const int32_t> experts,
                           absl::Span<const memory::SlotAssignment> got,
                           absl::Span<const int32_t> host_ids, Sources& s);
  // Queues the fills (and exclusive demotions) of the step's misses and
  // points the tables; forced experts are read in place. The bytes queued.
  absl::StatusOr<uint64_t> PlaceMisses(int layer, SlotClass& c,
                                       absl::Span<const int32_t> experts,
                                       absl::Span<const memory::SlotAssignment> got,
                                       const Sources& s, std::vector<int>& dirty);
  // Feeds the cost model the last demand copies once they completed.
  absl::Status ObserveCopies();
  // Adds the copies of the slices of `expert` of `layer` into `slot` to
  // the batch and points the tables there; Flush issues the batch on
  // `stream` as one call (the per-copy cost of ~18 small copies per decode
  // layer, hundreds per prefill layer, otherwise adds up).
  void Fill(int layer, int32_t expert, const SlotClass& c, int32_t slot,
            const HostTier::Slices& from);
  // Exclusive tiers: `victim`, evicted from `slot` of `c`, is offered to
  // the host tier; taken, its slices are copied down from the slot by the
  // next Flush, ahead of the fills that overwrite it.
  absl::Status Demote(const SlotClass& c, int32_t slot, memory::ExpertKey victim);
  // Issues the demotions, then the fills, on `stream`.
  absl::Status Flush(cuda::Stream stream);
  struct CopyBatch {
    std::vector<void*> dst;
    std::vector<const void*> src;
    std::vector<size_t> size;
    void Add(void* d, const void* s, size_t n) {
      dst.push_back(d);
      src.push_back(s);
      size.push_back(n);
    }
    void Clear() {
      dst.clear();
      src.clear();
      size.clear();
    }
  };
  CopyBatch batch_;     // host to device
  CopyBatch demote_;    // device to host, flushed first
  bool exclusive_ = false;
  // The slices of `expert` in the mapping.
  HostTier::Slices InMapping(int layer, int32_t expert) const;
  // Rewrites the device table of layer `now` from its mirror on `compute`
  // if it is among `layers`; the others of `layers` are marked stale and
  // rewritten by their own next Acquire, before any kernel reads them (an
  // eviction touches another layer's table; uploading it at once cost a
  // copy per such layer on every step).
  absl::Status Upload(const std::vector<int>& layers, int now,
                      cuda::Stream compute);

  struct Window {
    const uint8_t* begin;
    const uint8_t* end;
    const uint8_t* device;  // mapped device address of begin
  };

  std::vector<LayerExpertViews> layers_;
  std::vector<void*> gate_up_tables_, down_tables_;
  std::vector<int> class_of_;  // layer -> index into classes_
  std::vector<SlotClass> classes_;
  std::vector<Window> windows_;  // registered, sorted by begin
  int n_expert_ = 0;
  int64_t total_slots_ = 0;
  std::string policy_;
  // Pinned mirrors of every layer's tables: [3 x n_expert] per layer (gate,
  // up, down), copied to the device tables after a change.
  cuda::PinnedBuffer mirror_;
  const void** mirror(int layer) const {
    return mirror_.as<const void*>() +
           static_cast<uint64_t>(layer) * 3 * n_expert_;
  }
  cuda::Stream copy_ = nullptr;
  cuda::Event copied_ = nullptr;
  // Timing of the last batch of demand copies (copy_started_ .. copied_),
  // and its bytes until observed.
  cuda::Event copy_started_ = nullptr;
  uint64_t copy_bytes_pending_ = 0;
  memory::MissSplitter splitter_{{}};
  // Per layer: experts whose entries point at the zeroed slot.
  std::vector<std::vector<int32_t>> zeroed_;
  // Per layer: the mirror changed since the device table was written.
  std::vector<bool> stale_;
  // Prefetches in flight: their keys (completed at the next Acquire) and
  // the event after their copies.
  cuda::Stream prefetch_ = nullptr;
  cuda::Event prefetched_ = nullptr;
  std::vector<memory::ExpertKey> in_flight_;
  // The layer of the batch in flight and whether its landing was observed.
  int prefetch_layer_ = -1;
  bool prefetch_observed_ = true;
  memory::PrefetchBudget budget_{0, {}};
  // Host seconds spent issuing copies (Flush) and table uploads (Upload).
  double issue_s_ = 0, upload_s_ = 0;
  // Set when the experts do not live in registered host memory.
  std::unique_ptr<HostTier> host_;
  uint64_t skipped_ = 0;  // experts skipped since creation (Acquire)
  // The fewest bytes an inclusive host tier takes (HostTier::MinBytes).
  uint64_t host_tier_min_bytes_ = 0;
};

// SLUICE_CUDA_COPY_PER_EXPERT (expert_stream.cc): a layer's demand copies
// issued expert by expert; settable at any time (tests).
void SetCopyPerExpertEnabled(bool enabled);

// --expert_skip's residency on the device path (model/expert_skip.h): the
// layers it is asked about are the stream's layers.
class StreamResidency final : public ExpertResidency {
 public:
  explicit StreamResidency(const ExpertStream& stream) : stream_(stream) {}
  bool Resident(int64_t layer, int32_t expert) const override {
    return stream_.InMemory(static_cast<int>(layer), expert);
  }

 private:
  const ExpertStream& stream_;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_EXPERT_STREAM_H_
