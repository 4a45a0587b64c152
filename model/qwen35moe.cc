// qwen35moe: a hybrid of Gated DeltaNet blocks and gated full-attention
// blocks (every full_attention_interval-th block), each followed by a routed
// MoE FFN with a sigmoid-gated shared expert.
//
//   h   = x + Mixer(RMSNorm(x; attn_norm))      Mixer: DeltaNet or attention
//   out = h + MoE(RMSNorm(h; post_attention_norm))
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/model_files.h"
#include "model/arch.h"
#include "model/arch_util.h"
#include "model/attention.h"
#include "model/blocks.h"
#include "model/delta_net.h"
#include "model/moe.h"
#include "model/weights.h"

namespace sluice {
namespace {

// ---- Part 1: hyper-parameters ---------------------------------------------

struct Params : TrunkParams {
  // Blocks run (block_count minus the NextN/MTP blocks, which are not).
  std::vector<bool> recurrent;  // per block: DeltaNet (true) or attention
  std::array<int32_t, 4> sections;
  DeltaNetConfig ssm;

  bool is_recurrent(int64_t il) const { return recurrent[il]; }
};

// The trunk's length and which blocks are DeltaNet: the
// attention.recurrent_layers array when present, else every block except
// each full_attention_interval-th. NextN (multi-token prediction) blocks at
// the end of block_count are attention blocks this engine does not run.
absl::Status ReadLayout(const ArchKeys& keys, Params& p) {
  ASSIGN_OR_RETURN(const int64_t n_all, keys.Int("block_count"));
  ASSIGN_OR_RETURN(const int64_t nextn,
                   keys.IntOr("nextn_predict_layers", 0, /*min_value=*/0));
  if (nextn >= n_all) {
    return keys.Invalid("nextn_predict_layers", nextn,
                        absl::StrCat("must be < block_count ", n_all));
  }
  p.n_layer = n_all - nextn;
  if (keys.Has("attention.recurrent_layers")) {
    ASSIGN_OR_RETURN(p.recurrent, keys.BoolArray("attention.recurrent_layers"));
    if (static_cast<int64_t>(p.recurrent.size()) != n_all) {
      return keys.Invalid("attention.recurrent_layers",
                          static_cast<int64_t>(p.recurrent.size()),
                          absl::StrCat("entries; must equal block_count ", n_all));
    }
    p.recurrent.resize(p.n_layer);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const int64_t interval,
                   keys.IntOr("full_attention_interval", 4));
  p.recurrent.resize(p.n_layer);
  for (int64_t il = 0; il < p.n_layer; ++il) {
    p.recurrent[il] = (il + 1) % interval != 0;
  }
  return absl::OkStatus();
}

absl::Status ReadSsmParams(const ArchKeys& keys, Params& p) {
  ASSIGN_OR_RETURN(p.ssm.conv_kernel, keys.Int("ssm.conv_kernel"));
  ASSIGN_OR_RETURN(p.ssm.state_size, keys.Int("ssm.state_size"));
  ASSIGN_OR_RETURN(p.ssm.n_k_heads, keys.Int("ssm.group_count"));
  ASSIGN_OR_RETURN(p.ssm.n_v_heads, keys.Int("ssm.time_step_rank"));
  ASSIGN_OR_RETURN(const int64_t inner, keys.Int("ssm.inner_size"));
  p.ssm.n_embd = p.n_embd;
  p.ssm.eps = p.eps;
  if (inner != p.ssm.state_size * p.ssm.n_v_heads) {
    return keys.Invalid("ssm.inner_size", inner,
                        absl::StrCat("must equal state_size * time_step_rank = ",
                                     p.ssm.state_size * p.ssm.n_v_heads));
  }
  if (p.ssm.n_v_heads % p.ssm.n_k_heads != 0) {
    return keys.Invalid("ssm.group_count", p.ssm.n_k_heads,
                        absl::StrCat("must divide time_step_rank ",
                                     p.ssm.n_v_heads));
  }
  return absl::OkStatus();
}

absl::Status ReadRopeParams(const ArchKeys& keys, Params& p) {
  ASSIGN_OR_RETURN(p.n_rot, keys.IntOr("rope.dimension_count", p.head_dim));
  if (p.n_rot % 2 != 0 || p.n_rot > p.head_dim) {
    return keys.Invalid("rope.dimension_count", p.n_rot,
                        absl::StrCat("must be even and <= key_length ",
                                     p.head_dim));
  }
  ASSIGN_OR_RETURN(const std::vector<int32_t> sections,
                   keys.IntArray("rope.dimension_sections"));
  if (sections.size() < 3 || sections.size() > 4) {
    return keys.Invalid("rope.dimension_sections",
                        static_cast<int64_t>(sections.size()),
                        "must hold 3 or 4 entries");
  }
  p.sections = {0, 0, 0, 0};
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i] < 0) {
      return keys.Invalid("rope.dimension_sections", sections[i],
                          "entries must be >= 0");
    }
    p.sections[i] = sections[i];
  }
  return absl::OkStatus();
}

absl::StatusOr<Params> ReadParams(const ModelFiles& files) {
  const ArchKeys keys(files.metadata(), "qwen35moe");
  Params p;
  ASSIGN_OR_RETURN(p.n_embd, keys.Int("embedding_length"));
  RETURN_IF_ERROR(ReadLayout(keys, p));
  RETURN_IF_ERROR(ReadAttentionAndExperts(keys, p));
  ASSIGN_OR_RETURN(p.shared_ff, keys.Int("expert_shared_feed_forward_length"));
  RETURN_IF_ERROR(ReadRopeParams(keys, p));
  RETURN_IF_ERROR(ReadSsmParams(keys, p));
  return p;
}

