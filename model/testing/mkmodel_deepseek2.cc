// deepseek2's writer: its tensors in the order of ../goldens-deepseek2's
// model, its named shapes and checks, its metadata.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/testing/mkmodel_internal.h"

namespace sluice::mkmodel::internal {

// A deepseek2 block, in the order of ../goldens-deepseek2's model.
void AddDeepseek2Block(const ModelShape& s, uint32_t l, const std::string& p,
                       std::vector<Spec>& out) {
  const uint64_t e = s.n_embd, h = s.n_head, lat = s.kv_lora_rank;
  const uint64_t dk = s.head_dim, dv = s.v_head_dim, nope = dk - s.rope_dims;
  out.push_back(Vector(p + "attn_norm.weight", e, Init::kNorm));
  if (s.q_lora_rank > 0) out.push_back(Vector(p + "attn_q_a_norm.weight", s.q_lora_rank, Init::kNorm));
  out.push_back(Vector(p + "attn_kv_a_norm.weight", lat, Init::kNorm));
  if (s.q_lora_rank > 0) {
    out.push_back(Matrix(p + "attn_q_a.weight", {e, s.q_lora_rank}));
    out.push_back(Matrix(p + "attn_q_b.weight", {s.q_lora_rank, h * dk}));
  } else {
    out.push_back(Matrix(p + "attn_q.weight", {e, h * dk}));
  }
  out.push_back(Matrix(p + "attn_kv_a_mqa.weight", {e, lat + s.rope_dims}));
  if (s.mla_fused) {
    Spec kv_b = Matrix(p + "attn_kv_b.weight", {lat, h * (nope + dv)});
    kv_b.init = Init::kFusedKvB;
    out.push_back(kv_b);
  } else {
    out.push_back(Matrix(p + "attn_k_b.weight", {nope, lat, h}));
    out.push_back(Matrix(p + "attn_v_b.weight", {lat, dv, h}));
  }
  out.push_back(Matrix(p + "attn_output.weight", {h * dv, e}, kResidualScale));
  out.push_back(Vector(p + "ffn_norm.weight", e, Init::kNorm));
  if (l < s.n_dense_lead) {
    out.push_back(Matrix(p + "ffn_gate.weight", {e, s.feed_forward}));
    out.push_back(Matrix(p + "ffn_up.weight", {e, s.feed_forward}));
    out.push_back(Matrix(p + "ffn_down.weight", {s.feed_forward, e}, kResidualScale));
    return;
  }
  const uint64_t x = s.n_expert, f = s.expert_ff;
  Spec router = Matrix(p + "ffn_gate_inp.weight", {e, x});
  router.quantizable = false;
  out.push_back(router);
  out.push_back(Vector(p + "exp_probs_b.bias", x, Init::kBias));
  out.push_back(Matrix(p + "ffn_gate_exps.weight", {e, f, x}));
  out.push_back(Matrix(p + "ffn_up_exps.weight", {e, f, x}));
  out.push_back(Matrix(p + "ffn_down_exps.weight", {f, e, x}, kResidualScale));
  if (s.n_shared_experts > 0) {
    const uint64_t fs = uint64_t{s.n_shared_experts} * f;
    out.push_back(Matrix(p + "ffn_gate_shexp.weight", {e, fs}));
    out.push_back(Matrix(p + "ffn_up_shexp.weight", {e, fs}));
    out.push_back(Matrix(p + "ffn_down_shexp.weight", {fs, e}, kResidualScale));
  }
}

// deepseek2 shapes: "micro" is ../goldens-deepseek2's model (MLA split
// layout, sigmoid routing with bias in 4 groups of which 2 are used, one
// dense lead block, YaRN 4 over 1024), "tiny" the same twice as wide,
// "kimi_k2" Kimi-K2's layers.
absl::StatusOr<ModelShape> Deepseek2Shape(const std::string& name) {
  ModelShape s;
  s.n_head_kv = 1;
  s.rms_eps = 1e-6f;
  s.gating_func = 2;
  s.weights_norm = 1;
  if (name == "kimi_k2") {
    s.n_embd = 7168;
    s.n_layer = 8;
    s.n_head = 64;
    s.q_lora_rank = 1536;
    s.kv_lora_rank = 512;
    s.rope_dims = 64;
    s.head_dim = 128 + 64;
    s.v_head_dim = 128;
    s.n_expert = 384;
    s.n_expert_used = 8;
    s.expert_ff = 2048;
    s.n_shared_experts = 1;
    s.n_dense_lead = 1;
    s.feed_forward = 18432;
    s.n_group = 1;
    s.n_group_used = 1;
    s.weights_scale = 2.827f;
    s.rope_freq_base = 50000.0f;
    s.context_length = 131072;
    s.yarn_factor = 32.0f;
    s.yarn_original_context = 4096;
    s.yarn_log_multiplier = 0.1f;
    s.n_merges = 1300 - 256 - 3;
    return s;
  }
  const bool tiny = name == "tiny";
  if (!tiny && name != "micro") {
    return absl::InvalidArgumentError(absl::StrCat(
        "mkmodel: --shape '", name, "' is not one of tiny, micro, kimi_k2 (deepseek2)"));
  }
  const uint32_t w = tiny ? 2 : 1;
  s.n_embd = 128 * w;
  s.n_layer = 4;
  s.n_head = 4 * w;
  s.q_lora_rank = 64 * w;
  s.kv_lora_rank = 32 * w;
  s.rope_dims = 16 * w;
  s.head_dim = 32 * w + s.rope_dims;
  s.v_head_dim = 32 * w;
  s.n_expert = 16 * w;
  s.n_expert_used = 4;
  s.expert_ff = 64 * w;
  s.n_shared_experts = 1;
  s.n_dense_lead = 1;
  s.feed_forward = 256 * w;
  s.n_group = 4;
  s.n_group_used = 2;
  s.weights_scale = 2.5f;
  s.rope_freq_base = 10000.0f;
  s.context_length = 4096;
  s.yarn_factor = 4.0f;
  s.yarn_original_context = 1024;
  s.yarn_log_multiplier = 0.1f;
  return s;
}


absl::Status CheckDeepseek2Shape(const ModelShape& s) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("mkmodel: shape: deepseek2: ", what));
  };
  if (s.kv_lora_rank == 0 || s.v_head_dim == 0) {
    return bad("kv_lora_rank and v_head_dim must be positive");
  }
  if (s.rope_dims == 0 || s.rope_dims % 2 != 0 || s.rope_dims >= s.head_dim) {
    return bad(absl::StrCat("rope_dims ", s.rope_dims,
                            " must be even, positive and < head_dim ", s.head_dim,
                            " (head_dim = nope + rope_dims)"));
  }
  if (s.n_dense_lead > s.n_layer || (s.n_dense_lead > 0 && s.feed_forward == 0)) {
    return bad(absl::StrCat("n_dense_lead ", s.n_dense_lead,
                            " must be <= n_layer, and its blocks need feed_forward > 0"));
  }
  if (s.gating_func != 1 && s.gating_func != 2) {
    return bad(absl::StrCat("gating_func ", s.gating_func, " must be 1 (softmax) or 2 (sigmoid)"));
  }
  if (s.n_group > 1 &&
      (s.n_expert % s.n_group != 0 || s.n_group_used == 0 || s.n_group_used > s.n_group ||
       s.n_group_used * (s.n_expert / s.n_group) < s.n_expert_used)) {
    return bad(absl::StrCat("n_group ", s.n_group, " must divide n_expert ", s.n_expert,
                            " and n_group_used ", s.n_group_used,
                            " groups must hold n_expert_used experts"));
  }
  if (s.yarn_factor < 0 || !std::isfinite(s.yarn_factor)) {
    return bad("yarn_factor must be >= 0 (0: no rope scaling)");
  }
  return absl::OkStatus();
}

