// Per-tensor file types: one type for every weight (Options::type) or a
// mix (Options::mix). The tables are documented in docs/BENCHMARKS.md,
// "Benchmark models"; keep them in step.
#include <string_view>

#include "absl/strings/str_cat.h"
#include "model/testing/mkmodel_internal.h"

namespace sluice::mkmodel {
namespace internal {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// llama.cpp's use_more_bits(i, n): the first and last eighth of the layers
// and every third one between get more bits in its *_M mixes.
bool UseMoreBits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// Q4_K_M-like (llama.cpp's Q4_K_M rules for these tensor names, simplified:
// attn_v counts attention blocks, ffn_down counts blocks).
GgmlType Q4KMType(const Options& o, const Spec& spec) {
  const std::string_view n = spec.name;
  if (n == "token_embd.weight") return GgmlType::kQ4_K;
  if (n == "output.weight") return GgmlType::kQ6_K;
  if (EndsWith(n, ".attn_v.weight")) {
    // Count attention blocks only: every block of qwen3moe, every
    // full_attention_interval-th of qwen35moe.
    const int every = o.arch == Arch::kQwen35Moe
                          ? static_cast<int>(o.shape.full_attention_interval)
                          : 1;
    const int ordinal = (spec.layer + 1) / every - 1;
    const int count = static_cast<int>(o.shape.n_layer) / every;
    return UseMoreBits(ordinal, count) ? GgmlType::kQ6_K : GgmlType::kQ4_K;
  }
  if (EndsWith(n, ".attn_qkv.weight")) return GgmlType::kQ5_K;
  if (EndsWith(n, ".ffn_down_exps.weight") || EndsWith(n, ".ffn_down_shexp.weight")) {
    return UseMoreBits(spec.layer, static_cast<int>(o.shape.n_layer)) ? GgmlType::kQ6_K
                                                                      : GgmlType::kQ4_K;
  }
  return GgmlType::kQ4_K;
}

// UD-Q1_0-like: the per-tensor types of the golden "*-mixed" files.
GgmlType UdQ1_0Type(const Spec& spec) {
  const std::string_view n = spec.name;
  if (n == "token_embd.weight") return GgmlType::kQ8_0;
  if (n == "output.weight") return GgmlType::kQ6_K;
  if (EndsWith(n, "_exps.weight")) return GgmlType::kQ1_0;
  if (EndsWith(n, ".ffn_down_shexp.weight")) return GgmlType::kQ6_K;
  if (EndsWith(n, "_shexp.weight")) return GgmlType::kQ5_K;
  return GgmlType::kQ4_K;
}

// A row length the wanted type's blocks do not divide falls back to Q8_0
// (32-element blocks) when a quantized type was asked for, else F32.
GgmlType Fit(const Spec& spec, GgmlType wanted) {
  if (spec.ne[0] % TraitsOf(wanted).block_size == 0) return wanted;
  if (wanted != GgmlType::kF16 && spec.ne[0] % 32 == 0) return GgmlType::kQ8_0;
  return GgmlType::kF32;
}

}  // namespace

void AssignTypes(const Options& o, std::vector<Spec>& specs) {
  for (Spec& spec : specs) {
    if (!spec.quantizable || spec.ne.size() < 2) {
      spec.type = GgmlType::kF32;
    } else if (o.mix == Mix::kNone) {
      // Plain types keep the original rule: F32 where the blocks do not fit.
      spec.type = spec.ne[0] % TraitsOf(o.type).block_size == 0 ? o.type : GgmlType::kF32;
    } else {
      spec.type = Fit(spec, o.mix == Mix::kQ4_K_M ? Q4KMType(o, spec) : UdQ1_0Type(spec));
    }
  }
}

uint32_t FileTypeId(const Options& o) {
  // llama_ftype: 15 is MOSTLY_Q4_K_M, the label the golden mixed files carry.
  if (o.mix != Mix::kNone) return 15;
  return o.type == GgmlType::kQ8_0 ? 7 : o.type == GgmlType::kF16 ? 1 : 0;
}

}  // namespace internal

absl::StatusOr<Mix> ParseMix(const std::string& name) {
  if (name == "none") return Mix::kNone;
  if (name == "q4_k_m") return Mix::kQ4_K_M;
  if (name == "ud_q1_0") return Mix::kUdQ1_0;
  return absl::InvalidArgumentError(
      absl::StrCat("mkmodel: --mix '", name, "' is not one of none, q4_k_m, ud_q1_0"));
}

const char* MixName(Mix mix) {
  switch (mix) {
    case Mix::kQ4_K_M: return "q4_k_m";
    case Mix::kUdQ1_0: return "ud_q1_0";
    default: return "none";
  }
}

}  // namespace sluice::mkmodel
