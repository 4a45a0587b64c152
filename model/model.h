// The backend-independent model interface: a forward pass over a batch of
// tokens and the per-sequence state it continues.
//
// The architecture itself (hyper-parameters, tensors, shapes) is described
// once in arch.h and computed by a backend: the CPU (cpu_model.h) reads the
// weights in place from the read-only mapping owned by ModelFiles, which must
// outlive the Model; the CUDA backend (model/cuda) keeps the dense weights on
// the device once.
//
// Thread-safety: Forward and ForwardBatch may run concurrently on
// different states.
#ifndef SLUICE_MODEL_MODEL_H_
#define SLUICE_MODEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/slot_counters.h"

namespace sluice {

class ModelFiles;

struct ModelInfo {
  std::string arch;       // general.architecture: "qwen3moe", "qwen35moe"
  std::string name;       // general.name, or the file name
  std::string file_name;  // first shard
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_rot = 0;  // rotated dims per head
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t expert_ff = 0;
  int64_t shared_ff = 0;  // 0 when there is no shared expert
  int64_t n_attention_layers = 0;
  int64_t n_recurrent_layers = 0;  // Gated DeltaNet blocks
  int64_t train_context_length = 0;
  bool all_f32 = false;       // every tensor is F32
  uint64_t weight_bytes = 0;  // bytes of all tensors
};

// Which rows of a batch produce logits.
enum class LogitRows { kNone, kLast, kAll };

// What every backend's per-sequence state has: the position reached and the
// tokens it can hold. The buffers (KV cache, DeltaNet conv and recurrent
// state) live where the backend computes: host vectors for the CPU (State,
// state.h), device memory for CUDA.
class SequenceState {
 public:
  explicit SequenceState(int capacity) : capacity_(capacity) {}
  virtual ~SequenceState() = default;

  // Tokens evaluated so far; the next token takes this position.
  int position() const { return position_; }
  // Tokens the KV cache can hold.
  int capacity() const { return capacity_; }

  // Called by Model::Forward after a batch has been written.
  // Precondition: position() + n <= capacity().
  void Advance(int n) { position_ += n; }

  // Position 0, every buffer zeroed; the allocation is kept.
  virtual void Reset() = 0;
  // Bytes allocated for all buffers (the KV cache's whole capacity).
  virtual uint64_t bytes() const = 0;
  // Bytes of memory the state holds now: bytes() where the KV cache is
  // allocated whole; on the CPU, whose KV cache is resident only where
  // written (base/demand_pages.h), the written positions' pages and the
  // recurrent state.
  virtual uint64_t resident_bytes() const { return bytes(); }

 protected:
  void set_position(int p) { position_ = p; }

