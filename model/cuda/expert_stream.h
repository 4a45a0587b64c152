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
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cuda/device.h"
#include "memory/slot_cache.h"
#include "model/cuda/host_tier.h"
#include "model/model.h"
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
  absl::Status Acquire(int layer, absl::Span<const int32_t> experts,
                       cuda::Stream compute);

  // Brings layer `layer`'s predicted experts into slots ahead of demand, on
  // a low-priority stream, after this step's demand copies were issued.
  // Only experts that are not resident and find an evictable slot move (the
  // step in flight stays protected). The next Acquire makes the compute
  // stream wait for these copies; a prefetched expert demanded while its
  // copy is still running counts as late. Same precondition as Acquire.
  absl::Status Prefetch(int layer, absl::Span<const int32_t> experts,
                        cuda::Stream compute);

  int64_t slots() const { return total_slots_; }
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
  };
  ExpertStream() = default;
  // Groups layers_ into classes_ by slice sizes (class_of_ per layer).
  absl::Status BuildClasses();
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
  // Copies the slices of `expert` of `layer` into `slot` on `stream`.
  absl::Status Fill(int layer, int32_t expert, const SlotClass& c,
                    int32_t slot, const HostTier::Slices& from,
                    cuda::Stream stream);
  // The slices of `expert` in the mapping.
  HostTier::Slices InMapping(int layer, int32_t expert) const;
  // Rewrites the device tables of `layers` from their mirrors on `compute`.
  absl::Status Upload(const std::vector<int>& layers, cuda::Stream compute);

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
  // Prefetches in flight: their keys (completed at the next Acquire) and
  // the event after their copies.
  cuda::Stream prefetch_ = nullptr;
  cuda::Event prefetched_ = nullptr;
  std::vector<memory::ExpertKey> in_flight_;
  // Set when the experts do not live in registered host memory.
  std::unique_ptr<HostTier> host_;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_EXPERT_STREAM_H_