// ---- Part 2: tensors ------------------------------------------------------

using NameFn = std::function<std::string(std::string_view)>;

absl::Status BindAttention(TensorBinder& b, const Params& p, const NameFn& name,
                           AttentionWeights& a) {
  const int64_t e = p.n_embd, q_dim = p.n_head * p.head_dim;
  const int64_t kv_dim = p.n_head_kv * p.head_dim;
  RETURN_IF_ERROR(BindQkv(b, name(""), e, 2 * q_dim, kv_dim, a));
  ASSIGN_OR_RETURN(a.wo, b.GetMatrix(name("attn_output.weight"), q_dim, e));
  ASSIGN_OR_RETURN(a.q_norm, b.GetF32Vector(name("attn_q_norm.weight"), p.head_dim));
  ASSIGN_OR_RETURN(a.k_norm, b.GetF32Vector(name("attn_k_norm.weight"), p.head_dim));
  return absl::OkStatus();
}

absl::Status BindDeltaNet(TensorBinder& b, const Params& p, const NameFn& name,
                          DeltaNetWeights& d) {
  const int64_t e = p.n_embd, r = p.ssm.n_v_heads;
  const int64_t ch = p.ssm.conv_channels(), vd = p.ssm.value_dim();
  ASSIGN_OR_RETURN(d.qkv, b.GetMatrix(name("attn_qkv.weight"), e, ch));
  ASSIGN_OR_RETURN(d.gate, b.GetMatrix(name("attn_gate.weight"), e, vd));
  ASSIGN_OR_RETURN(d.beta, b.GetMatrix(name("ssm_beta.weight"), e, r));
  ASSIGN_OR_RETURN(d.alpha, b.GetMatrix(name("ssm_alpha.weight"), e, r));
  ASSIGN_OR_RETURN(d.conv, b.GetF32Matrix(name("ssm_conv1d.weight"),
                                          p.ssm.conv_kernel, ch));
  ASSIGN_OR_RETURN(d.dt_bias, b.GetF32Vector(name("ssm_dt.bias"), r));
  ASSIGN_OR_RETURN(d.a, b.GetF32Vector(name("ssm_a"), r));
  ASSIGN_OR_RETURN(d.norm, b.GetF32Vector(name("ssm_norm.weight"), p.ssm.state_size));
  ASSIGN_OR_RETURN(d.out, b.GetMatrix(name("ssm_out.weight"), vd, e));
  return absl::OkStatus();
}

absl::Status BindMoe(TensorBinder& b, const Params& p, const NameFn& name,
                     MoeWeights& m) {
  const int64_t e = p.n_embd, x = p.n_expert, f = p.expert_ff, fs = p.shared_ff;
  ASSIGN_OR_RETURN(m.router, b.GetMatrix(name("ffn_gate_inp.weight"), e, x));
  RETURN_IF_ERROR(BindRoutedExperts(b, name(""), e, f, x, m));
  ASSIGN_OR_RETURN(m.shared_gate_inp,
                   b.GetF32Vector(name("ffn_gate_inp_shexp.weight"), e));
  ASSIGN_OR_RETURN(m.shared_gate, b.GetMatrix(name("ffn_gate_shexp.weight"), e, fs));
  ASSIGN_OR_RETURN(m.shared_up, b.GetMatrix(name("ffn_up_shexp.weight"), e, fs));
  ASSIGN_OR_RETURN(m.shared_down, b.GetMatrix(name("ffn_down_shexp.weight"), fs, e));
  return absl::OkStatus();
}

absl::Status BindLayers(TensorBinder& b, const Params& p, ArchDesc& d) {
  d.layers.resize(p.n_layer);
  for (int64_t il = 0; il < p.n_layer; ++il) {
    const std::string prefix = BlockPrefix(il);
    const NameFn name = [&prefix](std::string_view n) {
      return absl::StrCat(prefix, std::string(n));
    };
    LayerDesc& blk = d.layers[il];
    ASSIGN_OR_RETURN(blk.mixer_norm,
                     b.GetF32Vector(name("attn_norm.weight"), p.n_embd));
    ASSIGN_OR_RETURN(blk.ffn_norm,
                     b.GetF32Vector(name("post_attention_norm.weight"), p.n_embd));
    if (p.is_recurrent(il)) {
      blk.mixer = MixerKind::kDeltaNet;
      RETURN_IF_ERROR(BindDeltaNet(b, p, name, blk.delta));
    } else {
      blk.mixer = MixerKind::kAttention;
      RETURN_IF_ERROR(BindAttention(b, p, name, blk.attn));
    }
    RETURN_IF_ERROR(BindMoe(b, p, name, blk.moe));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ArchDesc> DescribeQwen35Moe(const ModelFiles& files) {
  ArchDesc d;
  RETURN_IF_ERROR(FillFileInfo(files, &d.info));
  ASSIGN_OR_RETURN(const Params p, ReadParams(files));
  TensorBinder binder(files);
  ASSIGN_OR_RETURN(d.head, BindOutputHead(binder, p.n_embd, d.info.n_vocab));
  RETURN_IF_ERROR(BindLayers(binder, p, d));
  FillTrunkInfo(p, &d.info);
  for (int64_t il = 0; il < p.n_layer; ++il) {
    (p.is_recurrent(il) ? d.info.n_recurrent_layers : d.info.n_attention_layers)++;
  }
  d.eps = p.eps;
  d.attn = AttentionConfigOf(p);
  d.attn.gated = true;
  d.attn.rope.multi_section = true;
  d.attn.rope.sections = p.sections;
  d.ssm = p.ssm;
  d.moe = MoeConfigOf(p);
  return d;
}

}  // namespace sluice
