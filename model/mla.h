// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2: deepseek2), computed
// in the latent space as llama.cpp's "absorbed" MLA does.
//
//   q       = Wq_b RMSNorm(Wq_a x; q_a_norm)     (or Wq x without a q LoRA)
//             per head [q_nope (head_k - n_rot) | q_pe (n_rot)]
//   [c | k_pe] = Wkv_a x                          c: kv_lora_rank, k_pe: n_rot
//   c      <- RMSNorm(c; kv_a_norm);  q_pe, k_pe <- RoPE (one k_pe per token)
//   cache row p = [c_p | k_pe_p]                  (kv_lora_rank + n_rot floats)
//   q_h'    = [K_b,h q_nope,h | q_pe,h]           (absorb: kv_lora_rank + n_rot)
//   o_h     = V_b,h sum_p softmax_p(kq_scale q_h' . row_p) c_p
//   out     = Wo [o_0 .. o_{n_head-1}]
//
// K_b,h maps a head's nope query into the latent space and V_b,h a latent
// back to head_v values: q_nope . (W_k c) = (W_k^T q_nope) . c. The split
// layout (attn_k_b, attn_v_b) stores K_b,h = W_k,h^T directly (rows
// kv_lora_rank x cols nope); the older fused attn_kv_b stores W_k,h (rows
// nope x cols kv_lora_rank, then the head's head_v V_b rows), whose
// transpose is applied here row by row (k_b_transposed).
//
// The cache holds ONE row per token for all heads (no per-head keys or
// values): (kv_lora_rank + n_rot) floats per token and block.
//
// Arithmetic: as llama.cpp's CPU flash attention, which produced the
// goldens (it casts keys and values to half precision): the cache rows and
// the absorbed queries are rounded to half values, the scores are f32 dot
// products, and the softmax-weighted sum of latents runs in one pass with a
// running maximum in a half-precision accumulator (kernels/cpu/half_acc.h),
// continued in f32 only where it would overflow. In f32 throughout the
// deepseek2 golden misses by 0.0047 of std (gate 0.005); this way, 0.0021.
#ifndef SLUICE_MODEL_MLA_H_
#define SLUICE_MODEL_MLA_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/thread_pool.h"
#include "model/rope_yarn.h"
#include "model/state.h"
#include "model/weights.h"

namespace sluice {

struct MlaConfig {
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t q_lora_rank = 0;   // 0: q = Wq x
  int64_t kv_lora_rank = 0;
  int64_t head_k = 0;        // nope + n_rot (key_length_mla)
  int64_t head_v = 0;        // value_length_mla
  int64_t n_rot = 0;         // the decoupled RoPE part
  float eps = 1e-6f;         // of q_a_norm and kv_a_norm
  float kq_scale = 0;        // softmax scale (rope_yarn.h)
  ScaledRope rope;

  int64_t nope() const { return head_k - n_rot; }
  // Floats per token of a block's cache row: the latent and the RoPE key.
  int64_t cache_width() const { return kv_lora_rank + n_rot; }
};

struct MlaWeights {
  Matrix wq_a;                      // n_embd -> q_lora_rank (q LoRA)
  const float* q_a_norm = nullptr;  // [q_lora_rank]
  Matrix wq_b;                      // q_lora_rank -> n_head * head_k
  Matrix wq;                        // n_embd -> n_head * head_k (no q LoRA)
  Matrix wkv_a;                     // n_embd -> kv_lora_rank + n_rot
  const float* kv_a_norm = nullptr;  // [kv_lora_rank]
  // Per head ("experts" = heads): K_b (kv_lora_rank x nope, or nope x
  // kv_lora_rank when k_b_transposed) and V_b (head_v x kv_lora_rank).
  ExpertMatrix k_b;
  bool k_b_transposed = false;
  ExpertMatrix v_b;
  Matrix wo;  // n_head * head_v -> n_embd
};

// The fused attn_kv_b layout's K_b (per head nope rows of kv_lora_rank,
// applied transposed; k_b_transposed) in the split layout's orientation:
// per head kv_lora_rank rows of nope, dequantized to f32, head after head
// ([n_head][kv_lora_rank][nope]). The CUDA backend multiplies this as it
// multiplies attn_k_b (model/cuda/device_layers.cc). InvalidArgument for a
// K_b not in the fused layout or of a type without a dequantizer.
absl::StatusOr<std::vector<float>> UnfusedKb(const MlaWeights& w);

// x: the normed input, [n_tok][n_embd]; out: [n_tok][n_embd] (no alias).
// kv: the block's state, k holding cache_width() floats per position.
// Precondition: pos0 + n_tok <= capacity.
absl::Status RunMla(const MlaConfig& config, const MlaWeights& w,
                    const float* x, int64_t n_tok, int32_t pos0,
                    BlockState& kv, float* out, ThreadPool* pool);

}  // namespace sluice

#endif  // SLUICE_MODEL_MLA_H_
