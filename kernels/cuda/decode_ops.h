// The fused kernels of one decode step (one token), behind a plain C++
// header. A decode step is latency-bound: its weights are read in well under
// 0.1 ms at HBM rates, so what costs is the number of dependent launches and
// how well each fills the GPU. These kernels do in one launch what the batch
// kernels (ops.h, quant_matmul.h) do in several:
//
//   DecodeProject   residual add + RMSNorm + every product that reads the
//                   normed vector (q/k/v, DeltaNet qkv/z/beta/alpha, the
//                   router with its top-k, the shared expert's SwiGLU pair),
//   DecodeExpertsGateUp  the routed experts' gate and up products + SwiGLU,
//   DecodeExpertsDown    their down products, the routing weights, the
//                   shared expert's down product and gate: the MoE output,
//   DeltaNetDecodePrep   DeltaNet gates, causal conv + SiLU, q/k L2 norms,
//   AttendDecode    attention over the cache split over the keys (the last
//                   block of each KV head merges the splits).
//
// Weights are read in place in their ggml block layout (the types of
// quant_matmul.h), products accumulate in F32. Products of Q4_K, Q5_K,
// Q6_K, Q8_0 and Q1_0 weights read the input quantized to 8 bits as
// llama.cpp's CPU backend does (decode_q8.h; SLUICE_CUDA_Q8=0: F32 input).
// Every output element is computed by one thread in a fixed order, so a
// launch gives the same bits whatever the pointer tables point at (the slot
// cache's copy policy stays bit-identical to an all-resident run). Sums differ in order from the
// batch kernels, so decode and prefill agree to rounding, not bit for bit.
//
// With SLUICE_CUDA_PDL=1 (read at PrepareDecodeKernels), on compute
// capability 9 and above every launch is a programmatic dependent launch: a
// kernel starts while the one before it in the stream finishes, asks for
// the weight rows that depend on nothing computed, and waits for its
// predecessor before it reads or writes anything else. A kernel enqueued
// after one of these, of any kind, still sees all of its writes.
//
// Every pointer is device memory. Functions only enqueue work; launch
// errors surface through LastLaunchError (device.h). Call
// PrepareDecodeKernels once per device (outside any capture).
#ifndef SLUICE_KERNELS_CUDA_DECODE_OPS_H_
#define SLUICE_KERNELS_CUDA_DECODE_OPS_H_

#include <cstdint>

#include "kernels/cuda/ops.h"