 private:
  int capacity_;
  int position_ = 0;
};

// Routed experts streamed through a device slot cache (CUDA with fewer
// slots than experts, or with the cache forced on). All zero / false when
// every expert is resident or read in place (the CPU), but for the lossy
// mode's fields.
struct ExpertStreamStats {
  bool streaming = false;    // experts come through the slot cache
  // --expert_skip is on (the CPU backend): counters.skipped counts.
  bool skipping = false;
  std::string policy;        // eviction policy name ("lru", ...)
  // Device slots (all slot classes): SlotCacheStats.slots_capacity and
  // sluice_expert_slots_capacity.
  int64_t slots_capacity = 0;
  int64_t experts = 0;       // routed experts in the model (layers x experts)
  uint64_t slot_bytes = 0;   // bytes of one slot (largest slot class)
  uint64_t arena_bytes = 0;  // device bytes of all slots
  uint64_t host_tier_bytes = 0;  // host RAM holding experts for the slots
  // The fewest bytes an inclusive host tier takes for this model (one
  // layer's experts in pinned slots; twice that for exclusive tiers).
  uint64_t host_tier_min_bytes = 0;
  memory::SlotCacheCounters counters;  // since the model was built
  // The pinned host tier's own cache (model/cuda/host_tier.h), when there
  // is one: its lookups (inclusive: every device miss; exclusive: the
  // misses it held), offers_admitted = device victims copied down and
  // removed = experts moved up (exclusive).
  bool host_tier = false;
  bool exclusive_tiers = false;
  memory::SlotCacheCounters host_tier_counters;
  // Where decode misses are computed ("copy", "host", "cost") and the miss
  // policy's current estimates of the two paths (bytes/s).
  std::string miss_policy = "copy";
  double copy_bytes_per_s = 0;
  double host_bytes_per_s = 0;
  // The host path's fixed cost per call (seconds) and, for `cost`, the
  // predicted saving of a step with the host path, smoothed over steps (the
  // path runs when it exceeds 1.5x its cost; docs/SLOT_CACHE.md).
  double host_fixed_s = 0;
  double host_path_saving_s = 0;
  // --expert_prefetch: batches that had landed / were still copying when
  // their layer's routing came back (memory/prefetch_budget.h).
  int64_t prefetch_batches_landed = 0;
  int64_t prefetch_batches_late = 0;
  // Host seconds spent issuing the copies into slots and the table uploads
  // (CUDA; since the model was built).
  double copy_issue_s = 0;
  double table_upload_s = 0;
};

// Where the host's time went in a backend's replayed decode steps (CUDA
// decode programs; zero elsewhere): the steps, their whole time on the
// host, the graph launches, the routing actions (reading a layer's routing
// back, of which routing_wait_s waiting for it, then acquiring its experts)
// and the host's share of the misses. Sums; divide by steps.
struct DecodeHostTimes {
  int64_t steps = 0;
  double step_s = 0;
  double launch_s = 0;
  double routing_s = 0;
  double routing_wait_s = 0;
  double host_experts_s = 0;
  // The host's products alone (the miss policy's measure), by how many
  // experts a call computed: 1, 2-3, 4 or more. Counted in every step.
  int64_t host_calls[3] = {0, 0, 0};
  double host_call_s[3] = {0, 0, 0};
};

// What a backend reports about itself (tools/generate, worker metrics).
struct BackendStats {
  // Device bytes by kind ("dense", "expert_arena", "workspace": the names of
  // sluice_device_memory_bytes's kinds); empty for the CPU. The session's
  // "kv_state" is the engine's (Engine::SessionStateBytes).
  std::vector<std::pair<std::string, uint64_t>> device_memory;
  // Kernel launches one decode step enqueues (0 where not counted).
  int64_t launches_per_decode = 0;
  // Whether decode steps replay a captured CUDA graph.
  bool decode_graph = false;
  // Device memory in use since the model started loading, as the driver
  // reports it (free bytes then minus free bytes now): what the accounting
  // above is checked against.
  uint64_t device_in_use_measured = 0;
  // With profiling on: milliseconds per "<phase>.<section>" summed over the
  // calls so far (phase: prefill for batches, decode for one token), and
  // the number of calls of each phase ("<phase>.calls").
  std::vector<std::pair<std::string, double>> profile;
  ExpertStreamStats experts;
  // Experts placed in the arena and the host tier at load from a usage profile
  // (EngineOptions::expert_warm), and how many the profile's plan named.
  int64_t experts_warmed = 0;
  int64_t experts_warm_planned = 0;
  DecodeHostTimes decode_host;
};

// One launch group of a decode step timed alone (Model::TimeDecodeKernels).
struct KernelTiming {
  std::string label;   // "<layer>.<part>" or "embed", "head"
  uint64_t bytes = 0;  // weight and state bytes it reads (0: not counted)
  int kernels = 0;
  double us = 0;
  std::string launch;  // one kernel's shape ("grid 128x16x1 block 128"), or ""
};

// One sequence's rows in a batched forward pass (Model::ForwardBatch).
struct BatchChunk {
  // The sequence's state (its KV cache and recurrent slot); not owned. No
  // two chunks of one batch share a state.
  SequenceState* state = nullptr;
  // The chunk's first position; must equal state->position(). The batch
  // says where each sequence stands, so a caller whose bookkeeping and the
  // state disagree is refused instead of computing at the wrong positions.
  int position = 0;
  // At positions position .. position + tokens.size() - 1; at least one.
  absl::Span<const int32_t> tokens;
  // kLast: the last row's logits (a sequence that samples next); kAll:
  // every row's; kNone: none (a prefill chunk short of its prompt's end).
  LogitRows rows = LogitRows::kNone;
};

// What a batched pass reports besides its logits.
struct BatchForwardStats {
  // Per block: the distinct routed experts the pass's rows were routed to,
  // i.e. the expert weights it acquired, each once per micro-batch (summed
  // over the micro-batches of a longer pass); 0 for a block without routed
  // experts. Empty where the backend does not count (the default
  // ForwardBatchImpl, which runs the chunks one by one).
  std::vector<int32_t> experts_per_layer;

  // The sum of experts_per_layer: expert acquisitions of the whole pass.
  int64_t experts_acquired() const;
};

// One loaded model on one backend.
class Model {
 public:
  // Tokens per ForwardImpl call (llama.cpp's default n_ubatch).
  static constexpr size_t kMaxMicroBatch = 512;

  virtual ~Model() = default;

