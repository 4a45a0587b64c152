// Per-sequence state of a model: the KV cache of each attention block and
// the conv / recurrent state of each Gated DeltaNet block.
//
// Layout (all f32, allocated once at creation, zeroed by Reset; the KV
// rows are demand pages: resident once written, given back by Reset, so a
// state costs the memory of the positions it has evaluated, not of its
// capacity):
//   attention block: k[capacity][kv_dim], v[capacity][kv_dim] with
//     kv_dim = n_head_kv * head_dim; row p holds the (normed, rotated) key
//     and the value of the token at position p.
//   latent attention block (MLA, mla.h): k[capacity][kv_dim] only, kv_dim
//     = kv_lora_rank + n_rot; row p is the token's normed latent then its
//     rotated RoPE key, shared by all heads (keys and values both come
//     from it); v is empty.
//   DeltaNet block:  conv[conv_kernel - 1][conv_channels], the projected
//     q|k|v inputs of the last conv_kernel - 1 tokens, oldest first (zero
//     before the sequence starts); ssm[v_heads][state][state], per value
//     head the matrix S indexed [value][key] (key contiguous), so that
//     S^T k and S^T q of the reference are row dot products here.
//
// Thread-safety: none; a State belongs to one sequence, used by one thread
// at a time.
#ifndef SLUICE_MODEL_STATE_H_
#define SLUICE_MODEL_STATE_H_

#include <cstdint>
#include <vector>

#include "base/demand_pages.h"
#include "model/model.h"

namespace sluice {

// What one block keeps between calls. A block has either KV (kv_dim > 0) or
// conv/recurrent state (conv_channels > 0), never both.
struct BlockStateShape {
  int64_t kv_dim = 0;
  bool latent = false;  // one kv_dim row per position, no values (MLA)
  int64_t conv_kernel = 0;
  int64_t conv_channels = 0;
  int64_t v_heads = 0;
  int64_t state_size = 0;
};

struct BlockState {
  DemandPages<float> k;
  DemandPages<float> v;
  std::vector<float> conv;
  std::vector<float> ssm;
};

// The CPU backend's state: host vectors per block.
class State final : public SequenceState {
 public:
  // Precondition: capacity >= 1.
  State(int capacity, std::vector<BlockStateShape> shapes);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }

  BlockState& block(int i) { return blocks_[i]; }
  const BlockState& block(int i) const { return blocks_[i]; }
  const BlockStateShape& shape(int i) const { return shapes_[i]; }

  void Reset() override;
  uint64_t bytes() const override;
  uint64_t resident_bytes() const override;

  // What State(capacity, shapes).bytes() would be, without allocating;
  // capacity 0: the recurrent state alone.
  static uint64_t BytesFor(int capacity,
                           const std::vector<BlockStateShape>& shapes);

 private:
  std::vector<BlockStateShape> shapes_;
  std::vector<BlockState> blocks_;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_STATE_H_
