#include "model/rope_yarn.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace sluice {
namespace {

// ggml_rope_yarn_corr_dim: the dimension whose wavelength fits `rotations`
// times into the original context.
float CorrDim(int64_t n_dims, int64_t n_ctx_orig, float rotations, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) /
                  (rotations * 2 * static_cast<float>(M_PI))) /
         (2 * std::log(base));
}

// rope_yarn_ramp of ggml: 1 below lo, 0 above hi, linear between.
float Ramp(float lo, float hi, int64_t i0) {
  const float y = (static_cast<float>(i0 / 2) - lo) / std::max(0.001f, hi - lo);
  return 1 - std::min(1.0f, std::max(0.0f, y));
}

// llama.cpp's get_mscale.
float Mscale(float scale, float mscale) {
  return scale <= 1.0f ? 1.0f : 0.1f * mscale * std::log(scale) + 1.0f;
}

}  // namespace

absl::StatusOr<RopeScaling> ReadRopeScaling(const ArchKeys& keys,
                                            int64_t train_context) {
  RopeScaling s;
  ASSIGN_OR_RETURN(const std::string type,
                   keys.StringOr("rope.scaling.type", "none"));
  if (type == "none") {
    s.type = RopeScaling::Type::kNone;
  } else if (type == "linear") {
    s.type = RopeScaling::Type::kLinear;
  } else if (type == "yarn") {
    s.type = RopeScaling::Type::kYarn;
  } else {
    return keys.InvalidString("rope.scaling.type", type,
                              "must be none, linear or yarn");
  }
  ASSIGN_OR_RETURN(s.factor, keys.FloatOr("rope.scaling.factor", 0.0f));
  if (s.factor < 0.0f || !std::isfinite(s.factor)) {
    return keys.InvalidString("rope.scaling.factor", absl::StrCat(s.factor),
                              "must be >= 0 (0: no scaling)");
  }
  if (s.factor == 0.0f) s.factor = 1.0f;  // llama.cpp: 0 means unscaled
  ASSIGN_OR_RETURN(s.original_context,
                   keys.IntOr("rope.scaling.original_context_length",
                              train_context));
  ASSIGN_OR_RETURN(s.yarn_log_multiplier,
                   keys.FloatOr("rope.scaling.yarn_log_multiplier", 0.0f));
  ASSIGN_OR_RETURN(s.beta_fast, keys.FloatOr("rope.scaling.yarn_beta_fast", 32.0f));
  ASSIGN_OR_RETURN(s.beta_slow, keys.FloatOr("rope.scaling.yarn_beta_slow", 1.0f));
  return s;
}

RopeAndScale YarnRopeAndScale(int64_t n_rot, float freq_base,
                              const RopeScaling& scaling, int64_t head_k) {
  RopeAndScale out;
  ScaledRope& r = out.rope;
  r.n_rot = n_rot;
  r.freq_base = freq_base;
  r.neox = false;
  r.freq_scale = scaling.type == RopeScaling::Type::kNone
                     ? 1.0f
                     : 1.0f / scaling.factor;
  // llama.cpp reads the multiplier as written (0.1 x mscale_all_dim) and
  // divides the converters' 0.1 back out.
  const float log_mul = scaling.yarn_log_multiplier / 0.1f;
  float attn_factor = 1.0f;
  if (scaling.type == RopeScaling::Type::kYarn) {
    r.ext_factor = 1.0f;
    const float factor = 1.0f / r.freq_scale;
    if (log_mul != 0.0f) {
      const float mscale_all_dims = log_mul;
      const float mscale = mscale_all_dims != 1.0f ? mscale_all_dims : 1.0f;
      attn_factor = Mscale(factor, mscale) / Mscale(factor, mscale_all_dims);
    } else {
      attn_factor = Mscale(factor, 1.0f);
    }
    // ggml's rotation multiplies by this again.
    attn_factor *= 1.0f / (1.0f + 0.1f * std::log(factor));
    const int64_t ctx = scaling.original_context;
    const float start = std::floor(CorrDim(n_rot, ctx, scaling.beta_fast, freq_base));
    const float end = std::ceil(CorrDim(n_rot, ctx, scaling.beta_slow, freq_base));
    r.corr_dims[0] = std::max(0.0f, start);
    r.corr_dims[1] = std::min(static_cast<float>(n_rot - 1), end);
  }
  r.attn_factor = attn_factor;
  const float inv_scale = 1.0f / r.freq_scale;
  const float attn_factor_org = attn_factor * (1.0f + 0.1f * std::log(inv_scale));
  const float mscale =
      attn_factor_org * (1.0f + 0.1f * log_mul * std::log(inv_scale));
  out.kq_scale = 1.0f * mscale * mscale / std::sqrt(static_cast<float>(head_k));
  return out;
}

void ScaledRopeAngles(const ScaledRope& r, int32_t pos, float* cos_out,
                      float* sin_out) {
  const float theta_scale =
      std::pow(r.freq_base, -2.0f / static_cast<float>(r.n_rot));
  float theta = static_cast<float>(pos);
  for (int64_t i0 = 0; i0 < r.n_rot; i0 += 2) {
    const float theta_extrap = theta;
    const float theta_interp = r.freq_scale * theta_extrap;
    float t = theta_interp;
    float mscale = r.attn_factor;
    if (r.ext_factor != 0.0f) {
      const float ramp_mix = Ramp(r.corr_dims[0], r.corr_dims[1], i0) * r.ext_factor;
      t = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / r.freq_scale);
    }
    cos_out[i0 / 2] = std::cos(t) * mscale;
    sin_out[i0 / 2] = std::sin(t) * mscale;
    theta *= theta_scale;
  }
}

void ApplyScaledRope(const ScaledRope& r, float* x, const float* cos_v,
                     const float* sin_v) {
  const int64_t half = r.n_rot / 2;
  const int64_t stride = r.neox ? half : 1;
  for (int64_t i = 0; i < half; ++i) {
    float* a = r.neox ? x + i : x + 2 * i;
    const float x0 = a[0];
    const float x1 = a[stride];
    a[0] = x0 * cos_v[i] - x1 * sin_v[i];
    a[stride] = x0 * sin_v[i] + x1 * cos_v[i];
  }
}

}  // namespace sluice
