// The backend-independent model interface: a forward pass over a batch of
// tokens and the per-sequence state it continues.
//
// The architecture itself (hyper-parameters, tensors, shapes) is described
// once in arch.h and computed by a backend: the CPU (cpu_model.h) reads the
// weights in place from the read-only mapping owned by ModelFiles, which must
// outlive the Model; the CUDA backend (model/cuda) keeps the dense weights on
// the device once.
//
// Thread-safety: Forward may run concurrently on different states.
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
  // Bytes allocated for all buffers.
  virtual uint64_t bytes() const = 0;

 protected:
  void set_position(int p) { position_ = p; }

 private:
  int capacity_;
  int position_ = 0;
};

// Routed experts streamed through a device slot cache (CUDA with fewer
// slots than experts, or with the cache forced on). All zero / false when
// every expert is resident or read in place (the CPU).
struct ExpertStreamStats {
  bool streaming = false;    // experts come through the slot cache
  std::string policy;        // eviction policy name ("lru", ...)
  int64_t slots = 0;         // device slots (all slot classes)
  int64_t experts = 0;       // routed experts in the model (layers x experts)
  uint64_t slot_bytes = 0;   // bytes of one slot (largest slot class)
  uint64_t arena_bytes = 0;  // device bytes of all slots
  uint64_t host_tier_bytes = 0;  // host RAM holding experts for the slots
  memory::SlotCacheCounters counters;  // since the model was built
  // Where decode misses are computed ("copy", "host", "cost") and the miss
  // policy's current estimates of the two paths (bytes/s).
  std::string miss_policy = "copy";
  double copy_bytes_per_s = 0;
  double host_bytes_per_s = 0;
};

// What a backend reports about itself (tools/generate, worker metrics).
struct BackendStats {
  // Device bytes by kind ("dense", "experts", "kv_state", "workspace");
  // empty for the CPU.
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
};

// One launch group of a decode step timed alone (Model::TimeDecodeKernels).
struct KernelTiming {
  std::string label;   // "<layer>.<part>" or "embed", "head"
  uint64_t bytes = 0;  // weight and state bytes it reads (0: not counted)
  int kernels = 0;
  double us = 0;
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
  // passed through (state undefined).
  absl::Status Forward(absl::Span<const int32_t> tokens, SequenceState& state,
                       LogitRows rows, std::vector<float>* logits) const;

 protected:
  // Called by Forward after the argument checks, once per micro-batch
  // (1 <= tokens.size() <= kMaxMicroBatch), state not yet advanced.
  virtual absl::Status ForwardImpl(absl::Span<const int32_t> tokens,
                                   SequenceState& state, LogitRows rows,
                                   std::vector<float>* logits) const = 0;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_MODEL_H_
