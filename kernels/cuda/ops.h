// The element-wise, normalization, attention, Gated DeltaNet and MoE routing
// kernels of the forward pass on the GPU, behind a plain C++ header (the
// products of weight matrices are quant_matmul.h).
//
// Every function only enqueues work on `stream` and returns at once; launch
// errors surface through LastLaunchError (device.h). Pointers are device
// memory; activations are F32, row-major. Position-dependent kernels read
// the batch's first position from device memory (d_pos0), so a captured
// decode step replays correctly at any position.
//
// Each kernel computes what its CPU counterpart in model/ computes (named
// beside each function), in F32 with sums of squares in double where the
// CPU sums in double; summation order differs, so results agree to rounding,
// not bit for bit.
#ifndef SLUICE_KERNELS_CUDA_OPS_H_
#define SLUICE_KERNELS_CUDA_OPS_H_

#include <cstdint>

struct CUstream_st;

namespace sluice::cuda {

using Stream = CUstream_st*;

// Sets the kernels' shared-memory limits on the current device. Call once
// per device before the first launch (and outside any graph capture).
void PrepareKernels();

// x[t] += add[t] (when add is not null), then xn[t] = RMSNorm(x[t]) * w for
// t < n_tok rows of n (model/blocks.h RmsNorm, AddResidual).
void AddRmsNorm(float* x, const float* add, int64_t n_tok, int64_t n,
                const float* w, float eps, float* xn, Stream stream);

// x[i] += y[i], i < n.
void Add(float* x, const float* y, int64_t n, Stream stream);

struct AttentionShape {
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  bool gated = false;  // q rows hold per head [q | gate]
  float eps = 0;       // of the q / k norms
  int n_rot = 0;
  float freq_base = 0;
  bool multi_section = false;
  int32_t sections[4] = {0, 0, 0, 0};
  int kv_capacity = 0;  // rows of the KV cache
};

// The sequences of a pass over several of them (continuous batching), as
// device tables: the pass's rows are the sequences' rows one sequence after
// another; sequence i has rows[i].n rows from batch row rows[i].row, at
// positions rows[i].pos0 onward, and the layer's state states[i] (K and V
// caches for attention, conv and recurrent state for Gated DeltaNet).
// row_seq[r] is the sequence of batch row r. The *Seqs functions below
// compute each row exactly as their one-sequence forms do on that row's
// sequence, in one launch for all of them.
struct SeqRows {
  int32_t row = 0;
  int32_t n = 0;
  int32_t pos0 = 0;
  int32_t unused = 0;
};
struct SeqState {
  float* a = nullptr;
  float* b = nullptr;
};
struct SeqBatch {
  int n_seqs = 0;
  const SeqRows* rows = nullptr;      // [n_seqs]
  const int32_t* row_seq = nullptr;   // [n_tok]
  const SeqState* states = nullptr;   // [n_seqs]
};

// Per token t < n_tok at position *d_pos0 + t: q heads RMSNorm'd and
// rotated in place; k heads RMSNorm'd, rotated and stored in k_cache row
// pos; v stored in v_cache row pos (model/attention.cc PrepareToken).
// q: [n_tok][n_head * (gated ? 2 : 1) * head_dim]; k, v: [n_tok][kv_dim].
void AttentionPrepare(const AttentionShape& s, float* q, const float* k,
                      const float* v, const float* q_norm,
                      const float* k_norm, const int32_t* d_pos0,
                      int64_t n_tok, float* k_cache, float* v_cache,
                      Stream stream);

// AttentionPrepare on several sequences (SeqBatch; states: K, V caches).
void AttentionPrepareSeqs(const AttentionShape& s, float* q, const float* k,
                          const float* v, const float* q_norm,
                          const float* k_norm, const SeqBatch& b,
                          int64_t n_tok, Stream stream);

// o[t][h] = softmax(q_h K^T / sqrt(d)) V over cache rows 0..pos0+t, times
// sigmoid(gate_h) when gated (model/attention.cc AttendOne).
// o: [n_tok][n_head * head_dim]. Precondition: s.kv_capacity fits the
// shared memory AttentionMaxCapacity() allows.
void Attend(const AttentionShape& s, const float* q, const float* k_cache,
            const float* v_cache, const int32_t* d_pos0, int64_t n_tok,
            float* o, Stream stream);

// Attend on several sequences (SeqBatch; states: K, V caches);
// s.kv_capacity is the largest of their caches'.
void AttendSeqs(const AttentionShape& s, const float* q, const SeqBatch& b,
                int64_t n_tok, float* o, Stream stream);

// The largest kv_capacity Attend supports on the current device.
int AttentionMaxCapacity();

struct DeltaNetShape {
  int state_size = 0;  // S
  int n_k_heads = 0;   // G
  int n_v_heads = 0;   // R
  int conv_kernel = 0;
  float eps = 0;
  int key_dim() const { return state_size * n_k_heads; }
  int value_dim() const { return state_size * n_v_heads; }
  int channels() const { return 2 * key_dim() + value_dim(); }
};

// beta = sigmoid(beta); g = softplus(alpha + dt_bias) * a, in place, for
// n_tok rows of n_v_heads (model/delta_net.cc).
void DeltaNetGates(const DeltaNetShape& s, float* beta, float* alpha_g,
                   const float* dt_bias, const float* a, int64_t n_tok,
                   Stream stream);

// Causal depthwise conv (kernel [channels][conv_kernel]) + SiLU in place
// on qkv [n_tok][channels]; conv_state [conv_kernel-1][channels] holds the
// previous inputs, oldest first, and is advanced; then q and k heads are
// L2-normalized and q scaled by 1/sqrt(S).
void DeltaNetConv(const DeltaNetShape& s, const float* kernel, float* qkv,
                  int64_t n_tok, float* conv_state, Stream stream);

// DeltaNetConv on several sequences (SeqBatch; states: conv state in a).
void DeltaNetConvSeqs(const DeltaNetShape& s, const float* kernel, float* qkv,
                      const SeqBatch& b, int64_t n_tok, Stream stream);

// The delta-rule recurrence per v head over the batch (state ssm
// [R][S][S], [value][key]); o [n_tok][value_dim] = S^T q, then
// RMSNorm(o; norm) * silu(z) per head.
void DeltaNetScan(const DeltaNetShape& s, const float* qkv, const float* beta,
                  const float* g, const float* z, const float* norm,
                  int64_t n_tok, float* ssm, float* o, Stream stream);

// DeltaNetScan on several sequences (SeqBatch; states: recurrent state in
// b).
void DeltaNetScanSeqs(const DeltaNetShape& s, const float* qkv, const float* beta,
                      const float* g, const float* z, const float* norm,
                      const SeqBatch& b, float* o, Stream stream);

// The largest state_size DeltaNetScan supports on the current device.
int DeltaNetMaxStateSize();
// The most conv taps (ssm.conv_kernel) DeltaNetConv and the decode step's
// DeltaNetDecodePrep handle.
inline constexpr int kDeltaNetMaxConvTaps = 8;

// Per token: softmax over n_expert logits, the top k by probability (ties
// to the lower id), weights renormalised (sum clamped at 6.1e-5)
// (model/moe.cc RouteToken). ids, weights: [n_tok][k]. When paired_ids is
// not null it receives [n_tok][2k]: the ids, then the ids + n_expert (the
// rows of a table holding the gate pointers, then the up pointers).
void TopK(const float* logits, int64_t n_tok, int n_expert, int k,
          int32_t* ids, float* weights, Stream stream,
          int32_t* paired_ids = nullptr);

// Groups the n_tok * k (token, slot) pairs by expert: group_begin
// [n_expert + 1] (prefix sums of the counts), entry_token[entry] its token,
// slot_entry[t * k + s] the entry of pair (t, s). The same groups without
// the empty ones, for a grouped product to launch blocks only where there
// is work: active [n_expert] the experts with pairs in increasing order,
// active_begin [n_expert + 1] their bounds (group j is entries
// [active_begin[j], active_begin[j + 1]) of expert active[j]); past the
// last, expert 0 and every bound n_tok * k (empty groups). Entries of one
// expert are in no particular order (each entry's product is computed
// alone, so the results do not depend on it).
void GroupByExpert(const int32_t* ids, int64_t n_tok, int k, int n_expert,
                   int32_t* group_begin, int32_t* active, int32_t* active_begin,
                   int32_t* entry_token, int32_t* slot_entry, Stream stream);

// g[i] = silu(g[i]) * u[i], i < n.
void SwiGlu(float* g, const float* u, int64_t n, Stream stream);

// out[t] = sum over s < k, in slot order, of weights[t][s] * y[slot_entry[t
// * k + s]] (rows of n).
void CombineExperts(const float* y, const int32_t* slot_entry,
                    const float* weights, int64_t n_tok, int k, int64_t n,
                    float* out, Stream stream);

// out[t] += sigmoid(gate_inp . x[t]) * shared[t] (rows of n).
void AddGatedShared(const float* gate_inp, const float* x,
                    const float* shared, int64_t n_tok, int64_t n,
                    float* out, Stream stream);

}  // namespace sluice::cuda

#endif  // SLUICE_KERNELS_CUDA_OPS_H_
