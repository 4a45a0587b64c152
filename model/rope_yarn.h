// Rotary position embedding with context scaling (none, linear, YaRN) in
// ggml's arithmetic, and the attention scale YaRN implies (deepseek2; any
// later architecture with rope.scaling.* keys can reuse it).
//
// Angles, per rotated pair i (0 <= i < n_rot/2) of a token at position p:
//   theta_extrap = p * base^(-2i/n_rot)     (repeated f32 multiplication)
//   theta_interp = freq_scale * theta_extrap          freq_scale = 1/factor
//   YaRN:  ramp  = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1)
//          theta = theta_interp * (1 - ramp) + theta_extrap * ramp
//          mag   = attn_factor * (1 + 0.1 ln(1/freq_scale))
//   else:  theta = theta_interp, mag = attn_factor
//   (cos, sin) = (cos theta, sin theta) * mag
// with [lo, hi] the correction dims of beta_fast / beta_slow:
//   dim(beta) = n_rot ln(orig_ctx / (2 pi beta)) / (2 ln base),
//   lo = max(0, floor(dim(beta_fast))), hi = min(n_rot - 1, ceil(dim(beta_slow))).
//
// Pairs are (2i, 2i+1) ("normal" RoPE, llama.cpp's LLAMA_ROPE_TYPE_NORM,
// deepseek2) or (i, i + n_rot/2) (NEOX).
#ifndef SLUICE_MODEL_ROPE_YARN_H_
#define SLUICE_MODEL_ROPE_YARN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "model/arch_util.h"

namespace sluice {

// rope.scaling.* of a model's metadata.
struct RopeScaling {
  enum class Type { kNone, kLinear, kYarn };
  Type type = Type::kNone;
  float factor = 1.0f;             // rope.scaling.factor
  int64_t original_context = 0;    // rope.scaling.original_context_length
  // rope.scaling.yarn_log_multiplier as converters write it: 0.1 x the
  // checkpoint's mscale_all_dim.
  float yarn_log_multiplier = 0.0f;
  float beta_fast = 32.0f;         // rope.scaling.yarn_beta_fast
  float beta_slow = 1.0f;          // rope.scaling.yarn_beta_slow
};

// Reads rope.scaling.{type,factor,original_context_length,
// yarn_log_multiplier,yarn_beta_fast,yarn_beta_slow}; absent keys take
// llama.cpp's defaults (no scaling; the original context defaults to
// train_context). InvalidArgument naming the key for an unknown type or a
// factor <= 0.
absl::StatusOr<RopeScaling> ReadRopeScaling(const ArchKeys& keys,
                                            int64_t train_context);

struct ScaledRope {
  int64_t n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;   // 1 / factor (linear and YaRN)
  float ext_factor = 0.0f;   // 1 for YaRN: the ramp is applied
  float attn_factor = 1.0f;  // the magnitude passed to the rotation
  float corr_dims[2] = {0.0f, 0.0f};
  bool neox = false;         // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
};

// The rotation and the softmax scale of attention with key width head_k,
// as llama.cpp builds them for deepseek2 (DeepSeek's YaRN: the magnitude
// correction goes into the scores, not the rotation). With s = factor,
// a = mscale_all_dim = yarn_log_multiplier / 0.1, m(x) = 1 + 0.1 x ln s
// (1 when s <= 1) and b = a when a != 1, else 1:
//   attn_factor = m(b) / m(a) / (1 + 0.1 ln s)    (YaRN; 1 otherwise)
//   (the rotation multiplies it by 1 + 0.1 ln s again: magnitude ~1)
//   mscale      = attn_factor (1 + 0.1 ln s) (1 + 0.1 a ln s)
//   kq_scale    = mscale^2 / sqrt(head_k)
// all in f32 as llama.cpp computes them.
struct RopeAndScale {
  ScaledRope rope;
  float kq_scale = 1.0f;
};
RopeAndScale YarnRopeAndScale(int64_t n_rot, float freq_base,
                              const RopeScaling& scaling, int64_t head_k);

// cos/sin of each of the n_rot/2 pairs for a token at position pos.
void ScaledRopeAngles(const ScaledRope& rope, int32_t pos, float* cos_out,
                      float* sin_out);

// Rotates the first rope.n_rot values of x in place with those angles.
void ApplyScaledRope(const ScaledRope& rope, float* x, const float* cos_v,
                     const float* sin_v);

}  // namespace sluice

#endif  // SLUICE_MODEL_ROPE_YARN_H_
