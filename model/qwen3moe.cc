// qwen3moe: attention with Q/K norm and NEOX RoPE, then a routed-expert
// FFN, in every block.
//
//   h   = x + Attention(RMSNorm(x; attn_norm))
//   out = h + MoE(RMSNorm(h; ffn_norm))
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/model_files.h"
#include "model/arch.h"
#include "model/arch_util.h"
#include "model/attention.h"
#include "model/blocks.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/weights.h"

namespace sluice {
namespace {

// ---- Part 1: hyper-parameters ---------------------------------------------

using Params = TrunkParams;

absl::StatusOr<Params> ReadParams(const ModelFiles& files) {
  const ArchKeys keys(files.metadata(), "qwen3moe");
  Params p;
  ASSIGN_OR_RETURN(p.n_embd, keys.Int("embedding_length"));
  ASSIGN_OR_RETURN(p.n_layer, keys.Int("block_count"));
  RETURN_IF_ERROR(ReadAttentionAndExperts(keys, p));
  // llama.cpp rotates the whole head when rope.dimension_count is absent.
  ASSIGN_OR_RETURN(p.n_rot, keys.IntOr("rope.dimension_count", p.head_dim));
  if (p.n_rot != p.head_dim) {
    return keys.Invalid("rope.dimension_count", p.n_rot,
                        absl::StrCat("must equal key_length ", p.head_dim));
  }
  return p;
}

// ---- Part 2: tensors ------------------------------------------------------

absl::Status BindBlock(TensorBinder& b, const Params& p, int64_t il,
                       LayerDesc& blk) {
  const std::string prefix = BlockPrefix(il);
  const auto name = [&prefix](std::string_view n) {
    return absl::StrCat(prefix, std::string(n));
  };
  const int64_t e = p.n_embd, q_dim = p.n_head * p.head_dim;
  const int64_t kv_dim = p.n_head_kv * p.head_dim;
  const int64_t x = p.n_expert, f = p.expert_ff;
  blk.mixer = MixerKind::kAttention;
  AttentionWeights& a = blk.attn;
  ASSIGN_OR_RETURN(blk.mixer_norm, b.GetF32Vector(name("attn_norm.weight"), e));
  RETURN_IF_ERROR(BindQkv(b, prefix, e, q_dim, kv_dim, a));
  ASSIGN_OR_RETURN(a.wo, b.GetMatrix(name("attn_output.weight"), q_dim, e));
  ASSIGN_OR_RETURN(a.q_norm,
                   b.GetF32Vector(name("attn_q_norm.weight"), p.head_dim));
  ASSIGN_OR_RETURN(a.k_norm,
                   b.GetF32Vector(name("attn_k_norm.weight"), p.head_dim));
  ASSIGN_OR_RETURN(blk.ffn_norm, b.GetF32Vector(name("ffn_norm.weight"), e));
  ASSIGN_OR_RETURN(blk.moe.router,
                   b.GetMatrix(name("ffn_gate_inp.weight"), e, x));
  return BindRoutedExperts(b, prefix, e, f, x, blk.moe);
}

}  // namespace

absl::StatusOr<ArchDesc> DescribeQwen3Moe(const ModelFiles& files) {
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
  d.attn = AttentionConfigOf(p);
  d.moe = MoeConfigOf(p);
  return d;
}

}  // namespace sluice
