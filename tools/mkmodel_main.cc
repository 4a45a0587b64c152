// mkmodel: writes a deterministic random-weight GGUF model.
//
//   bazel run //tools:mkmodel -- --arch qwen35moe --out /tmp/m.gguf
//   mkmodel --arch qwen3moe --shape micro --type q8_0 --seed 7
//           --out /tmp/q3.gguf --split-count 3
//   mkmodel --shape bench35 --mix q4_k_m --out /tmp/bench35-q4_k_m.gguf
//   mkmodel --shape bench397 --n-layer 12 --mix ud_q1_0 --routing-locality 1
//           --out /tmp/bench397-ud_q1_0.gguf
//   mkmodel --arch deepseek2 --shape micro --out /tmp/ds2.gguf
//   mkmodel --arch deepseek2 --shape kimi_k2 --n-layer 4 --mix q4_k_m
//           --out /tmp/kimi-k2-4.gguf
//
// Flags (--name value or --name=value; '-' and '_' are interchangeable):
//   --arch qwen35moe|qwen3moe|deepseek2 (default qwen35moe)
//   --shape tiny|micro|bench35|bench397|kimi_k2 (tiny; the bench shapes are
//       qwen35moe only: Qwen3.5-35B-A3B / Qwen3.5-397B-A17B layer shapes,
//       8 blocks unless --n-layer says otherwise, 1300-token vocabulary;
//       kimi_k2 is deepseek2 only: Kimi-K2's layer shapes, 8 blocks unless
//       --n-layer says otherwise, 1300-token vocabulary)
//   --type f32|f16|q8_0 (f32): one type for every weight tensor
//   --mix none|q4_k_m|ud_q1_0 (none): per-tensor type mixes instead of
//       --type; the tables are in docs/BENCHMARKS.md, "Benchmark models"
//   --routing-locality S (0): S > 0 biases router rows so expert popularity
//       is biased by a router logit of -S*ln(1+rank) (S=0.5 already puts ~84% of layer 0 routings on the top 10% of experts); 0 = uniform random routers
//   --threads N (0 = one per hardware thread): generation and quantization
//       threads; the output does not depend on it
//   --seed N (1)  --out FILE (required)  --split-count N (1)
//   --name STR (general.name)
// and overrides of the named shape: --n-embd --n-layer --n-head --n-head-kv
//   --head-dim --n-expert --n-expert-used --expert-ff --shared-ff
//   --feed-forward --ssm-conv-kernel --ssm-state --ssm-group --ssm-dt-rank
//   --full-attention-interval --rope-dims --rope-sections a,b,c,d
//   --context-length --n-merges
// and for deepseek2: --q-lora-rank --kv-lora-rank --v-head-dim
//   --n-dense-lead --n-shared-experts --n-group --n-group-used
//   --gating-func (1 softmax, 2 sigmoid) --weights-norm (0|1)
//   --mla-fused (1: the older single attn_kv_b) --yarn-original-context
//   --weights-scale F --yarn-factor F (0: no rope scaling) --yarn-log-multiplier F
//
// Prints the paths written, then one "routing: ..." line (the expert
// distribution of layer 0's router over the vocabulary's embeddings, see
// tools/mkmodel_routing.h) and "wrote N bytes in S s".
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/strings/str_split.h"
#include "model/testing/mkmodel.h"
#include "model/testing/mkmodel_routing.h"

namespace sluice::mkmodel {
namespace {

constexpr char kUsage[] =
    "usage: mkmodel --out FILE [--arch qwen35moe|qwen3moe|deepseek2]\n"
    "               [--shape tiny|micro|bench35|bench397|kimi_k2]\n"
    "               [--type f32|f16|q8_0 | --mix none|q4_k_m|ud_q1_0]\n"
    "               [--routing-locality S] [--threads N]\n"
    "               [--seed N] [--split-count N] [--name S]\n"
    "               [--n-embd N --n-layer N ... shape overrides, see mkmodel_main.cc]\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "mkmodel: %s\n%s", message.c_str(), kUsage);
  return 2;
}

// Shape fields settable by flag.
std::map<std::string, uint32_t ModelShape::*> ShapeFlags() {
  return {
      {"n_embd", &ModelShape::n_embd},
      {"n_layer", &ModelShape::n_layer},
      {"n_head", &ModelShape::n_head},
      {"n_head_kv", &ModelShape::n_head_kv},
      {"head_dim", &ModelShape::head_dim},
      {"n_expert", &ModelShape::n_expert},
      {"n_expert_used", &ModelShape::n_expert_used},
      {"expert_ff", &ModelShape::expert_ff},
      {"shared_ff", &ModelShape::shared_ff},
      {"feed_forward", &ModelShape::feed_forward},
      {"ssm_conv_kernel", &ModelShape::ssm_conv_kernel},
      {"ssm_state", &ModelShape::ssm_state},
      {"ssm_group", &ModelShape::ssm_group},
      {"ssm_dt_rank", &ModelShape::ssm_dt_rank},
      {"full_attention_interval", &ModelShape::full_attention_interval},
      {"rope_dims", &ModelShape::rope_dims},
      {"context_length", &ModelShape::context_length},
      {"n_merges", &ModelShape::n_merges},
      {"q_lora_rank", &ModelShape::q_lora_rank},
      {"kv_lora_rank", &ModelShape::kv_lora_rank},
      {"v_head_dim", &ModelShape::v_head_dim},
      {"n_dense_lead", &ModelShape::n_dense_lead},
      {"n_shared_experts", &ModelShape::n_shared_experts},
      {"n_group", &ModelShape::n_group},
      {"n_group_used", &ModelShape::n_group_used},
      {"gating_func", &ModelShape::gating_func},
      {"weights_norm", &ModelShape::weights_norm},
      {"mla_fused", &ModelShape::mla_fused},
      {"yarn_original_context", &ModelShape::yarn_original_context},
  };
}

// Float shape fields settable by flag (deepseek2).
std::map<std::string, float ModelShape::*> FloatShapeFlags() {
  return {
      {"weights_scale", &ModelShape::weights_scale},
      {"yarn_factor", &ModelShape::yarn_factor},
      {"yarn_log_multiplier", &ModelShape::yarn_log_multiplier},
  };
}

// Parses "--name value" / "--name=value" into `flags` ('-' -> '_' in names).
// Returns an error message, or "" on success; sets *help for --help.
std::string ParseArgs(int argc, char** argv, std::map<std::string, std::string>& flags,
                      bool* help) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return "";
    }
    if (arg.rfind("--", 0) != 0) return "unexpected argument '" + arg + "'";
    arg = arg.substr(2);
    std::string value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return "flag --" + arg + " needs a value";
    }
    for (char& c : arg) c = c == '-' ? '_' : c;
    flags[arg] = value;
  }
  return "";
}

