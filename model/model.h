// An architecture's forward pass over weights read in place from the
// mapped GGUF shards.
//
// Each architecture lives in one file (qwen3moe.cc, qwen35moe.cc) in three
// parts: hyper-parameters from GGUF metadata, every tensor declared with its
// expected shape (a mismatch is an error naming the file, the tensor, the
// expected and the actual shape), and the forward pass assembled from the
// shared blocks (blocks.h, attention.h, delta_net.h, moe.h).
//
// Weights are never copied: every matrix is a pointer into the read-only
// mapping owned by ModelFiles, which must outlive the Model. Only
// activations and the per-sequence State are allocated.
//
// Thread-safety: a Model is immutable after loading; Forward may run
// concurrently on different States.
#ifndef SLUICE_MODEL_MODEL_H_
#define SLUICE_MODEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cpu/thread_pool.h"
#include "model/state.h"

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

class Model {
 public:
  // Tokens per ForwardImpl call (llama.cpp's default n_ubatch).
  static constexpr size_t kMaxMicroBatch = 512;

  virtual ~Model() = default;

  virtual const ModelInfo& info() const = 0;

  // A zeroed state whose KV cache holds `capacity` tokens.
  // Precondition: capacity >= 1.
  std::unique_ptr<State> CreateState(int capacity) const;
  // Bytes CreateState(capacity) allocates.
  uint64_t StateBytes(int capacity) const;

  // Evaluates `tokens` at positions state.position() .. + tokens.size() - 1
  // (one sequence; the batch continues it), updates `state` and advances it.
  // Projections run as matrix-matrix products over micro-batches of up to
  // kMaxMicroBatch tokens (bounding activation memory; the result does not
  // depend on the split).
  // *logits (resized) receives n_vocab floats per requested row, row-major:
  // one row for kLast, tokens.size() rows for kAll, nothing for kNone.
  // Errors (state unchanged): InvalidArgument for an empty batch or a token
  // id outside [0, n_vocab); OutOfRange when the batch does not fit in the
  // state's capacity; a kernel error is passed through (state undefined).
  absl::Status Forward(absl::Span<const int32_t> tokens, State& state,
                       LogitRows rows, std::vector<float>* logits,
                       kernels::ThreadPool* pool) const;

 protected:
  virtual std::vector<BlockStateShape> StateShapes() const = 0;
  // Called by Forward after the argument checks, once per micro-batch
  // (1 <= tokens.size() <= kMaxMicroBatch), state not yet advanced.
  virtual absl::Status ForwardImpl(absl::Span<const int32_t> tokens,
                                   State& state, LogitRows rows,
                                   std::vector<float>* logits,
                                   kernels::ThreadPool* pool) const = 0;
};

// Builds the architecture named by general.architecture. InvalidArgument
// for an unsupported architecture (message names the file and the value)
// and for every malformed key or tensor.
absl::StatusOr<std::unique_ptr<Model>> LoadModel(const ModelFiles& files);

// Per-architecture constructors (qwen3moe.cc, qwen35moe.cc).
absl::StatusOr<std::unique_ptr<Model>> LoadQwen3Moe(const ModelFiles& files);
absl::StatusOr<std::unique_ptr<Model>> LoadQwen35Moe(const ModelFiles& files);

}  // namespace sluice

#endif  // SLUICE_MODEL_MODEL_H_
