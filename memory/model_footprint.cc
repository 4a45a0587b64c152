#include "memory/model_footprint.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/gguf_file.h"

namespace sluice::memory {
namespace {

constexpr uint64_t kFloat = sizeof(float);
constexpr uint64_t kMicroBatch = 512;  // Model::kMaxMicroBatch
constexpr uint64_t kLogitsCap = 256ull << 20;  // the CUDA workspace's cap

// "blk.12.ffn_up_exps.weight" -> 12 and "ffn_up_exps.weight"; false for
// names outside blk.N.
bool SplitBlockName(const std::string& name, int64_t* block, std::string* rest) {
  if (!absl::StartsWith(name, "blk.")) return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return false;
  if (!absl::SimpleAtoi(absl::string_view(name).substr(4, dot - 4), block)) return false;
  *rest = name.substr(dot + 1);
  return true;
}

struct Layer {
  uint64_t slot_bytes = 0;
  uint64_t n_experts = 0;
  uint64_t kv_dim = 0;
  uint64_t latent_kv_dim = 0;  // MLA: one row of latent + RoPE key, no values
  // MLA's older fused attn_kv_b: [latent] x heads (nope + v) rows, and the
  // heads' v widths (attn_output's input), so heads x nope = the difference.
  uint64_t kv_b_cols = 0, kv_b_rows = 0, out_cols = 0;
  uint64_t conv_floats = 0;
  uint64_t v_heads = 0;
  uint64_t state_size = 0;
  uint64_t expert_ff = 0;
};

}  // namespace

absl::StatusOr<ModelFootprint> FootprintOf(const TensorTable& table, int64_t context,
                                           int64_t sessions) {
  if (context < 1 || sessions < 1) {
    return absl::InvalidArgumentError(absl::StrCat("model ", table.model_name(), ": context ",
                                                   context, " and sessions ", sessions,
                                                   " must be >= 1"));
  }
  std::map<int64_t, Layer> layers;
  uint64_t n_embd = 0, n_vocab = 0;
  for (const TensorEntry& t : table.entries()) {
    if (t.name == "token_embd.weight") {
      n_embd = t.ne[0];
      n_vocab = t.ne[1];
    }
    int64_t block = 0;
    std::string rest;
    if (!SplitBlockName(t.name, &block, &rest)) continue;
    Layer& l = layers[block];
    if (rest == "ffn_gate_exps.weight" || rest == "ffn_up_exps.weight" ||
        rest == "ffn_down_exps.weight") {
      if (t.n_dims != 3) {
        return absl::InvalidArgumentError(absl::StrCat("model ", table.model_name(), ": tensor '",
                                                       t.name, "' has ", t.n_dims,
                                                       " dims; a routed expert tensor has 3"));
      }
      if (l.n_experts != 0 && l.n_experts != t.ne[2]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model ", table.model_name(), ": tensor '", t.name, "' has ", t.ne[2],
            " experts; the other expert tensors of block ", block, " have ", l.n_experts));
      }
      l.n_experts = t.ne[2];
      l.slot_bytes += t.n_bytes / t.ne[2];
      if (rest == "ffn_gate_exps.weight") l.expert_ff = t.ne[1];
    } else if (rest == "attn_k.weight") {
      l.kv_dim = t.ne[1];
    } else if (rest == "attn_kv_a_mqa.weight") {
      l.latent_kv_dim = t.ne[1];
    } else if (rest == "attn_kv_b.weight") {
      l.kv_b_cols = t.ne[0];
      l.kv_b_rows = t.ne[1];
    } else if (rest == "attn_output.weight") {
      l.out_cols = t.ne[0];
    } else if (rest == "ssm_conv1d.weight") {
      l.conv_floats = (t.ne[0] > 0 ? t.ne[0] - 1 : 0) * t.ne[1];
    } else if (rest == "ssm_a") {
      l.v_heads = t.ne[0];
    } else if (rest == "ssm_norm.weight") {
      l.state_size = t.ne[0];
    }
  }
  ModelFootprint f;
  f.dense_bytes = table.dense_bytes();
  f.expert_bytes = table.expert_bytes();
  f.context = context;
  f.sessions = sessions;
  uint64_t expert_ff = 0, expert_used_guess = 0;
  f.layers = static_cast<int64_t>(layers.size());
  for (const auto& [block, l] : layers) {
    f.slot_bytes = std::max(f.slot_bytes, l.slot_bytes);
    f.experts += static_cast<int64_t>(l.n_experts);
    f.expert_layers += l.n_experts > 0 ? 1 : 0;
    f.state_bytes_per_token += (2 * l.kv_dim + l.latent_kv_dim) * kFloat;
    f.kv_ranges += (l.kv_dim > 0 ? 2 : 0) + (l.latent_kv_dim > 0 ? 1 : 0);
    f.state_fixed_bytes += (l.conv_floats + l.v_heads * l.state_size * l.state_size) * kFloat;
    expert_ff = std::max(expert_ff, l.expert_ff);
    // The CUDA backend holds a fused attn_kv_b's K_b unfused to f32 beside
    // the file's tensor (model/mla.h UnfusedKb).
    if (l.kv_b_rows > l.out_cols) f.dense_bytes += (l.kv_b_rows - l.out_cols) * l.kv_b_cols * kFloat;
    expert_used_guess = std::max<uint64_t>(expert_used_guess, l.n_experts > 0 ? 8 : 0);
  }
  // Activations of one micro-batch: a dozen rows of n_embd, the routed
  // experts' gate/up/down rows (top-8 assumed; the exact count is in the
  // architecture's keys, which memory/ does not read), and the logits.
  const uint64_t per_token =
      (16 * n_embd + expert_used_guess * (2 * expert_ff + n_embd)) * kFloat;
  f.workspace_bytes =
      kMicroBatch * per_token + std::min(kLogitsCap, kMicroBatch * n_vocab * kFloat);
  return f;
}

absl::StatusOr<ModelFootprint> FootprintOf(const ModelFiles& files, int64_t context,
                                           int64_t sessions) {
  ASSIGN_OR_RETURN(ModelFootprint f, FootprintOf(files.tensors(), context, sessions));
  if (f.experts == 0) return f;
  const GgufFile& meta = files.metadata();
  ASSIGN_OR_RETURN(const std::string arch, meta.GetString("general.architecture"));
  const std::string key = absl::StrCat(arch, ".expert_used_count");
  ASSIGN_OR_RETURN(const uint64_t used, meta.GetU64(key));
  const int64_t per_layer = f.experts / f.expert_layers;
  if (used < 1 || used > static_cast<uint64_t>(per_layer)) {
    return absl::InvalidArgumentError(absl::StrCat(meta.file_name(), ": ", key, " = ", used,
                                                   ": must be in [1, ", per_layer,
                                                   "] (the routed experts of a layer)"));
  }
  f.experts_used = static_cast<int64_t>(used);
  return f;
}

}  // namespace sluice::memory