// deepseek2's metadata, in the key order of ../goldens-deepseek2's model
// (the tokenizer first, the file type last).
std::vector<GgufKv> Deepseek2Metadata(const Options& o, const Vocab& v) {
  const ModelShape& s = o.shape;
  const std::string a = "deepseek2.";
  std::vector<GgufKv> kv;
  auto u32 = [&](const std::string& k, uint32_t x) {
    kv.push_back({a + k, GgufValue::Scalar<uint32_t>(x)});
  };
  auto f32 = [&](const std::string& k, float x) {
    kv.push_back({a + k, GgufValue::Scalar<float>(x)});
  };
  kv.push_back({"general.architecture", GgufValue::String("deepseek2")});
  kv.push_back({"general.name",
                GgufValue::String(o.name.empty() ? "deepseek2-sluice" : o.name)});
  AddTokenizer(v, kv);
  const uint32_t nope = s.head_dim - s.rope_dims;
  u32("context_length", s.context_length);
  u32("embedding_length", s.n_embd);
  u32("block_count", s.n_layer);
  if (s.n_dense_lead > 0) u32("feed_forward_length", s.feed_forward);
  u32("attention.head_count", s.n_head);
  if (s.mla_fused) {
    u32("attention.head_count_kv", s.n_head);
    u32("attention.key_length", nope + s.rope_dims);
    u32("attention.value_length", s.v_head_dim);
  } else {
    // The latent cache as one MQA head; the per-head widths in *_mla.
    u32("attention.head_count_kv", 1);
    u32("attention.key_length", s.kv_lora_rank + s.rope_dims);
    u32("attention.value_length", s.kv_lora_rank);
    u32("attention.key_length_mla", s.head_dim);
    u32("attention.value_length_mla", s.v_head_dim);
  }
  if (s.q_lora_rank > 0) u32("attention.q_lora_rank", s.q_lora_rank);
  u32("attention.kv_lora_rank", s.kv_lora_rank);
  u32("rope.dimension_count", s.rope_dims);
  u32("leading_dense_block_count", s.n_dense_lead);
  u32("expert_count", s.n_expert);
  u32("expert_used_count", s.n_expert_used);
  u32("expert_shared_count", s.n_shared_experts);
  u32("expert_feed_forward_length", s.expert_ff);
  if (s.n_group > 1) {
    u32("expert_group_count", s.n_group);
    u32("expert_group_used_count", s.n_group_used);
  }
  u32("expert_gating_func", s.gating_func);
  if (s.yarn_factor > 0) u32("rope.scaling.original_context_length", s.yarn_original_context);
  f32("attention.layer_norm_rms_epsilon", s.rms_eps);
  f32("rope.freq_base", s.rope_freq_base);
  f32("expert_weights_scale", s.weights_scale);
  kv.push_back({a + "expert_weights_norm", GgufValue::Scalar<bool>(s.weights_norm != 0)});
  if (s.yarn_factor > 0) {
    kv.push_back({a + "rope.scaling.type", GgufValue::String("yarn")});
    f32("rope.scaling.factor", s.yarn_factor);
    f32("rope.scaling.yarn_log_multiplier", s.yarn_log_multiplier);
  }
  if (o.type == GgmlType::kQ8_0 || o.mix != Mix::kNone) {
    kv.push_back({"general.quantization_version", GgufValue::Scalar<uint32_t>(2)});
  }
  kv.push_back({"general.file_type", GgufValue::Scalar<uint32_t>(internal::FileTypeId(o))});
  return kv;
}

}  // namespace sluice::mkmodel::internal
