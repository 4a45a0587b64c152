// qwen3moe: attention with Q/K norm and NEOX RoPE, then a routed-expert
// FFN, in every block.
//
//   h   = x + Attention(RMSNorm(x; attn_norm))
//   out = h + MoE(RMSNorm(h; ffn_norm))
#include <memory>
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

struct Params {
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_rot;
  int64_t n_expert, n_expert_used, expert_ff, context_length;
  float eps, freq_base;
};

absl::StatusOr<Params> ReadParams(const ModelFiles& files) {
  const ArchKeys keys(files.metadata(), "qwen3moe");
  Params p;
  ASSIGN_OR_RETURN(p.n_embd, keys.Int("embedding_length"));
  ASSIGN_OR_RETURN(p.n_layer, keys.Int("block_count"));
  ASSIGN_OR_RETURN(p.n_head, keys.Int("attention.head_count"));
  ASSIGN_OR_RETURN(p.n_head_kv, keys.Int("attention.head_count_kv"));
  ASSIGN_OR_RETURN(p.head_dim,
                   keys.IntOr("attention.key_length", p.n_embd / p.n_head));
  ASSIGN_OR_RETURN(const int64_t v_dim,
                   keys.IntOr("attention.value_length", p.head_dim));
  // llama.cpp rotates the whole head when rope.dimension_count is absent.
  ASSIGN_OR_RETURN(p.n_rot, keys.IntOr("rope.dimension_count", p.head_dim));
  ASSIGN_OR_RETURN(p.n_expert, keys.Int("expert_count"));
  ASSIGN_OR_RETURN(p.n_expert_used, keys.Int("expert_used_count"));
  ASSIGN_OR_RETURN(p.expert_ff, keys.Int("expert_feed_forward_length"));
  ASSIGN_OR_RETURN(p.context_length, keys.Int("context_length"));
  ASSIGN_OR_RETURN(p.eps, keys.PositiveFloat("attention.layer_norm_rms_epsilon"));
  ASSIGN_OR_RETURN(p.freq_base, keys.PositiveFloat("rope.freq_base"));
  if (p.n_head % p.n_head_kv != 0) {
    return keys.Invalid("attention.head_count_kv", p.n_head_kv,
                        absl::StrCat("must divide head_count ", p.n_head));
  }
  if (v_dim != p.head_dim) {
    return keys.Invalid("attention.value_length", v_dim,
                        absl::StrCat("must equal key_length ", p.head_dim));
  }
  if (p.n_rot != p.head_dim) {
    return keys.Invalid("rope.dimension_count", p.n_rot,
                        absl::StrCat("must equal key_length ", p.head_dim));
  }
  if (p.n_expert_used > p.n_expert || p.n_expert_used > kMaxExpertsUsed) {
    return keys.Invalid("expert_used_count", p.n_expert_used,
                        absl::StrCat("must be <= expert_count ", p.n_expert,
                                     " and <= ", kMaxExpertsUsed));
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
  Matrix token_embd;
  const float* output_norm;
  Matrix output;
  std::vector<Layer> layers;
};

absl::StatusOr<Layer> BindLayer(TensorBinder& b, const Params& p, int64_t il) {
  const auto name = [il](std::string_view n) {
    return absl::StrCat("blk.", il, ".", std::string(n));
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
  ASSIGN_OR_RETURN(w.token_embd,
                   b.GetMatrix("token_embd.weight", p.n_embd, n_vocab));
  ASSIGN_OR_RETURN(w.output_norm, b.GetF32Vector("output_norm.weight", p.n_embd));
  ASSIGN_OR_RETURN(w.output, b.GetMatrix("output.weight", p.n_embd, n_vocab));
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
      : info_(std::move(info)), p_(p), w_(std::move(w)) {
    attn_.n_embd = p.n_embd;
    attn_.n_head = p.n_head;
    attn_.n_head_kv = p.n_head_kv;
    attn_.head_dim = p.head_dim;
    attn_.eps = p.eps;
    attn_.gated = false;
    attn_.rope.n_rot = p.n_rot;
    attn_.rope.freq_base = p.freq_base;
    moe_.n_embd = p.n_embd;
    moe_.n_expert = p.n_expert;
    moe_.n_expert_used = p.n_expert_used;
    moe_.expert_ff = p.expert_ff;
  }

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
    RETURN_IF_ERROR(EmbedTokens(w_.token_embd, tokens, x.data()));
    for (int64_t il = 0; il < p_.n_layer; ++il) {
      const Layer& l = w_.layers[il];
      for (int64_t t = 0; t < n; ++t) {
        RmsNorm(&x[t * e], e, l.attn_norm, p_.eps, &xn[t * e]);
      }
      RETURN_IF_ERROR(RunAttention(attn_, l.attn, xn.data(), n,
                                   state.position(), state.block(il), y.data(),
                                   pool));
      for (int64_t i = 0; i < n * e; ++i) x[i] += y[i];
      for (int64_t t = 0; t < n; ++t) {
        RmsNorm(&x[t * e], e, l.ffn_norm, p_.eps, &xn[t * e]);
      }
      RETURN_IF_ERROR(RunMoe(moe_, l.moe, xn.data(), n, y.data(), pool));
      for (int64_t i = 0; i < n * e; ++i) x[i] += y[i];
    }
    return ComputeLogits(w_.output, w_.output_norm, p_.eps, x.data(), n, rows,
                         logits, pool);
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
  info.n_embd = p.n_embd;
  info.n_layer = p.n_layer;
  info.n_head = p.n_head;
  info.n_head_kv = p.n_head_kv;
  info.head_dim = p.head_dim;
  info.n_rot = p.n_rot;
  info.n_expert = p.n_expert;
  info.n_expert_used = p.n_expert_used;
  info.expert_ff = p.expert_ff;
  info.n_attention_layers = p.n_layer;
  info.train_context_length = p.context_length;
  return std::unique_ptr<Model>(
      std::make_unique<Qwen3Moe>(std::move(info), p, std::move(w)));
}

}  // namespace sluice
