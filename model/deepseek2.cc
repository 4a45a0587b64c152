// deepseek2 (DeepSeek-V2/V3/R1, Kimi-K2): multi-head latent attention with
// YaRN RoPE in every block; leading_dense_block_count dense SwiGLU FFN
// blocks, then routed experts (softmax or sigmoid gating, the exp_probs_b
// selection bias, group-limited choice, weight norm and scale) beside
// ungated shared experts.
//
//   h   = x + MLA(RMSNorm(x; attn_norm))               (mla.h)
//   out = h + Ffn(RMSNorm(h; ffn_norm))
//   Ffn = SwiGLU(ffn_gate, ffn_up, ffn_down)           il < dense lead
//       = MoE(x) + SwiGLU_shexp(x)                     otherwise (moe.h)
//
// Two attention layouts are accepted: the split attn_k_b / attn_v_b that
// current converters write (with attention.key_length_mla /
// value_length_mla; key_length and value_length then describe the latent
// cache: kv_lora_rank + n_rot and kv_lora_rank), and the older single
// attn_kv_b (no _mla keys; key_length = nope + n_rot, value_length = the
// value head). Both are computed in the latent space with one cache row of
// kv_lora_rank + n_rot floats per token.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/model_files.h"
#include "model/arch.h"
#include "model/arch_util.h"
#include "model/mla.h"
#include "model/moe.h"
#include "model/rope_yarn.h"
#include "model/weights.h"

