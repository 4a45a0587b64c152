// Multi-head latent attention (deepseek2: DeepSeek-V3, Kimi-K2) on the GPU,
// behind a plain C++ header: the cache rows with YaRN RoPE, the per-head
// entry lists of the absorbed products, the attention over the latent cache
// and the head-major to token-major copy of its values. The per-head
// products themselves (K_b into the query, V_b out of the latent) are
// grouped products of quant_matmul.h, the heads being the groups.
//
// Each kernel computes what model/mla.cc computes on the host (named beside
// each function). As there, the cache rows and the absorbed queries are
// rounded to half precision. One difference: the softmax-weighted sum of
// latents runs in f32, rescaled once per chunk of 32 keys (flash-attention
// style), where the CPU, as llama.cpp's CPU backend, rounds its accumulator
// to half after every key's update: the GPU's values are the exact ones to
// f32's rounding, the CPU's within a half value's (1.4e-3 of the largest
// value on random rows, mla_attend_emulation_test). Before 2026-12-06 this
// kernel replayed the CPU's half rounding too, at ~2 us a key for 8 heads.
//
// Every function only enqueues work on `stream`; launch errors surface
// through LastLaunchError (device.h). Pointers are device memory.
#ifndef SLUICE_KERNELS_CUDA_MLA_OPS_H_
#define SLUICE_KERNELS_CUDA_MLA_OPS_H_

#include <cstdint>

#include "kernels/cuda/ops.h"

