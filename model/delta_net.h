// The Gated DeltaNet linear-attention block of qwen35moe.
//
// Per token, with S = state_size, G = k heads (group_count), R = v heads
// (time_step_rank):
//   [q | k | v] = Wqkv x            (widths S*G, S*G, S*R)
//   causal depthwise conv over the last conv_kernel inputs of each channel
//   (carried across calls in the state), then SiLU
//   q, k <- L2-normalised per head; q <- q / sqrt(S)
//   beta  = sigmoid(Wbeta x)                     per v head
//   g     = softplus(Walpha x + dt_bias) * a     per v head (a = -exp(A_log))
//   v head j uses q/k head j mod G (tiled, as llama.cpp repeats them)
//   S_j  <- exp(g) S_j;  S_j <- S_j + k (beta (v - S_j^T k))^T;  o = S_j^T q
//   o    <- RMSNorm(o; norm) * silu(z),  z = Wgate x   per v head
//   out   = Wout o
// The projections run over the whole batch; the conv and the recurrence are
// sequential over tokens (parallel over heads / channels).
#ifndef SLUICE_MODEL_DELTA_NET_H_
#define SLUICE_MODEL_DELTA_NET_H_

#include <cstdint>

#include "absl/status/status.h"
#include "base/thread_pool.h"
#include "model/state.h"
#include "model/weights.h"

namespace sluice {

struct DeltaNetConfig {
  int64_t n_embd = 0;
  int64_t state_size = 0;   // S: key and value width of a head
  int64_t n_k_heads = 0;    // G
  int64_t n_v_heads = 0;    // R
  int64_t conv_kernel = 0;  // taps of the causal conv
  float eps = 1e-6f;        // of the L2 norms and of the gated RMSNorm

  int64_t key_dim() const { return state_size * n_k_heads; }
  int64_t value_dim() const { return state_size * n_v_heads; }
  int64_t conv_channels() const { return 2 * key_dim() + value_dim(); }
};

struct DeltaNetWeights {
  Matrix qkv;    // n_embd -> conv_channels
  Matrix gate;   // n_embd -> value_dim (z)
  Matrix beta;   // n_embd -> n_v_heads
  Matrix alpha;  // n_embd -> n_v_heads
  const float* conv = nullptr;     // [conv_channels][conv_kernel]
  const float* dt_bias = nullptr;  // [n_v_heads]
  const float* a = nullptr;        // [n_v_heads]
  const float* norm = nullptr;     // [state_size]
  Matrix out;    // value_dim -> n_embd
};

// x: the normed input [n_tok][n_embd]; out: [n_tok][n_embd] (no alias).
// st: the block's conv and recurrent state (layout in state.h), updated.
absl::Status RunDeltaNet(const DeltaNetConfig& config,
                         const DeltaNetWeights& w, const float* x,
                         int64_t n_tok, BlockState& st, float* out,
                         ThreadPool* pool);

}  // namespace sluice

#endif  // SLUICE_MODEL_DELTA_NET_H_