namespace sluice {
namespace {

// ---- Part 1: hyper-parameters ---------------------------------------------

struct Params : TrunkParams {
  int64_t n_dense_lead = 0, dense_ff = 0;
  int64_t q_lora = 0, kv_lora = 0;
  int64_t head_v = 0;
  bool split_kv_b = true;  // attn_k_b / attn_v_b (else attn_kv_b)
  int64_t n_shared = 0;
  MoeConfig moe;
  RopeScaling scaling;
};

// llama.cpp's llama_expert_gating_func_type.
constexpr int64_t kGatingNone = 0, kGatingSoftmax = 1, kGatingSigmoid = 2;

absl::Status ReadAttention(const ArchKeys& keys, Params& p) {
  ASSIGN_OR_RETURN(p.n_head, keys.Int("attention.head_count"));
  ASSIGN_OR_RETURN(p.kv_lora, keys.Int("attention.kv_lora_rank"));
  // No q LoRA (DeepSeek-V2-Lite): attn_q straight from the input.
  ASSIGN_OR_RETURN(p.q_lora, keys.IntOr("attention.q_lora_rank", 0, /*min_value=*/0));
  ASSIGN_OR_RETURN(p.n_rot, keys.Int("rope.dimension_count"));
  ASSIGN_OR_RETURN(const int64_t key_length, keys.Int("attention.key_length"));
  ASSIGN_OR_RETURN(const int64_t value_length, keys.Int("attention.value_length"));
  p.split_kv_b = keys.Has("attention.key_length_mla");
  if (p.split_kv_b) {
    ASSIGN_OR_RETURN(p.head_dim, keys.Int("attention.key_length_mla"));
    ASSIGN_OR_RETURN(p.head_v, keys.Int("attention.value_length_mla"));
    if (key_length != p.kv_lora + p.n_rot) {
      return keys.Invalid("attention.key_length", key_length,
                          absl::StrCat("must equal kv_lora_rank + rope.dimension_count = ",
                                       p.kv_lora + p.n_rot, " with key_length_mla"));
    }
    if (value_length != p.kv_lora) {
      return keys.Invalid("attention.value_length", value_length,
                          absl::StrCat("must equal kv_lora_rank ", p.kv_lora,
                                       " with value_length_mla"));
    }
  } else {
    p.head_dim = key_length;
    p.head_v = value_length;
  }
  if (p.n_rot % 2 != 0 || p.n_rot >= p.head_dim) {
    return keys.Invalid("rope.dimension_count", p.n_rot,
                        absl::StrCat("must be even and < the key head width ",
                                     p.head_dim));
  }
  // The cache is one latent row for all heads whatever head_count_kv says
  // (1 in the split layout, head_count in the fused one).
  p.n_head_kv = 1;
  ASSIGN_OR_RETURN(p.eps, keys.PositiveFloat("attention.layer_norm_rms_epsilon"));
  ASSIGN_OR_RETURN(p.freq_base, keys.PositiveFloat("rope.freq_base"));
  ASSIGN_OR_RETURN(p.scaling, ReadRopeScaling(keys, p.context_length));
  return absl::OkStatus();
}

absl::Status ReadExperts(const ArchKeys& keys, Params& p) {
  ASSIGN_OR_RETURN(p.n_dense_lead,
                   keys.IntOr("leading_dense_block_count", 0, /*min_value=*/0));
  if (p.n_dense_lead > p.n_layer) {
    return keys.Invalid("leading_dense_block_count", p.n_dense_lead,
                        absl::StrCat("must be <= block_count ", p.n_layer));
  }
  if (p.n_dense_lead > 0) {
    ASSIGN_OR_RETURN(p.dense_ff, keys.Int("feed_forward_length"));
  }
  ASSIGN_OR_RETURN(p.n_expert, keys.Int("expert_count"));
  ASSIGN_OR_RETURN(p.n_expert_used, keys.Int("expert_used_count"));
  ASSIGN_OR_RETURN(p.expert_ff, keys.Int("expert_feed_forward_length"));
  ASSIGN_OR_RETURN(p.n_shared, keys.IntOr("expert_shared_count", 0, /*min_value=*/0));
  p.shared_ff = p.expert_ff * p.n_shared;
  if (p.n_expert_used > p.n_expert || p.n_expert_used > kMaxExpertsUsed) {
    return keys.Invalid("expert_used_count", p.n_expert_used,
                        absl::StrCat("must be <= expert_count ", p.n_expert,
                                     " and <= ", kMaxExpertsUsed));
  }
  MoeConfig& m = p.moe;
  ASSIGN_OR_RETURN(const int64_t gating,
                   keys.IntOr("expert_gating_func", kGatingNone, /*min_value=*/0));
  if (gating == kGatingNone || gating == kGatingSoftmax) {
    m.gating = ExpertGating::kSoftmax;  // llama.cpp: absent means softmax
  } else if (gating == kGatingSigmoid) {
    m.gating = ExpertGating::kSigmoid;
  } else {
    return keys.Invalid("expert_gating_func", gating,
                        "must be 1 (softmax) or 2 (sigmoid)");
  }
  ASSIGN_OR_RETURN(m.norm_weights, keys.BoolOr("expert_weights_norm", false));
  // Every converted DeepSeek file has the scale; 1 keeps a file without it
  // meaningful (llama.cpp would scale by 0).
  ASSIGN_OR_RETURN(m.weights_scale, keys.FloatOr("expert_weights_scale", 1.0f));
  ASSIGN_OR_RETURN(m.n_group, keys.IntOr("expert_group_count", 1, /*min_value=*/0));
  ASSIGN_OR_RETURN(m.n_group_used,
                   keys.IntOr("expert_group_used_count", 1, /*min_value=*/0));
  if (m.n_group <= 1) {
    m.n_group = 1;
    m.n_group_used = 1;
  } else {
    if (p.n_expert % m.n_group != 0) {
      return keys.Invalid("expert_group_count", m.n_group,
                          absl::StrCat("must divide expert_count ", p.n_expert));
    }
    if (m.n_group_used < 1 || m.n_group_used > m.n_group ||
        m.n_group_used * (p.n_expert / m.n_group) < p.n_expert_used) {
      return keys.Invalid(
          "expert_group_used_count", m.n_group_used,
          absl::StrCat("must be in [1, expert_group_count ", m.n_group,
                       "] and its groups must hold expert_used_count ",
                       p.n_expert_used, " experts"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Params> ReadParams(const ModelFiles& files) {
  const ArchKeys keys(files.metadata(), "deepseek2");
  Params p;
  ASSIGN_OR_RETURN(p.n_embd, keys.Int("embedding_length"));
  ASSIGN_OR_RETURN(p.n_layer, keys.Int("block_count"));
  ASSIGN_OR_RETURN(p.context_length, keys.Int("context_length"));
  RETURN_IF_ERROR(ReadAttention(keys, p));
  RETURN_IF_ERROR(ReadExperts(keys, p));
  MoeConfig& m = p.moe;
  m.n_embd = p.n_embd;
  m.n_expert = p.n_expert;
  m.n_expert_used = p.n_expert_used;
  m.expert_ff = p.expert_ff;
  m.shared_ff = p.shared_ff;
  return p;
}

// ---- Part 2: tensors ------------------------------------------------------

absl::Status BindMla(TensorBinder& b, const Params& p, const std::string& pre,
                     MlaWeights& a) {
  const int64_t e = p.n_embd, h = p.n_head, lat = p.kv_lora;
  const int64_t nope = p.head_dim - p.n_rot, dv = p.head_v;
  const int64_t q_rows = h * p.head_dim;
  if (p.q_lora > 0) {
    ASSIGN_OR_RETURN(a.wq_a, b.GetMatrix(pre + "attn_q_a.weight", e, p.q_lora));
    ASSIGN_OR_RETURN(a.q_a_norm, b.GetF32Vector(pre + "attn_q_a_norm.weight", p.q_lora));
    ASSIGN_OR_RETURN(a.wq_b, b.GetMatrix(pre + "attn_q_b.weight", p.q_lora, q_rows));
  } else {
    ASSIGN_OR_RETURN(a.wq, b.GetMatrix(pre + "attn_q.weight", e, q_rows));
  }
  ASSIGN_OR_RETURN(a.wkv_a, b.GetMatrix(pre + "attn_kv_a_mqa.weight", e, lat + p.n_rot));
  ASSIGN_OR_RETURN(a.kv_a_norm, b.GetF32Vector(pre + "attn_kv_a_norm.weight", lat));
  if (p.split_kv_b) {
    ASSIGN_OR_RETURN(a.k_b, b.GetExperts(pre + "attn_k_b.weight", nope, lat, h));
    ASSIGN_OR_RETURN(a.v_b, b.GetExperts(pre + "attn_v_b.weight", lat, dv, h));
    a.k_b_transposed = false;
  } else {
    // Per head: nope key rows, then dv value rows, each kv_lora_rank wide.
    ASSIGN_OR_RETURN(const Matrix kv_b,
                     b.GetMatrix(pre + "attn_kv_b.weight", lat, h * (nope + dv)));
    const uint64_t head_bytes = (nope + dv) * kv_b.row_bytes;
    a.k_b = {kv_b.type, kv_b.data, nope, lat, h, kv_b.row_bytes, head_bytes};
    a.v_b = {kv_b.type, kv_b.data + nope * kv_b.row_bytes, dv, lat, h,
             kv_b.row_bytes, head_bytes};
    a.k_b_transposed = true;
  }
  ASSIGN_OR_RETURN(a.wo, b.GetMatrix(pre + "attn_output.weight", h * dv, e));
  return absl::OkStatus();
}

absl::Status BindFfn(TensorBinder& b, const Params& p, int64_t il,
                     const std::string& pre, LayerDesc& blk) {
  const int64_t e = p.n_embd;
  if (il < p.n_dense_lead) {
    blk.ffn = FfnKind::kDense;
    DenseFfnWeights& d = blk.dense;
    ASSIGN_OR_RETURN(d.gate, b.GetMatrix(pre + "ffn_gate.weight", e, p.dense_ff));
    ASSIGN_OR_RETURN(d.up, b.GetMatrix(pre + "ffn_up.weight", e, p.dense_ff));
    ASSIGN_OR_RETURN(d.down, b.GetMatrix(pre + "ffn_down.weight", p.dense_ff, e));
    return absl::OkStatus();
  }
  blk.ffn = FfnKind::kMoe;
  MoeWeights& m = blk.moe;
  ASSIGN_OR_RETURN(m.router, b.GetMatrix(pre + "ffn_gate_inp.weight", e, p.n_expert));
  if (b.Has(pre + "exp_probs_b.bias")) {
    ASSIGN_OR_RETURN(m.selection_bias,
                     b.GetF32Vector(pre + "exp_probs_b.bias", p.n_expert));
  }
  RETURN_IF_ERROR(BindRoutedExperts(b, pre, e, p.expert_ff, p.n_expert, m));
  if (p.shared_ff > 0) {
    const int64_t fs = p.shared_ff;
    ASSIGN_OR_RETURN(m.shared_gate, b.GetMatrix(pre + "ffn_gate_shexp.weight", e, fs));
    ASSIGN_OR_RETURN(m.shared_up, b.GetMatrix(pre + "ffn_up_shexp.weight", e, fs));
    ASSIGN_OR_RETURN(m.shared_down, b.GetMatrix(pre + "ffn_down_shexp.weight", fs, e));
  }
  return absl::OkStatus();
}

absl::Status BindBlock(TensorBinder& b, const Params& p, int64_t il,
                       LayerDesc& blk) {
  const std::string pre = BlockPrefix(il);
  blk.mixer = MixerKind::kLatentAttention;
  ASSIGN_OR_RETURN(blk.mixer_norm, b.GetF32Vector(pre + "attn_norm.weight", p.n_embd));
  RETURN_IF_ERROR(BindMla(b, p, pre, blk.mla));
  ASSIGN_OR_RETURN(blk.ffn_norm, b.GetF32Vector(pre + "ffn_norm.weight", p.n_embd));
  return BindFfn(b, p, il, pre, blk);
}

MlaConfig MlaConfigOf(const Params& p) {
  MlaConfig c;
  c.n_embd = p.n_embd;
  c.n_head = p.n_head;
  c.q_lora_rank = p.q_lora;
  c.kv_lora_rank = p.kv_lora;
  c.head_k = p.head_dim;
  c.head_v = p.head_v;
  c.n_rot = p.n_rot;
  c.eps = p.eps;
  const RopeAndScale r = YarnRopeAndScale(p.n_rot, p.freq_base, p.scaling, p.head_dim);
  c.rope = r.rope;
  c.kq_scale = r.kq_scale;
  return c;
}

}  // namespace

absl::StatusOr<ArchDesc> DescribeDeepseek2(const ModelFiles& files) {
  ArchDesc d;
  RETURN_IF_ERROR(FillFileInfo(files, &d.info));
  ASSIGN_OR_RETURN(const Params p, ReadParams(files));
  TensorBinder binder(files);
  ASSIGN_OR_RETURN(d.head, BindOutputHead(binder, p.n_embd, d.info.n_vocab));
  d.layers.resize(p.n_layer);
  for (int64_t il = 0; il < p.n_layer; ++il) {
    RETURN_IF_ERROR(BindBlock(binder, p, il, d.layers[il]));
  }
  FillTrunkInfo(p, &d.info);
  d.info.n_attention_layers = p.n_layer;
  d.eps = p.eps;
  d.mla = MlaConfigOf(p);
  d.moe = p.moe;
  return d;
}

}  // namespace sluice