// Fills `o` from `flags`, consuming them. Returns an error message or "".
std::string ApplyFlags(std::map<std::string, std::string>& flags, Options& o) {
  auto take = [&](const std::string& k, const std::string& fallback) {
    auto it = flags.find(k);
    if (it == flags.end()) return fallback;
    std::string v = it->second;
    flags.erase(it);
    return v;
  };
  absl::StatusOr<Arch> arch = ParseArch(take("arch", "qwen35moe"));
  if (!arch.ok()) return std::string(arch.status().message());
  o.arch = *arch;
  absl::StatusOr<ModelShape> shape = NamedShape(o.arch, take("shape", "tiny"));
  if (!shape.ok()) return std::string(shape.status().message());
  o.shape = *shape;
  const std::string type = take("type", "f32");
  std::optional<GgmlTypeTraits> traits = LookupGgmlTypeByName(type);
  if (!traits) return "--type '" + type + "' is not a ggml type name";
  o.type = traits->type;
  absl::StatusOr<Mix> mix = ParseMix(take("mix", "none"));
  if (!mix.ok()) return std::string(mix.status().message());
  o.mix = *mix;
  if (!absl::SimpleAtof(take("routing_locality", "0"), &o.routing_locality)) {
    return "--routing-locality needs a number";
  }
  if (!absl::SimpleAtoi(take("threads", "0"), &o.threads) || o.threads < 0) {
    return "--threads needs a non-negative integer";
  }
  o.name = take("name", "");
  if (!absl::SimpleAtoi(take("seed", "1"), &o.seed)) return "--seed needs an integer";
  if (!absl::SimpleAtoi(take("split_count", "1"), &o.split_count)) {
    return "--split-count needs an integer";
  }
  if (flags.count("rope_sections")) {
    std::vector<std::string> parts = absl::StrSplit(take("rope_sections", ""), ',');
    bool ok = parts.size() == 4;
    for (size_t i = 0; ok && i < 4; ++i) {
      ok = absl::SimpleAtoi(parts[i], &o.shape.rope_sections[i]);
    }
    if (!ok) return "--rope-sections needs 4 comma-separated integers";
  }
  for (const auto& [name, field] : ShapeFlags()) {
    if (flags.count(name) && !absl::SimpleAtoi(take(name, ""), &(o.shape.*field))) {
      return "--" + name + " needs a non-negative integer";
    }
  }
  for (const auto& [name, field] : FloatShapeFlags()) {
    if (flags.count(name) && !absl::SimpleAtof(take(name, ""), &(o.shape.*field))) {
      return "--" + name + " needs a number";
    }
  }
  if (!flags.empty()) return "unknown flag --" + flags.begin()->first;
  return "";
}

int Main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  bool help = false;
  if (std::string error = ParseArgs(argc, argv, flags, &help); !error.empty()) {
    return Fail(error);
  }
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string out = flags.count("out") ? flags["out"] : "";
  flags.erase("out");
  if (out.empty()) return Fail("--out is required");
  Options o;
  if (std::string error = ApplyFlags(flags, o); !error.empty()) return Fail(error);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::string>> paths = WriteModel(o, out);
  if (!paths.ok()) {
    std::fprintf(stderr, "mkmodel: %s\n", std::string(paths.status().message()).c_str());
    return 1;
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  uint64_t bytes = 0;
  for (const std::string& p : *paths) {
    std::printf("%s\n", p.c_str());
    std::error_code ec;
    bytes += std::filesystem::file_size(p, ec);
  }
  absl::StatusOr<RoutingStats> routing = MeasureRouting(o);
  if (!routing.ok()) {
    std::fprintf(stderr, "mkmodel: %s\n", std::string(routing.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", FormatRoutingStats(o, *routing).c_str());
  std::printf("wrote %llu bytes in %.1f s\n", static_cast<unsigned long long>(bytes), seconds);
  return 0;
}

}  // namespace
}  // namespace sluice::mkmodel

int main(int argc, char** argv) { return sluice::mkmodel::Main(argc, argv); }