namespace sluice::cuda {

void PrepareDecodeKernels();

// The largest vector DecodeProject, DecodeExperts* read (their shared
// memory holds it).
int DecodeMaxCols();

// A vector quantized once for the launches that read it (DecodePrepare):
// its 8-bit formats (DecodeQ8Formats) at q8, in device memory. q8 null:
// none, every block quantizes the vector itself. The products give the
// same bits either way.
struct DecodeQ8 {
  const uint8_t* q8 = nullptr;
  int formats = 0;
};

// The vector the products of a DecodeProject read. With norm_w: v = x +
// add (add may be null), x_out = v when not null (it must not alias x or
// add: other blocks still read them), and the products read
// RMSNorm(v) * norm_w (also stored to xn_out when not null). Without
// norm_w: the products read x as it is, and with `prepared` (only without
// norm_w and add) the products of types whose format it holds read its
// 8-bit vector, which must be x's.
struct DecodeInput {
  const float* x = nullptr;
  const float* add = nullptr;
  float* x_out = nullptr;
  const float* norm_w = nullptr;
  float eps = 0;
  float* xn_out = nullptr;
  int64_t n = 0;
  DecodeQ8 prepared;
};

// The 8-bit formats products of these GGUF types over n columns read (0:
// none: float types, or SLUICE_CUDA_Q8=0), and the bytes of `rows`
// prepared vectors of n elements in `formats`.
int DecodeQ8Formats(const int* types, int n_types, int64_t n);
int64_t DecodeQ8Bytes(int formats, int64_t n, int rows = 1);
// The most DecodeQ8Bytes can be for n columns.
int64_t DecodeQ8MaxBytes(int64_t n, int rows = 1);

// One block prepares in's vector as DecodeProject would (the residual add,
// x_out, the norm, xn_out) and quantizes it into q8 in `formats` (16-byte
// aligned, DecodeQ8Bytes(formats, in.n)). A launch that reads it then has
// no prologue: on bench35 every DecodeProject block loaded, normed and
// quantized the whole vector before reading its rows.
void DecodePrepare(const DecodeInput& in, uint8_t* q8, int formats, Stream stream);

// One matrix of a DecodeProject (rows x n, GGUF type id `type`):
// y[r] = W[r] . v, or with `up` (same type and shape):
// y[r] = silu(W[r] . v) * (Up[r] . v).
struct DecodeMatrix {
  int type = 0;
  const void* w = nullptr;
  const void* up = nullptr;
  int64_t rows = 0;
  float* y = nullptr;
};

// Routing of matrix 0's output (n_expert logits), in the same launch once
// all of its rows are in: softmax, the top k by probability (ties to the
// lower id), weights renormalised (sum clamped at 6.1e-5) as ops.h TopK.
// paired_ids (optional) receives the ids, then the ids + n_expert.
// counter: one device int, zero before the launch, left zero after it.
struct DecodeTopK {
  int k = 0;
  int32_t* ids = nullptr;
  float* weights = nullptr;
  int32_t* paired_ids = nullptr;
  int32_t* counter = nullptr;
};

inline constexpr int kMaxDecodeMatrices = 6;

struct DecodeProjection {
  DecodeInput in;
  DecodeMatrix m[kMaxDecodeMatrices];
  int n_matrices = 0;
  DecodeTopK topk;  // k == 0: none
};

void DecodeProject(const DecodeProjection& p, Stream stream);

// Whether DecodeProject(p) streams the weights through shared memory
// (every matrix of a type with an 8-bit product, its rows a multiple of 16
// bytes, 16-byte aligned, a row block within the stages;
// SLUICE_CUDA_STREAM_PROJECT=0: never), with the same bits as the kernel it
// uses otherwise. Call after PrepareDecodeKernels.
bool DecodeProjectStreamed(const DecodeProjection& p);

// The routed experts of one token (and the shared expert's down half).
struct DecodeExperts {
  int k = 0;
  const int32_t* ids = nullptr;    // [k]
  const float* weights = nullptr;  // [k]
  // Per-expert pointer tables [n_expert] (what the slot cache repoints).
  const void* const* gate = nullptr;
  const void* const* up = nullptr;
  const void* const* down = nullptr;
  int gate_type = 0, up_type = 0, down_type = 0;
  int64_t n_embd = 0, ff = 0;
  const float* xn = nullptr;  // [n_embd]: the MoE input
  DecodeQ8 xn_q8;             // xn prepared (DecodePrepare), or none
  float* h = nullptr;         // [k][ff]: silu(gate x) * up x
  // The shared expert (shared_ff 0: none): its SwiGLU'd hidden row (a
  // DecodeProject pair), its down matrix and its gate logit (a 1-row
  // product of shared_gate_inp), applied as sigmoid(logit).
  int64_t shared_ff = 0;
  const float* shared_h = nullptr;
  const void* shared_down = nullptr;
  int shared_down_type = 0;
  const float* shared_logit = nullptr;
  // Where set, shared_down shared_h (n_embd), computed by an earlier launch
  // (DecodeExpertsSharedApart): the down launch then only adds it.
  const float* shared_y = nullptr;
  // The k rows of h, then shared_h, prepared (DecodeExpertsPrepareDown),
  // or none.
  DecodeQ8 h_q8;
  // With h_q8 in DecodeExpertsDownFormats(*this): k arrival counters (zero
  // before the launch, left zero after it) by which the streamed gate/up
  // launch quantizes the rows into h_q8 itself as it completes them
  // (DecodeExpertsGateUpQuantizes), so no launch between gate/up and down
  // prepares them and no down block quantizes them again. Null: it does not.
  int32_t* h_counters = nullptr;
  // Rows the host computed ([k][n_embd], zero for the device's experts,
  // whose entries then point at zeroed slots), or null.
  const float* host_y = nullptr;
  // out = sum over s < k in slot order of weights[s] * (down_s h_s +
  // host_y[s]), plus sigmoid(shared_logit) * shared_down shared_h.
  float* out = nullptr;  // [n_embd]
};

// Whether the two launches below handle k routed experts (plus a shared
// one) of ff rows with n_embd-wide inputs: at most 12 experts in all, and
// vectors within DecodeMaxCols.
bool DecodeExpertsSupported(int k, bool shared, int64_t ff, int64_t n_embd);

void DecodeExpertsGateUp(const DecodeExperts& e, Stream stream);
// Whether DecodeExpertsGateUp(e) streams the slots' rows through shared
// memory (gate and up of one type with an 8-bit product, rows a multiple
// of 16 bytes; SLUICE_CUDA_STREAM_PROJECT=0: never), with the same bits.
bool DecodeExpertsGateUpStreamed(const DecodeExperts& e);
void DecodeExpertsDown(const DecodeExperts& e, Stream stream);
// Whether the shared expert's down product runs better as a projection of
// its own before the down launch (its rows then go in as shared_y):
// SLUICE_CUDA_SHARED_APART "1" always, "0" never (read at every call),
// else where a shared row is at least twice a routed row's bytes. In the
// down launch the shared expert is one warp of each block beside the k
// routed ones, which wait for it at the block's barrier: on bench397 (Q6_K
// shared rows of 840 bytes beside Q1_0 ones of 144) those waits were 46.5%
// of the launch's stall cycles under ncu (H100, 2026-12-07).
bool DecodeExpertsSharedApart(const DecodeExperts& e);
// The 8-bit formats of the rows DecodeExpertsDown reads (0: some item's
// down type has no 8-bit product, or the shared rows are not ff wide).
int DecodeExpertsDownFormats(const DecodeExperts& e);
// Whether DecodeExpertsGateUp(e) fills e.h_q8 for the down launch: it is
// streamed, e.h_counters and e.h_q8 are set, h_q8's formats are
// DecodeExpertsDownFormats(e), and e.ff >= 1,024 or SLUICE_CUDA_GATE_UP_Q8
// is "1" ("0": never; read at every call). The rows' bits are
// DecodeExpertsPrepareDown's.
bool DecodeExpertsGateUpQuantizes(const DecodeExperts& e);
// Quantizes the rows DecodeExpertsDown reads (h, then shared_h) into q8 in
// `formats` (DecodeQ8Bytes(formats, ff, k + shared)), for e.h_q8.
void DecodeExpertsPrepareDown(const DecodeExperts& e, uint8_t* q8, int formats, Stream stream);

// One token of DeltaNetGates + DeltaNetConv (ops.h) in one launch.
void DeltaNetDecodePrep(const DeltaNetShape& s, float* beta, float* alpha_g,
                        const float* dt_bias, const float* a,
                        const float* conv_kernel, float* qkv,
                        float* conv_state, Stream stream);

// One DeltaNet token in one launch: DeltaNetDecodePrep then DeltaNetScan
// (n_tok 1), with the same bits (o, ssm and conv_state as those two give;
// qkv, beta and alpha are only read). A cluster of blocks per k head: each
// block convolves and normalizes the head's q and k itself, its v rows and
// its v head's gates, and holds a part of the head's state rows in
// registers; the parts meet over distributed shared memory for the gated
// RMS norm, so the head's state is read by 4 SMs instead of 1.
bool DeltaNetDecodeFusedSupports(const DeltaNetShape& s);
void DeltaNetDecodeFused(const DeltaNetShape& s, const float* qkv, const float* beta,
                         const float* alpha, const float* dt_bias, const float* a,
                         const float* conv_kernel, const float* z, const float* norm,
                         float* conv_state, float* ssm, float* o, Stream stream);
// DeltaNetDecodeFused over a batch of sequences of one row each
// (b.rows[i].n == 1; SeqBatch's states: conv state in a, recurrent state in
// b), a cluster row of blocks per sequence: the bits of DeltaNetGates,
// DeltaNetConvSeqs and DeltaNetScanSeqs (ops.h) on those rows, where beta
// and alpha are the raw projections [row][n_v_heads], qkv the conv's input
// (all three only read). Where DeltaNetDecodeFusedSupports(s).
void DeltaNetDecodeFusedSeqs(const DeltaNetShape& s, const float* qkv, const float* beta,
                             const float* alpha, const float* dt_bias, const float* a,
                             const float* conv_kernel, const float* z, const float* norm,
                             const SeqBatch& b, float* o, Stream stream);

// Whether AttendDecode handles the shape: head_dim 64, 128 or 256 (other
// shapes use Attend).
bool AttendDecodeSupports(const AttentionShape& s);

// At most this many splits per KV head: the merge reads each split's
// partials, and the warps' shared area holds [heads][splits] weights.
inline constexpr int kAttendDecodeMaxSplits = 64;

// Splits AttendDecode uses for a cache of `capacity` rows, and the floats
// of scratch (partial results) and ints of counters (zero before the
// first launch; every launch leaves them zero) it needs.
int AttendDecodeSplits(const AttentionShape& s);
int64_t AttendDecodeScratchFloats(const AttentionShape& s);
int AttendDecodeCounters(const AttentionShape& s);

// Attend (ops.h) for one token at *d_pos0 whose q was prepared
// (AttentionPrepare) and whose k, v are in the cache: o [n_head][head_dim]
// (times sigmoid of the gate when gated). Keys split over blocks, each
// block reading its keys once for every q head of its KV head (online
// softmax); the last block of a KV head merges the splits.
void AttendDecode(const AttentionShape& s, const float* q,
                  const float* k_cache, const float* v_cache,
                  const int32_t* d_pos0, float* scratch, int32_t* counters,
                  float* o, Stream stream);

}  // namespace sluice::cuda

#endif  // SLUICE_KERNELS_CUDA_DECODE_OPS_H_
