// Deterministic random-weight GGUF models for tests, demos and benchmarks.
//
// WriteModel() writes a qwen35moe, qwen3moe or deepseek2 model with the
// metadata keys, tensor names and shapes of the goldens
// (/work/shared/goldens/README.md, "Tensor names and shapes";
// ../goldens-deepseek2/README.md), a small byte-level BPE vocabulary (256 byte
// tokens in GPT-2 byte-to-unicode spelling, then merges, then the control
// tokens <|endoftext|> <|im_start|> <|im_end|>; tokenizer.ggml.model "gpt2",
// pre "qwen2"), and weights drawn from a seeded generator: matrices
// N(0,1)/sqrt(fan_in) (residual output projections 0.3x), norms 1 + small
// noise, ssm_a negative, ssm_dt.bias small, exp_probs_b 0.1 N(0,1). The
// same options give the same
// bytes on every machine (the generator is splitmix64 + Box-Muller in double).
//
// Tensors are generated and written one at a time (a tensor's data is the only
// large allocation), so output size is bounded by disk, not RAM, apart from
// the largest single tensor.
//
// Types: kF32, kF16 or kQ8_0. With kF16/kQ8_0, every 2-D/3-D ".weight" tensor
// takes that type (Q8_0 falls back to F32 where ne[0] % 32 != 0); norms, the
// routers (ffn_gate_inp*), ssm_conv1d, ssm_a and ssm_dt.bias stay F32, as in
// the golden q8_0 files. A Mix instead gives each tensor the type of a
// llama.cpp-like mix (tables in docs/BENCHMARKS.md, "Benchmark models").
//
// Large models: chunks of rows are generated and quantized on several
// threads while the previous batch is written; values do not depend on the
// thread count or chunk size (the generator is seekable).
//
// Thread-safety: WriteModel is reentrant (no global state).
#ifndef SLUICE_MODEL_TESTING_MKMODEL_H_
#define SLUICE_MODEL_TESTING_MKMODEL_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "format/ggml_type.h"