namespace sluice::cuda {

// The rotation of model/rope_yarn.h (ScaledRope) in the form the kernels
// use: the angle of pair i at position p is theta = p * theta_scale^i
// (repeated f32 multiplication), mixed with freq_scale * theta by the YaRN
// ramp between corr_lo and corr_hi when ext_factor != 0, and cos / sin are
// multiplied by mscale (attn_factor, times 1 + 0.1 ln(1 / freq_scale) under
// YaRN). MlaRopeOf (below) fills it from ScaledRope's fields.
struct MlaRope {
  int n_rot = 0;
  bool neox = false;  // pairs (i, i + n_rot/2); else (2i, 2i+1)
  float theta_scale = 1.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;
  float corr_lo = 0.0f;
  float corr_hi = 0.0f;
  float mscale = 1.0f;
};

// MlaRope from ScaledRope's fields, computed in f32 as ScaledRopeAngles.
MlaRope MlaRopeOf(int n_rot, bool neox, float freq_base, float freq_scale,
                  float ext_factor, float attn_factor, float corr_lo,
                  float corr_hi);

struct MlaShape {
  int n_head = 0;
  int kv_lora_rank = 0;  // the latent
  int head_k = 0;        // nope + n_rot: a head's query width
  int head_v = 0;
  float eps = 0;         // of kv_a_norm
  float kq_scale = 0;
  MlaRope rope;
  // Rows of the cache (of the largest, for several sequences): MlaAttend
  // splits each row's keys by it (MlaSplitKeys).
  int kv_capacity = 0;
  int nope() const { return head_k - rope.n_rot; }
  int width() const { return kv_lora_rank + rope.n_rot; }  // a cache row
};

// Whether the kernels below handle `s` (latent and RoPE widths within the
// per-thread registers of MlaAttend).
bool MlaSupported(const MlaShape& s);

// Per token t < n_tok at position *d_pos0 + t (model/mla.cc RunMla's first
// loop): the cache row [RMSNorm(c; kv_a_norm) | RoPE(k_pe)] of ckv's row t
// ([n_tok][width]), rounded to half, into cache row pos ([capacity][width]);
// each head's q_pe (q [n_tok][n_head][head_k], its last n_rot values)
// rotated into q_abs's RoPE part: q_abs is [n_head][n_tok][width], head
// major (the absorbed product fills the first kv_lora_rank values).
void MlaPrepare(const MlaShape& s, const float* ckv, const float* q,
                const float* kv_a_norm, const int32_t* d_pos0, int64_t n_tok,
                float* cache, float* q_abs, Stream stream);

// MlaPrepare on several sequences (SeqBatch; states: the latent cache in a).
void MlaPrepareSeqs(const MlaShape& s, const float* ckv, const float* q,
                    const float* kv_a_norm, const SeqBatch& b, int64_t n_tok,
                    float* q_abs, Stream stream);

// The entries of the per-head grouped products over n_tok tokens: group h
// is entries [h * n_tok, (h + 1) * n_tok) (begin [n_head + 1]), entry
// h * n_tok + t reads activation row t * n_head + h (x_row [n_head * n_tok]:
// head h of token t in a token-major [n_tok][n_head][...] input).
void MlaHeadEntries(int n_head, int64_t n_tok, int32_t* begin, int32_t* x_row,
                    Stream stream);

// o_lat[h][t] = sum_j softmax_j(kq_scale q'_h,t . row_j) c_j over cache rows
// 0..pos(t), q' = half(q_abs[h][t]) (model/mla.cc AttendLatent).
// q_abs: [n_head][n_tok][width]; o_lat: [n_head][n_tok][kv_lora_rank].
//
// The keys of a row go in ranges of MlaSplitKeys(s.kv_capacity), each
// range's one pass (as above) merged into the next by their maxima (the
// flash-decoding split). A block walks a row's keys for 8 heads, so a
// decode (a few rows) would occupy a few blocks for the whole context:
// with `scratch` (at least MlaAttendScratchFloats(s.n_head, kv_lora_rank,
// n_tok) floats) and n_tok <= kMlaSplitMaxTokens, each range is a block's
// and a second kernel merges them; otherwise each block merges its rows'
// ranges itself, in the same order of operations. The ranges depend only
// on the capacity (of the largest cache in a batch; a worker's sequences
// have one), so a row gets the same values in any batch, split or not; a row of at most one range's keys (kMlaMinSplitKeys at least) gets
// the plain one pass's bits, a longer one the same values to f32's
// rounding.
constexpr int kMlaSplitMaxTokens = 8;
constexpr int kMlaMaxSplits = 64;
constexpr int kMlaMinSplitKeys = 64;
constexpr int kMlaChunk = 32;  // keys a block scores at once
inline int MlaSplitKeys(int kv_capacity) {
  const int even = (kv_capacity + kMlaMaxSplits - 1) / kMlaMaxSplits;
  const int chunks = (even + kMlaChunk - 1) / kMlaChunk * kMlaChunk;
  return chunks < kMlaMinSplitKeys ? kMlaMinSplitKeys : chunks;
}
inline int64_t MlaAttendScratchFloats(int n_head, int kv_lora_rank, int64_t n_tok) {
  const int64_t rows = n_tok < kMlaSplitMaxTokens ? n_tok : kMlaSplitMaxTokens;
  return int64_t{kMlaMaxSplits} * n_head * rows * (kv_lora_rank + 2);
}
// Whether MlaAttend runs on the tensor cores (mla_mma_device.h: 64 heads a
// block, half inputs, f32 sums; the f32 kernel's values to f32's rounding,
// not its bits) where the shape allows (MlaMmaSupported: a width of whole
// 16s, a latent of whole 8s up to 512, as DeepSeek's and Kimi's 576 / 512).
// Either kernel gives a row the same bits split over blocks or merged in
// one. On by default; SLUICE_CUDA_MLA_TENSOR_CORES=0 turns it off at the
// first use, SetMlaTensorCoresEnabled at any time (tests).
// Lets the tensor-core attention's kernels take the shared memory they
// need on the current device: call once per device before MlaAttend (the
// model's load does, beside PrepareKernels).
void PrepareMlaKernels();
bool MlaTensorCoresEnabled();
void SetMlaTensorCoresEnabled(bool enabled);
// Whether the tensor-core attention takes 16 or 32 heads a block where 64
// would leave the GPU mostly idle (a short context's few key ranges;
// mla_mma_device.h, MlaMmaHeadsPerBlock): the same bits either way. On by
// default; SLUICE_CUDA_MLA_FEW_HEADS=0 turns it off at the first use,
// SetMlaFewHeadsEnabled at any time (tests).
bool MlaFewHeadsEnabled();
void SetMlaFewHeadsEnabled(bool enabled);
bool MlaMmaSupported(const MlaShape& s);

void MlaAttend(const MlaShape& s, const float* q_abs, const float* cache,
               const int32_t* d_pos0, int64_t n_tok, float* o_lat,
               float* scratch, Stream stream);

// MlaAttend on several sequences (SeqBatch; states: the latent cache in a).
void MlaAttendSeqs(const MlaShape& s, const float* q_abs, const SeqBatch& b,
                   int64_t n_tok, float* o_lat, float* scratch, Stream stream);

// out[t][h][i] = in[h][t][i], i < n: the V_b products' head-major rows
// into the token-major input of the output projection.
void HeadsToTokens(const float* in, int n_head, int64_t n_tok, int64_t n,
                   float* out, Stream stream);

}  // namespace sluice::cuda

#endif  // SLUICE_KERNELS_CUDA_MLA_OPS_H_
