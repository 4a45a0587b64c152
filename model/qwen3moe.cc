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

struct Layer {
  const float* attn_norm;
  AttentionWeights attn;
  const float* ffn_norm;
  MoeWeights moe;
};

struct Weights {
  OutputHead head;
  std::vector<Layer> layers;
};

absl::StatusOr<Layer> BindLayer(TensorBinder& b, const Params& p, int64_t il) {
  const std::string prefix = BlockPrefix(il);
  const auto name = [&prefix](std::string_view n) {
    return absl::StrCat(prefix, std::string(n));
  };
  const int64_t e = p.n_embd, q_dim = p.n_head * p.head_dim;
  const int64_t kv_dim = p.n_head_kv * p.head_dim;
  const int64_t x = p.n_expert, f = p.expert_ff;
  Layer l;
  ASSIGN_OR_RETURN(l.attn_norm, b.GetF32Vector(name("attn_norm.weight"), e));
  RETURN_IF_ERROR(BindQkv(b, name(""), e, q_dim, kv_dim, l.attn));
  ASSIGN_OR_RETURN(l.attn.wo, b.GetMatrix(name("attn_output.weight"), q_dim, e));
  ASSIGN_OR_RETURN(l.attn.q_norm,
                   b.GetF32Vector(name("attn_q_norm.weight"), p.head_dim));
  ASSIGN_OR_RETURN(l.attn.k_norm,
                   b.GetF32Vector(name("attn_k_norm.weight"), p.head_dim));
  ASSIGN_OR_RETURN(l.ffn_norm, b.GetF32Vector(name("ffn_norm.weight"), e));
  ASSIGN_OR_RETURN(l.moe.router, b.GetMatrix(name("ffn_gate_inp.weight"), e, x));
  RETURN_IF_ERROR(BindRoutedExperts(b, name(""), e, f, x, l.moe));
  return l;
}

absl::StatusOr<Weights> BindWeights(TensorBinder& b, const Params& p,
                                    int64_t n_vocab) {
  Weights w;
  ASSIGN_OR_RETURN(w.head, BindOutputHead(b, p.n_embd, n_vocab));
  for (int64_t il = 0; il < p.n_layer; ++il) {
    ASSIGN_OR_RETURN(Layer l, BindLayer(b, p, il));
    w.layers.push_back(l);
  }
  return w;
}

// ---- Part 3: forward pass -------------------------------------------------

class Qwen3Moe final : public Model {
 public:
  Qwen3Moe(ModelInfo info, Params p, Weights w)
      : info_(std::move(info)),
        p_(p),
        w_(std::move(w)),
        attn_(AttentionConfigOf(p)),
        moe_(MoeConfigOf(p)) {}

  const ModelInfo& info() const override { return info_; }

 protected:
  std::vector<BlockStateShape> StateShapes() const override {
    BlockStateShape s;
    s.kv_dim = p_.n_head_kv * p_.head_dim;
    return std::vector<BlockStateShape>(p_.n_layer, s);
  }

  absl::Status ForwardImpl(absl::Span<const int32_t> tokens, State& state,
                           LogitRows rows, std::vector<float>* logits,
                           kernels::ThreadPool* pool) const override {
    const int64_t n = static_cast<int64_t>(tokens.size()), e = p_.n_embd;
    std::vector<float> x(n * e), xn(n * e), y(n * e);
    RETURN_IF_ERROR(EmbedTokens(w_.head.token_embd, tokens, x.data()));
    for (int64_t il = 0; il < p_.n_layer; ++il) {
      const Layer& l = w_.layers[il];
      RmsNormRows(x.data(), n, e, l.attn_norm, p_.eps, xn.data());
      RETURN_IF_ERROR(RunAttention(attn_, l.attn, xn.data(), n,
                                   state.position(), state.block(il), y.data(),
                                   pool));
      AddResidual(x.data(), y.data(), n * e);
      RmsNormRows(x.data(), n, e, l.ffn_norm, p_.eps, xn.data());
      RETURN_IF_ERROR(RunMoe(moe_, l.moe, xn.data(), n, y.data(), pool));
      AddResidual(x.data(), y.data(), n * e);
    }
    return ComputeLogits(w_.head.output, w_.head.output_norm, p_.eps, x.data(),
                         n, rows, logits, pool);
  }

 private:
  ModelInfo info_;
  Params p_;
  Weights w_;
  AttentionConfig attn_;
  MoeConfig moe_;
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
