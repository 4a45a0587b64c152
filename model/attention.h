// Causal grouped-query attention with per-head Q/K RMSNorm and RoPE, and the
// gated variant of qwen35moe's full-attention blocks.
//
//   q, k, v = Wq x, Wk x, Wv x          (gated: Wq x gives per head [q | gate])
//   q, k   <- RMSNorm per head (q_norm, k_norm), then RoPE
//   o_h     = softmax(q_h K_g^T / sqrt(head_dim)) V_g,  g = h / (n_head/n_head_kv)
//   gated:  o_h <- o_h * sigmoid(gate_h)
//   out     = Wo o
//
// Keys and values of the batch are written into the block's KV cache rows
// pos0 .. pos0 + n_tok - 1; token t attends to positions 0 .. pos0 + t.
#ifndef SLUICE_MODEL_ATTENTION_H_
#define SLUICE_MODEL_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "base/thread_pool.h"
#include "model/blocks.h"
#include "model/state.h"
#include "model/weights.h"

namespace sluice {

struct AttentionConfig {
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  float eps = 1e-6f;  // of the Q/K norms
  bool gated = false;
  RopeConfig rope;
};

struct AttentionWeights {
  Matrix wq;  // n_embd -> n_head * head_dim (gated: 2 * n_head * head_dim)
  Matrix wk;  // n_embd -> n_head_kv * head_dim
  Matrix wv;  // n_embd -> n_head_kv * head_dim
  Matrix wo;  // n_head * head_dim -> n_embd
  const float* q_norm = nullptr;  // [head_dim]
  const float* k_norm = nullptr;  // [head_dim]
};

// x: the normed input, [n_tok][n_embd]; out: [n_tok][n_embd] (must not alias
// x). kv: the block's state (k/v rows of kv_dim = n_head_kv * head_dim for
// `capacity` positions). Precondition: pos0 + n_tok <= capacity.
absl::Status RunAttention(const AttentionConfig& config,
                          const AttentionWeights& w, const float* x,
                          int64_t n_tok, int32_t pos0, BlockState& kv,
                          float* out, ThreadPool* pool);

}  // namespace sluice

#endif  // SLUICE_MODEL_ATTENTION_H_