namespace sluice::mkmodel {

enum class Arch { kQwen35Moe, kQwen3Moe, kDeepseek2 };

// Hyper-parameters. Fields that do not apply to an arch are ignored
// (ssm_*, full_attention_interval, shared_ff and rope_sections for qwen3moe;
// for deepseek2 everything of qwen35moe but rope_dims, and n_head_kv: its
// files say 1 in the split layout, n_head in the fused one).
//
// deepseek2: head_dim is the key head (nope + rope_dims,
// attention.key_length_mla), v_head_dim the value head; feed_forward is the
// width of the n_dense_lead dense blocks; each of the n_shared_experts
// shared experts is expert_ff wide (the file has one shexp tensor of
// n_shared_experts * expert_ff rows).
struct ModelShape {
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t expert_ff = 0;
  uint32_t shared_ff = 0;         // qwen35moe shared expert
  uint32_t feed_forward = 0;      // qwen3moe feed_forward_length (unused)
  uint32_t ssm_conv_kernel = 0;
  uint32_t ssm_state = 0;
  uint32_t ssm_group = 0;
  uint32_t ssm_dt_rank = 0;       // v heads; ssm.inner_size = state * dt_rank
  uint32_t full_attention_interval = 0;
  uint32_t rope_dims = 0;         // qwen35moe rope.dimension_count
  std::array<int32_t, 4> rope_sections = {0, 0, 0, 0};
  uint32_t context_length = 4096;
  float rope_freq_base = 0;
  float rms_eps = 1e-6f;
  uint32_t n_merges = 64;         // BPE merges; n_vocab = 256 + n_merges + 3
  // deepseek2 only.
  uint32_t q_lora_rank = 0;       // 0: attn_q instead of attn_q_a/_norm/_b
  uint32_t kv_lora_rank = 0;
  uint32_t v_head_dim = 0;
  uint32_t n_dense_lead = 0;      // leading_dense_block_count
  uint32_t n_shared_experts = 0;  // expert_shared_count
  uint32_t n_group = 0;           // expert_group_count (0, 1: no groups)
  uint32_t n_group_used = 0;      // expert_group_used_count
  uint32_t gating_func = 2;       // expert_gating_func: 1 softmax, 2 sigmoid
  uint32_t weights_norm = 1;      // expert_weights_norm (0 or 1)
  uint32_t mla_fused = 0;         // 1: the older attn_kv_b, no *_mla keys
  uint32_t yarn_original_context = 0;  // rope.scaling.original_context_length
  float weights_scale = 1.0f;     // expert_weights_scale
  float yarn_factor = 0;          // rope.scaling.factor; 0: no rope scaling
  float yarn_log_multiplier = 0;  // rope.scaling.yarn_log_multiplier
};

// "tiny" (the golden tiny shapes) and "micro" (the golden micro shapes) per
// arch; for qwen35moe also "bench35" (Qwen3.5-35B-A3B layer shapes, 8
// blocks) and "bench397" (Qwen3.5-397B-A17B layer shapes, 8 blocks unless
// n_layer is overridden), both with a 1300-token vocabulary; for deepseek2
// "micro" is the shape of ../goldens-deepseek2's model, "tiny" twice as
// wide, and "kimi_k2" Kimi-K2's layer shapes (hidden 7168, 64 heads, q LoRA
// 1536, KV LoRA 512, RoPE 64, key head 192, value head 128, 384 experts of
// 2048, 8 used, 1 shared, 1 dense lead block of 18432, sigmoid routing
// scaled 2.827, YaRN 32 over 4096; 8 blocks unless n_layer is overridden;
// the 1300-token vocabulary). InvalidArgument for any other name.
absl::StatusOr<ModelShape> NamedShape(Arch arch, const std::string& name);
absl::StatusOr<Arch> ParseArch(const std::string& name);  // "qwen35moe"...
const char* ArchName(Arch arch);

// Per-tensor type mixes (docs/BENCHMARKS.md has the tables).
enum class Mix {
  kNone,    // Options::type for every weight
  kQ4_K_M,  // llama.cpp Q4_K_M-like: Q4_K, some attn_v / ffn_down Q6_K
  kUdQ1_0,  // UD-Q1_0-like, as the golden "*-mixed": routed experts Q1_0
};
absl::StatusOr<Mix> ParseMix(const std::string& name);  // "none", "q4_k_m", "ud_q1_0"
const char* MixName(Mix mix);

struct Options {
  Arch arch = Arch::kQwen35Moe;
  ModelShape shape;            // e.g. from NamedShape
  GgmlType type = GgmlType::kF32;  // used when mix == kNone
  Mix mix = Mix::kNone;
  // 0: router rows and embeddings as drawn (routing close to uniform).
  // S > 0: a shared direction in the token embeddings and a per-expert
  // multiple of it in every router row give expert e the logit bias
  // -S ln(1 + rank_e) (rank a per-layer random order): Zipf-like popularity
  // with exponent ~S. S = 0 leaves every byte as before.
  float routing_locality = 0;
  uint64_t seed = 1;
  uint32_t split_count = 1;    // > 1: "<out minus .gguf>-NNNNN-of-MMMMM.gguf"
  std::string name;            // general.name; defaults to "<arch>-sluice"
  // Rows of random values generated per write call; bounds memory for very
  // large tensors. Does not change the output.
  uint64_t chunk_elements = 1 << 20;
  // Threads generating and quantizing; 0: one per hardware thread. Does
  // not change the output.
  int threads = 0;
};

// Checks the shape (divisibility, head counts, block sizes) and writes the
// model to `out_path` (or to the split set derived from it). Returns the
// paths written, in shard order.
absl::StatusOr<std::vector<std::string>> WriteModel(const Options& options,
                                                    const std::string& out_path);

// The values of tensor `name` as WriteModel draws them (before conversion to
// the file type), in ggml order (ne[0] fastest). NotFound for a name the
// model does not have. Lets tests check a written model's bytes.
absl::StatusOr<std::vector<float>> GenerateTensor(const Options& options,
                                                  const std::string& name);

// The vocabulary WriteModel embeds (tokens in id order and the merges),
// exposed so tokenizer tests can assert against it.
struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // 1 normal, 3 control
  std::vector<std::string> merges;   // "a b" pairs in rank order
};
// Merges are learned by a small deterministic BPE trainer over an embedded
// English text (287 merges); beyond that, learned tokens are extended by a
// common letter (about 12 per learned token). InvalidArgument if even that
// gives fewer than n_merges.
absl::StatusOr<Vocab> BuildVocab(uint32_t n_merges);
// The values of one tensor in ggml order (ne[0] fastest), asked for by name
// and shape (ggml order).
using TensorValues = std::function<absl::StatusOr<std::vector<float>>(
    const std::string& name, const std::vector<uint64_t>& ne)>;

// WriteModel with `vocab` for the vocabulary and `values` for the weights
// instead of drawn ones (a trained model; tools/import_weights): the same
// metadata, tensor names, shapes, order and per-tensor types, in one file.
// routing_locality, seed, chunk_elements and threads do not apply.
// `vocab` must have BuildVocab's layout, which the tokenizer keys assume:
// 256 byte tokens, the merges' tokens, then the control tokens
// <|endoftext|> (bos, pad) <|im_start|> <|im_end|> (eos).
// Errors: WriteModel's for the options; values' own; InvalidArgument when
// split_count is not 1, the vocabulary's layout differs or values returns
// a count other than the product of ne for a tensor (naming it).
absl::Status WriteModelWithValues(const Options& options, const Vocab& vocab,
                                  const TensorValues& values,
                                  const std::string& out_path);

// GPT-2's byte-to-unicode spelling of byte b (UTF-8), e.g. ' ' -> "Ġ".
std::string ByteToUnicode(uint8_t b);

// IEEE half from float, round-to-nearest-even (used for F16 and Q8_0 scales).
uint16_t FloatToHalf(float f);
// Quantizes `n` floats (n % 32 == 0) to Q8_0 blocks appended to `out`:
// per block d = max|x| / 127 stored as fp16, q = round(x / d) with the
// unrounded d (as ggml's reference quantizer does), halves away from zero.
void QuantizeQ8_0(const float* x, uint64_t n, std::vector<uint8_t>& out);

}  // namespace sluice::mkmodel

#endif  // SLUICE_MODEL_TESTING_MKMODEL_H_