  virtual const ModelInfo& info() const = 0;

  // A zeroed state whose KV cache holds `capacity` tokens, allocated where
  // this backend computes. Precondition: capacity >= 1.
  virtual absl::StatusOr<std::unique_ptr<SequenceState>> CreateState(
      int capacity) const = 0;
  // Bytes CreateState(capacity) allocates.
  virtual uint64_t StateBytes(int capacity) const = 0;

  virtual BackendStats Stats() const { return {}; }
  // Stats().experts alone, without the device queries the rest costs (read
  // around every request, and every token when asked).
  virtual ExpertStreamStats ExpertStats() const { return Stats().experts; }

  // Every op of the decode step `state` last ran, replayed alone with the
  // caches flushed before each (median of `reps`): the step's budget op by
  // op. Leaves the state's contents undefined (Reset it). Unimplemented
  // where the backend has no decode program (the CPU).
  virtual absl::StatusOr<std::vector<KernelTiming>> TimeDecodeKernels(
      SequenceState& state, int reps) const {
    return absl::UnimplementedError("this backend times no decode kernels");
  }

  // Evaluates `tokens` at positions state.position() .. + tokens.size() - 1
  // (one sequence; the batch continues it), updates `state` and advances it.
  // Projections run as matrix-matrix products over micro-batches of up to
  // kMaxMicroBatch tokens (bounding activation memory; the result does not
  // depend on the split).
  // *logits (resized) receives n_vocab floats per requested row, row-major:
  // one row for kLast, tokens.size() rows for kAll, nothing for kNone.
  // Errors (state unchanged): InvalidArgument for an empty batch, a token
  // id outside [0, n_vocab) or a state made by another model; OutOfRange
  // when the batch does not fit in the state's capacity; a kernel error is
  // passed through (state undefined). This is ForwardBatch with one chunk.
  absl::Status Forward(absl::Span<const int32_t> tokens, SequenceState& state,
                       LogitRows rows, std::vector<float>* logits) const;

  // Evaluates the chunks of several sequences (continuous batching: one
  // scheduler step) as one pass. Where rows are independent they are
  // computed together (norms, the MoE FFN over the union of the rows'
  // experts, the LM head); where they are not, each chunk alone (its mixer
  // on its own state at its own positions). Each chunk's logits are those
  // Forward(chunk.tokens, *chunk.state, chunk.rows) gives; on the CPU bit
  // for bit (every kernel there computes a row the same whatever the
  // other rows of its call; model/batch_forward_test checks it).
  // *logits (resized) receives the requested rows of chunk 0, then of
  // chunk 1, ..., n_vocab floats each; every state advances by its chunk.
  // More than kMaxMicroBatch rows in all are cut into micro-batches in
  // chunk order (a chunk may straddle two).
  // Errors (every state unchanged): InvalidArgument for no chunks, a chunk
  // without tokens or state, two chunks on one state, a position other
  // than the state's, a token id outside [0, n_vocab), logits requested
  // but null, a state made by another model (the default ForwardBatchImpl
  // finds one only when it reaches its chunk: the states before it are
  // then undefined); OutOfRange when a chunk does not fit in its state's
  // capacity. A kernel error is passed through (every state of the batch
  // undefined). Messages of a batch of several chunks start with
  // "chunk <i>: ".
  absl::StatusOr<BatchForwardStats> ForwardBatch(
      absl::Span<const BatchChunk> chunks, std::vector<float>* logits) const;

 protected:
  // One sequence's micro-batch (1 <= tokens.size() <= kMaxMicroBatch)
  // after the argument checks, state not yet advanced; called by the
  // default ForwardBatchImpl once per piece.
  virtual absl::Status ForwardImpl(absl::Span<const int32_t> tokens,
                                   SequenceState& state, LogitRows rows,
                                   std::vector<float>* logits) const = 0;

  // Called by ForwardBatch (and so by Forward) after the argument checks,
  // once per micro-batch: pieces of at least one token each, at most
  // kMaxMicroBatch in all, each at its state's position, states not yet
  // advanced. *logits (resized) receives the requested rows in piece
  // order; stats->experts_per_layer may be filled (ForwardBatch sums it
  // over the micro-batches). The default runs ForwardImpl on each piece in
  // turn: a backend without a batched pass of its own (CUDA) computes a
  // batch exactly as it computes its chunks alone, and counts no experts.
  virtual absl::Status ForwardBatchImpl(absl::Span<const BatchChunk> pieces,
                                        std::vector<float>* logits,
                                        BatchForwardStats* stats) const;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_MODEL_H_
