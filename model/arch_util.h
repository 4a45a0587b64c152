// Pieces every architecture file uses: reading "<arch>.<key>" hyper-
// parameters with validation, the token embedding lookup and the LM head.
#ifndef SLUICE_MODEL_ARCH_UTIL_H_
#define SLUICE_MODEL_ARCH_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/thread_pool.h"
#include "model/attention.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/weights.h"

namespace sluice {

class GgufFile;

// Reads "<arch>.<suffix>" keys of a model's metadata. Errors name the file,
// the key and the offending value.
class ArchKeys {
 public:
  ArchKeys(const GgufFile& meta, std::string arch);

  // A required integer key with value >= min_value.
  absl::StatusOr<int64_t> Int(std::string_view suffix, int64_t min_value = 1) const;
  // An optional integer key (fallback when absent), value >= min_value.
  absl::StatusOr<int64_t> IntOr(std::string_view suffix, int64_t fallback,
                                int64_t min_value = 1) const;
  // A required positive float key.
  absl::StatusOr<float> PositiveFloat(std::string_view suffix) const;
  // Optional float, string and boolean keys (fallback when absent).
  absl::StatusOr<float> FloatOr(std::string_view suffix, float fallback) const;
  absl::StatusOr<std::string> StringOr(std::string_view suffix,
                                       std::string fallback) const;
  absl::StatusOr<bool> BoolOr(std::string_view suffix, bool fallback) const;
  bool Has(std::string_view suffix) const;
  // A required array of booleans.
  absl::StatusOr<std::vector<bool>> BoolArray(std::string_view suffix) const;
  // A required array of integers.
  absl::StatusOr<std::vector<int32_t>> IntArray(std::string_view suffix) const;

  // InvalidArgument "<file>: <arch>.<suffix> = <value>: <why>".
  absl::Status Invalid(std::string_view suffix, int64_t value,
                       std::string_view why) const;
  // The same for a value given as text ("<key> = \"<value>\": <why>").
  absl::Status InvalidString(std::string_view suffix, std::string_view value,
                             std::string_view why) const;

  const std::string& arch() const { return arch_; }
  std::string Key(std::string_view suffix) const;

 private:
  const GgufFile& meta_;
  std::string arch_;
};

// Hyper-parameters every architecture here has: a trunk of attention (or
// attention-like) blocks, each followed by a routed-expert FFN.
struct TrunkParams {
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t n_rot = 0;
  int64_t n_expert = 0, n_expert_used = 0, expert_ff = 0;
  int64_t shared_ff = 0;  // 0: no shared expert
  int64_t context_length = 0;
  float eps = 0, freq_base = 0;
};

// Reads the attention and expert keys shared by the architectures: head
// counts, key/value length, expert counts and width, context length, RMS
// epsilon and RoPE base (not embedding_length, block_count, the RoPE
// dimension or a shared expert). p.n_embd must already be set (key_length
// defaults to n_embd / head_count). InvalidArgument unless head_count_kv
// divides head_count, value_length equals key_length and expert_used_count
// is <= expert_count and <= kMaxExpertsUsed.
absl::Status ReadAttentionAndExperts(const ArchKeys& keys, TrunkParams& p);

// The attention and MoE configurations of p (ungated attention, plain
// RoPE); architectures adjust the fields they differ in.
AttentionConfig AttentionConfigOf(const TrunkParams& p);
MoeConfig MoeConfigOf(const TrunkParams& p);

// Copies p's shape fields (n_embd .. shared_ff, train_context_length) into
// info; the layer-kind counts are the architecture's.
void FillTrunkInfo(const TrunkParams& p, ModelInfo* info);

// "blk.<il>.", the prefix of block il's tensor names.
std::string BlockPrefix(int64_t il);

// The tensors around the trunk: embedding table, final norm, LM head.
struct OutputHead {
  Matrix token_embd;
  const float* output_norm = nullptr;
  Matrix output;
};

absl::StatusOr<OutputHead> BindOutputHead(TensorBinder& b, int64_t n_embd,
                                          int64_t n_vocab);

// Binds an attention block's q, k, v: the fused "<prefix>attn_qkv.weight"
// (rows q_rows, kv_rows, kv_rows) when present, else attn_q/attn_k/attn_v.
absl::Status BindQkv(TensorBinder& b, const std::string& prefix, int64_t cols,
                     int64_t q_rows, int64_t kv_rows, AttentionWeights& a);

// Binds the routed experts: the fused "<prefix>ffn_gate_up_exps.weight"
// (per expert ff gate rows, then ff up rows) when present, else
// ffn_gate_exps and ffn_up_exps; then ffn_down_exps.
absl::Status BindRoutedExperts(TensorBinder& b, const std::string& prefix,
                               int64_t n_embd, int64_t ff, int64_t n_expert,
                               MoeWeights& m);

// Fills the fields of ModelInfo that come from the files themselves (arch,
// name, file name, vocabulary size, all_f32, weight bytes). InvalidArgument
// when tokenizer.ggml.tokens is missing.
absl::Status FillFileInfo(const ModelFiles& files, ModelInfo* info);

// x[t] = row tokens[t] of the embedding table (ne = [n_embd, n_vocab]),
// dequantized.
absl::Status EmbedTokens(const Matrix& table, absl::Span<const int32_t> tokens,
                         float* x);

// xn[t] = RMSNorm(x[t]; weight) for n_tok rows of n_embd values.
void RmsNormRows(const float* x, int64_t n_tok, int64_t n_embd,
                 const float* weight, float eps, float* xn);

// x[i] += y[i] for i in [0, n): a residual connection.
void AddResidual(float* x, const float* y, int64_t n);

// The LM head: RMSNorm(h; norm) then output, for the rows `rows` selects.
// h is [n_tok][n_embd] and is normalized in place.
absl::Status ComputeLogits(const Matrix& output, const float* norm, float eps,
                           float* h, int64_t n_tok, LogitRows rows,
                           std::vector<float>* logits,
                           ThreadPool* pool);

}  // namespace sluice

#endif  // SLUICE_MODEL_ARCH_UTIL_H_
