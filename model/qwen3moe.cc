// qwen3moe: attention with Q/K norm and NEOX RoPE, then a routed-expert
// FFN, in every block.
//
//   h   = x + Attention(RMSNorm(x; attn_norm))
//   out = h + MoE(RMSNorm(h; ffn_norm))
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/model_files.h"
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

struct Weights {
  OutputHead head;
  std::vector<ResidualMoeBlock> blocks;  // mixer_norm: attn_norm
  std::vector<AttentionWeights> attn;
};

absl::Status BindBlock(TensorBinder& b, const Params& p, int64_t il,
                       Weights& w) {
  const std::string prefix = BlockPrefix(il);
  const auto name = [&prefix](std::string_view n) {
    return absl::StrCat(prefix, std::string(n));
  };
  const int64_t e = p.n_embd, q_dim = p.n_head * p.head_dim;
  const int64_t kv_dim = p.n_head_kv * p.head_dim;
  const int64_t x = p.n_expert, f = p.expert_ff;
  ResidualMoeBlock& blk = w.blocks.emplace_back();
  AttentionWeights& a = w.attn.emplace_back();
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

absl::StatusOr<Weights> BindWeights(TensorBinder& b, const Params& p,
                                    int64_t n_vocab) {
  Weights w;
  ASSIGN_OR_RETURN(w.head, BindOutputHead(b, p.n_embd, n_vocab));
  for (int64_t il = 0; il < p.n_layer; ++il) {
    RETURN_IF_ERROR(BindBlock(b, p, il, w));
  }
  return w;
}

// ---- Part 3: forward pass -------------------------------------------------

class Qwen3Moe final : public ResidualMoeModel {
 public:
  Qwen3Moe(ModelInfo info, Params p, Weights w)
      : ResidualMoeModel(std::move(info), p, w.head, std::move(w.blocks)),
        p_(p),
        attn_(AttentionConfigOf(p)),
        attn_w_(std::move(w.attn)) {}

 protected:
  std::vector<BlockStateShape> StateShapes() const override {
    BlockStateShape s;
    s.kv_dim = p_.n_head_kv * p_.head_dim;
    return std::vector<BlockStateShape>(p_.n_layer, s);
  }

  absl::Status RunMixer(int64_t il, const float* xn, int64_t n_tok,
                        State& state, float* y,
                        kernels::ThreadPool* pool) const override {
    return RunAttention(attn_, attn_w_[il], xn, n_tok, state.position(),
                        state.block(il), y, pool);
  }

 private:
  Params p_;
  AttentionConfig attn_;
  std::vector<AttentionWeights> attn_w_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadQwen3Moe(const ModelFiles& files) {
  ModelInfo info;
  RETURN_IF_ERROR(FillFileInfo(files, &info));
  ASSIGN_OR_RETURN(const Params p, ReadParams(files));
  TensorBinder binder(files);
  ASSIGN_OR_RETURN(Weights w, BindWeights(binder, p, info.n_vocab));
  FillTrunkInfo(p, &info);
  info.n_attention_layers = p.n_layer;
  return std::unique_ptr<Model>(
      std::make_unique<Qwen3Moe>(std::move(info), p, std::move(w)));
}

}  // namespace sluice
