// Device code of ops.h. Each kernel mirrors the CPU function named in the
// header; comments here say only where the GPU version differs in method.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/cuda/delta_device.h"
#include "kernels/cuda/group_device.h"
#include "kernels/cuda/norm_device.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/topk_device.h"
#include "kernels/cuda/warp_reduce.h"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;
// Dynamic shared memory the attention and scan kernels may use (the H100 /
// H200 allow 227 KiB per block; 200 KiB leaves room for static use).
constexpr int kMaxDynamicSmem = 200 * 1024;

using internal::BlockSum;
using internal::SigmoidF;
using internal::SiluF;
using internal::WarpMax;
using internal::WarpSum;

__device__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n_warps = blockDim.x >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = lane < n_warps ? scratch[lane] : -INFINITY;
  return WarpMax(m);
}

int Blocks(int64_t n, int threads = kThreads) {
  return static_cast<int>((n + threads - 1) / threads);
}

int RoundUp32(int n) { return (n + 31) / 32 * 32; }

// ---- norms and element-wise ------------------------------------------------

template <int kPer>
__global__ void AddRmsNormKernel(float* x, const float* add, int64_t n,
                                 const float* w, float eps, float* xn) {
  __shared__ double scratch[32];
  internal::AddRmsNormRow<kPer>(x + blockIdx.x * n, add ? add + blockIdx.x * n : nullptr, n, w,
                                eps, xn + blockIdx.x * n, scratch);
}

__global__ void AddKernel(float* x, const float* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] += y[i];
}

__global__ void SwiGluKernel(float* g, const float* u, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) g[i] = SiluF(g[i]) * u[i];
}

// ---- where a row's sequence is ----------------------------------------------

// One sequence of a pass as a kernel sees it: its rows [row, row + n) of
// the batch from position pos0, its two state buffers (K and V caches, or
// the conv and the recurrent state).
struct SeqView {
  int row;
  int n;
  int pos0;
  float* a;
  float* b;
};

// A pass of one sequence: every row is its, its state given directly.
struct OneSeq {
  int n;
  const int32_t* d_pos0;  // null where positions are not used
  float* a;
  float* b;
  __device__ int SeqOf(int) const { return 0; }
  __device__ SeqView Seq(int) const { return {0, n, d_pos0 ? *d_pos0 : 0, a, b}; }
};

// A pass of several sequences (SeqBatch's device tables).
struct ManySeqs {
  SeqBatch t;
  __device__ int SeqOf(int row) const { return t.row_seq[row]; }
  __device__ SeqView Seq(int i) const {
    const SeqRows r = t.rows[i];
    return {r.row, r.n, r.pos0, t.states[i].a, t.states[i].b};
  }
};

// ---- attention ---------------------------------------------------------------

// Which of the four position streams rotated pair i uses (blocks.cc).
__device__ int SectionStream(const AttentionShape& s, int i) {
  const int total = s.sections[0] + s.sections[1] + s.sections[2] + s.sections[3];
  const int k = total > 0 ? i % total : i;
  if (k % 3 == 1 && k < 3 * s.sections[1]) return 1;
  if (k % 3 == 2 && k < 3 * s.sections[2]) return 2;
  if (k % 3 == 0 && k < 3 * s.sections[0]) return 0;
  return 3;
}

// RMSNorm of one head (head_dim values, `src`) times `w`, then NEOX RoPE of
// the first n_rot dims at position pos, into `dst` (may equal src).
// blockDim.x >= head_dim, a multiple of 32.
__device__ void NormRopeHead(const AttentionShape& s, const float* src,
                             const float* w, int pos, float theta_scale,
                             float* dst, float* buf, double* scratch) {
  const int d = s.head_dim, i = threadIdx.x;
  const float v = i < d ? src[i] : 0.0f;
  const double sum = BlockSum(static_cast<double>(v) * v, scratch);
  const float mean = static_cast<float>(sum / static_cast<double>(d));
  const float scale = 1.0f / sqrtf(mean + s.eps);
  if (i < d) buf[i] = (v * scale) * w[i];
  __syncthreads();
  const int half = s.n_rot / 2;
  if (i < half) {
    // The angle as the CPU builds it: pos times theta_scale, i times, in f32.
    const int stream = s.multi_section ? SectionStream(s, i) : 0;
    float theta = stream == 3 ? 0.0f : static_cast<float>(pos);
    for (int j = 0; j < i; ++j) theta *= theta_scale;
    const float c = cosf(theta), sn = sinf(theta);
    const float x0 = buf[i], x1 = buf[i + half];
    dst[i] = x0 * c - x1 * sn;
    dst[i + half] = x0 * sn + x1 * c;
  } else if (i >= s.n_rot && i < d) {
    dst[i] = buf[i];
  }
}

template <typename Loc>
__global__ void AttentionPrepareKernel(AttentionShape s, float theta_scale,
                                       float* q, const float* k,
                                       const float* v, const float* q_norm,
                                       const float* k_norm, Loc loc) {
  __shared__ double scratch[32];
  extern __shared__ float buf[];
  const int t = blockIdx.x, head = blockIdx.y;
  const int d = s.head_dim;
  const SeqView seq = loc.Seq(loc.SeqOf(t));
  const int pos = seq.pos0 + t - seq.row;
  float* k_cache = seq.a;
  float* v_cache = seq.b;
  const int q_stride = s.gated ? 2 * d : d;
  const int q_width = s.n_head * q_stride;
  const int kv_dim = s.n_head_kv * d;
  if (head < s.n_head) {
    float* qh = q + static_cast<int64_t>(t) * q_width + head * q_stride;
    NormRopeHead(s, qh, q_norm, pos, theta_scale, qh, buf, scratch);
    return;
  }
  const int h = head - s.n_head;
  const float* kh = k + static_cast<int64_t>(t) * kv_dim + h * d;
  float* k_row = k_cache + static_cast<int64_t>(pos) * kv_dim + h * d;
  NormRopeHead(s, kh, k_norm, pos, theta_scale, k_row, buf, scratch);
  if (threadIdx.x < d) {
    v_cache[static_cast<int64_t>(pos) * kv_dim + h * d + threadIdx.x] =
        v[static_cast<int64_t>(t) * kv_dim + h * d + threadIdx.x];
  }
}

constexpr int kDimsPerLane = 8;

// Rows of scores the block's shared memory holds (the capacity).
__device__ __forceinline__ int n_ctx_max(const AttentionShape& s) {
  return s.kv_capacity;
}

template <typename Loc>
__global__ void AttendKernel(AttentionShape s, const float* q, Loc loc, float* o) {
  __shared__ float fscratch[32];
  __shared__ double dscratch[32];
  extern __shared__ float smem[];
  const int t = blockIdx.x, h = blockIdx.y;
  const int d = s.head_dim;
  const int q_stride = s.gated ? 2 * d : d;
  const int kv_dim = s.n_head_kv * d;
  const int g = h / (s.n_head / s.n_head_kv);
  const SeqView seq = loc.Seq(loc.SeqOf(t));
  const float* k_cache = seq.a;
  const float* v_cache = seq.b;
  const int n_ctx = seq.pos0 + t - seq.row + 1;
  float* qs = smem;          // [d]
  float* scores = smem + d;  // [n_ctx]
  const float* qh = q + static_cast<int64_t>(t) * s.n_head * q_stride + h * q_stride;
  for (int i = threadIdx.x; i < d; i += blockDim.x) qs[i] = qh[i];
  __syncthreads();
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n_warps = blockDim.x >> 5;
  // One key per thread: a thread's loads are independent (no reduction
  // between keys), which decode at long contexts needs to hide latency.
  if (d % 4 == 0) {
    const float4* q4 = reinterpret_cast<const float4*>(qs);
    for (int j = threadIdx.x; j < n_ctx; j += blockDim.x) {
      const float4* k4 = reinterpret_cast<const float4*>(
          k_cache + static_cast<int64_t>(j) * kv_dim + g * d);
      float acc = 0.0f;
      for (int i = 0; i < d / 4; ++i) {
        const float4 a = k4[i], b = q4[i];
        acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
      }
      scores[j] = acc * scale;
    }
  } else {
    for (int j = threadIdx.x; j < n_ctx; j += blockDim.x) {
      const float* kr = k_cache + static_cast<int64_t>(j) * kv_dim + g * d;
      float acc = 0.0f;
      for (int i = 0; i < d; ++i) acc += qs[i] * kr[i];
      scores[j] = acc * scale;
    }
  }
  __syncthreads();
  float m = -INFINITY;
  for (int j = threadIdx.x; j < n_ctx; j += blockDim.x) m = fmaxf(m, scores[j]);
  m = BlockMax(m, fscratch);
  double sum = 0.0;
  for (int j = threadIdx.x; j < n_ctx; j += blockDim.x) {
    const float e = expf(scores[j] - m);
    scores[j] = e;
    sum += e;
  }
  sum = BlockSum(sum, dscratch);
  const float inv = static_cast<float>(1.0 / sum);
  __syncthreads();
  const float* gate = qh + d;
  float* oh = o + static_cast<int64_t>(t) * s.n_head * d + h * d;
  // Warp w sums keys w, w + n_warps, ...; lane l dims l, l + 32, ...; the
  // warps' partial sums meet in shared memory (reusing the q slot and the
  // scores' tail is not possible, so a separate region after the scores).
  float* partial = scores + n_ctx_max(s);
  for (int i0 = 0; i0 < d; i0 += 32 * kDimsPerLane) {
    float acc[kDimsPerLane];
#pragma unroll
    for (int r = 0; r < kDimsPerLane; ++r) acc[r] = 0.0f;
    for (int j = warp; j < n_ctx; j += n_warps) {
      const float p = scores[j] * inv;
      const float* vr = v_cache + static_cast<int64_t>(j) * kv_dim + g * d;
#pragma unroll
      for (int r = 0; r < kDimsPerLane; ++r) {
        const int i = i0 + lane + 32 * r;
        if (i < d) acc[r] += p * vr[i];
      }
    }
#pragma unroll
    for (int r = 0; r < kDimsPerLane; ++r) {
      partial[warp * 32 * kDimsPerLane + lane + 32 * r] = acc[r];
    }
    __syncthreads();
    for (int c = threadIdx.x; c < 32 * kDimsPerLane; c += blockDim.x) {
      const int i = i0 + c;
      if (i < d) {
        float sum_w = 0.0f;
        for (int w = 0; w < n_warps; ++w) sum_w += partial[w * 32 * kDimsPerLane + c];
        oh[i] = s.gated ? sum_w * SigmoidF(gate[i]) : sum_w;
      }
    }
    __syncthreads();
  }
}

// ---- Gated DeltaNet ----------------------------------------------------------

__global__ void DeltaNetGatesKernel(int r, float* beta, float* alpha_g,
                                    const float* dt_bias, const float* a,
                                    int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int head = static_cast<int>(i % r);
  beta[i] = SigmoidF(beta[i]);
  const float x = alpha_g[i] + dt_bias[head];
  const float sp = x > 20.0f ? x : log1pf(expf(x));
  alpha_g[i] = sp * a[head];
}

constexpr int kMaxConvTaps = kDeltaNetMaxConvTaps;

__device__ __forceinline__ int Kd(const DeltaNetShape& s) { return s.state_size * s.n_k_heads; }
__device__ __forceinline__ int Vd(const DeltaNetShape& s) { return s.state_size * s.n_v_heads; }
__device__ __forceinline__ int Ch(const DeltaNetShape& s) { return 2 * Kd(s) + Vd(s); }

// One thread per channel and sequence (blockIdx.y), sequential over the
// sequence's rows with a sliding window of raw inputs (the outputs
// overwrite qkv row by row).
template <typename Loc>
__global__ void ConvSiluKernel(int ch, int taps, const float* kernel,
                               float* qkv, Loc loc) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= ch) return;
  const SeqView seq = loc.Seq(blockIdx.y);
  float* state = seq.a;
  const int64_t n_tok = seq.n;
  qkv += static_cast<int64_t>(seq.row) * ch;
  const int hist = taps - 1;
  float window[kMaxConvTaps];
  for (int j = 0; j < hist; ++j) window[j] = state[j * ch + c];
  float w[kMaxConvTaps];
  for (int j = 0; j < taps; ++j) w[j] = kernel[c * taps + j];
  for (int64_t t = 0; t < n_tok; ++t) {
    window[hist] = qkv[t * ch + c];
    float out = 0.0f;
    for (int j = 0; j < taps; ++j) out += window[j] * w[j];
    qkv[t * ch + c] = SiluF(out);
    for (int j = 0; j < hist; ++j) window[j] = window[j + 1];
  }
  for (int j = 0; j < hist; ++j) state[j * ch + c] = window[j];
}

// L2 norm of each q and k head (2G heads of S per row); q also scaled.
__global__ void L2NormHeadsKernel(DeltaNetShape s, float* qkv, float q_scale) {
  __shared__ double scratch[32];
  const int t = blockIdx.x, head = blockIdx.y;
  float* x = qkv + static_cast<int64_t>(t) * Ch(s) + head * s.state_size;
  const int i = threadIdx.x;
  const float v = i < s.state_size ? x[i] : 0.0f;
  const double sum = BlockSum(static_cast<double>(v) * v, scratch);
  const float scale = 1.0f / fmaxf(static_cast<float>(sqrt(sum)), s.eps);
  if (i < s.state_size) {
    float y = v * scale;
    if (head < s.n_k_heads) y *= q_scale;
    x[i] = y;
  }
}

// Moves one head's n x n state between global memory and the padded shared
// copy, kBatch loads in flight per thread (a load-then-store loop would wait
// out the memory latency once per element).
__device__ void CopyState(float* global, int n, int stride, float* shared,
                          bool to_shared) {
  constexpr int kBatch = 8;
  const int total = n * n;
  for (int base = threadIdx.x; base < total; base += kBatch * blockDim.x) {
    float v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int idx = base + b * blockDim.x;
      if (idx < total) {
        v[b] = to_shared ? global[idx] : shared[(idx / n) * stride + idx % n];
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int idx = base + b * blockDim.x;
      if (idx < total) {
        if (to_shared) {
          shared[(idx / n) * stride + idx % n] = v[b];
        } else {
          global[idx] = v[b];
        }
      }
    }
  }
}

// Moves qkv, beta, g, z and o to the first row of a scan block's sequence
// (blockIdx.y): its rows, its recurrent state.
template <typename Loc>
__device__ SeqView ScanRows(const DeltaNetShape& s, Loc loc, const float*& qkv,
                            const float*& beta, const float*& g, const float*& z,
                            float*& o) {
  const SeqView seq = loc.Seq(blockIdx.y);
  const int64_t r = seq.row;
  qkv += r * Ch(s);
  beta += r * s.n_v_heads;
  g += r * s.n_v_heads;
  z += r * Vd(s);
  o += r * Vd(s);
  return seq;
}

// One block per v head and sequence; thread i owns state row i (value i),
// kept in shared memory with a padded row stride for the whole batch.
template <typename Loc>
__global__ void DeltaScanKernel(DeltaNetShape s, const float* qkv,
                                const float* beta, const float* g,
                                const float* z, const float* norm,
                                Loc loc, float* o) {
  __shared__ double scratch[32];
  extern __shared__ float smem[];
  const SeqView seq = ScanRows(s, loc, qkv, beta, g, z, o);
  const int64_t n_tok = seq.n;
  float* ssm = seq.b;
  const int n = s.state_size, stride = n + 1;
  const int j = blockIdx.x, i = threadIdx.x;
  const int kh = j % s.n_k_heads;
  float* st = smem;                 // [n][n + 1]
  float* qs = smem + n * stride;    // [n]
  float* ks = qs + n;               // [n]
  float* head_state = ssm + static_cast<int64_t>(j) * n * n;
  CopyState(head_state, n, stride, st, /*to_shared=*/true);
  const int ch = Ch(s), vd = Vd(s);
  for (int64_t t = 0; t < n_tok; ++t) {
    __syncthreads();
    const float* row = qkv + t * ch;
    if (i < n) {
      qs[i] = row[kh * n + i];
      ks[i] = row[Kd(s) + kh * n + i];
    }
    __syncthreads();
    float out = 0.0f;
    if (i < n) {
      const float decay = expf(g[t * s.n_v_heads + j]);
      const float b = beta[t * s.n_v_heads + j];
      float* r = st + i * stride;
      float dot = 0.0f;
      for (int c = 0; c < n; ++c) {
        r[c] *= decay;
        dot += r[c] * ks[c];
      }
      const float delta = (row[2 * Kd(s) + j * n + i] - dot) * b;
      for (int c = 0; c < n; ++c) {
        r[c] += delta * ks[c];
        out += r[c] * qs[c];
      }
    }
    const double sum = BlockSum(static_cast<double>(out) * out, scratch);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / sqrtf(mean + s.eps);
    if (i < n) {
      const int64_t idx = t * vd + j * n + i;
      o[idx] = ((out * scale) * norm[i]) * SiluF(z[idx]);
    }
  }
  __syncthreads();
  CopyState(head_state, n, stride, st, /*to_shared=*/false);
}

// State columns each thread of DeltaScanRegKernel keeps in registers.
constexpr int kScanCols = 32;
constexpr int kScanMaxState = 128;

// The same recurrence with more parallelism, for state sizes 32, 64 and 128
// (kParts = n / 32, a template argument so the column offsets are constants):
// P = n / 32 threads share a state row, each holding the row's columns
// p, p + P, p + 2P, ... in registers (interleaved, so the P threads of a row
// read different banks of ks/qs); the row's dot products are summed across
// them with shuffles. n x P threads per block (512 for n = 128) instead of
// n, and no shared-memory traffic for the state: a prefill step is several
// times shorter. Sums are grouped differently from the row-per-thread
// kernel, so results may differ from it in the last bits. At 103 registers
// one 512-thread block runs an SM; asking for two (64 registers, 136 bytes
// spilt) was slower over 32 sequences: 111 against 105 us a layer, -2% to
// -3% aggregate at 16 and 32 sequences (H100, runs 33 and 34).
template <int kParts, typename Loc>
__global__ void __launch_bounds__(kScanCols * kParts * kParts)
DeltaScanRegKernel(DeltaNetShape s, const float* qkv,
                                   const float* beta, const float* g,
                                   const float* z, const float* norm,
                                   Loc loc, float* o) {
  __shared__ double scratch[32];
  __shared__ float qs[kScanMaxState];
  __shared__ float ks[kScanMaxState];
  const SeqView seq = ScanRows(s, loc, qkv, beta, g, z, o);
  const int64_t n_tok = seq.n;
  float* ssm = seq.b;
  constexpr int parts = kParts;  // n = 32 x parts
  const int n = s.state_size;
  const int j = blockIdx.x, r = threadIdx.x / parts, p = threadIdx.x % parts;
  const int kh = j % s.n_k_heads;
  float* head_state = ssm + static_cast<int64_t>(j) * n * n + r * n + p;
  float st[kScanCols];
#pragma unroll
  for (int m = 0; m < kScanCols; ++m) st[m] = head_state[m * parts];
  const int ch = Ch(s), vd = Vd(s);
  for (int64_t t = 0; t < n_tok; ++t) {
    __syncthreads();
    const float* row = qkv + t * ch;
    if (threadIdx.x < n) {
      qs[threadIdx.x] = row[kh * n + threadIdx.x];
      ks[threadIdx.x] = row[Kd(s) + kh * n + threadIdx.x];
    }
    __syncthreads();
    const float decay = expf(g[t * s.n_v_heads + j]);
    const float b = beta[t * s.n_v_heads + j];
    const float out = internal::DeltaRowStep<parts>(st, ks, qs, p, decay, b,
                                                    row[2 * Kd(s) + j * n + r]);
    // The head's gated RMS norm: each row counted once.
    const double sum =
        BlockSum(p == 0 ? static_cast<double>(out) * out : 0.0, scratch);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / sqrtf(mean + s.eps);
    if (p == 0) {
      const int64_t idx = t * vd + j * n + r;
      o[idx] = ((out * scale) * norm[r]) * SiluF(z[idx]);
    }
  }
#pragma unroll
  for (int m = 0; m < kScanCols; ++m) head_state[m * parts] = st[m];
}

// ---- MoE routing -------------------------------------------------------------

// One warp per token: the k arg-max rounds need only shuffles, no block
// barriers (decode runs this once per layer per token).
__global__ void TopKKernel(const float* logits, int n_expert, int k,
                           int32_t* ids, float* weights, int32_t* paired) {
  extern __shared__ float p[];
  const int t = blockIdx.x;
  internal::RouteOneToken(logits + static_cast<int64_t>(t) * n_expert, n_expert, k, ids + t * k,
                          weights + t * k, paired != nullptr ? paired + t * 2 * k : nullptr, p);
}

__global__ void GroupByExpertKernel(const int32_t* ids, int n_pairs, int k, int n_expert,
                                    int32_t* begin, int32_t* active, int32_t* active_begin,
                                    int32_t* entry_token, int32_t* slot_entry) {
  extern __shared__ int32_t group_shared[];
  internal::GroupByExpertBlock(ids, n_pairs, k, n_expert, begin, active, active_begin,
                               entry_token, slot_entry, group_shared);
}

__global__ void CombineKernel(const float* y, const int32_t* slot_entry,
                              const float* weights, int k, int64_t n,
                              float* out) {
  const int t = blockIdx.y;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int32_t* se = slot_entry + t * k;
  const float* w = weights + t * k;
  float acc = y[se[0] * n + i] * w[0];
  for (int s = 1; s < k; ++s) acc += y[se[s] * n + i] * w[s];
  out[t * n + i] = acc;
}

// Row blockIdx.x's gate, then part blockIdx.y of its n elements: every
// block of a row sums the same dot in the same order (so the same gate).
__global__ void AddGatedSharedKernel(const float* gate_inp, const float* x,
                                     const float* shared, int64_t n,
                                     float* out) {
  __shared__ float scratch[32];
  const int t = blockIdx.x;
  const float* xr = x + t * n;
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += gate_inp[i] * xr[i];
  acc = BlockSum(acc, scratch);
  const float gate = SigmoidF(acc);
  const int64_t per = (n + gridDim.y - 1) / gridDim.y;
  const int64_t end = (blockIdx.y + 1) * per < n ? (blockIdx.y + 1) * per : n;
  for (int64_t i = blockIdx.y * per + threadIdx.x; i < end; i += blockDim.x) {
    out[t * n + i] += shared[t * n + i] * gate;
  }
}

void AllowLargeSmem(const void* kernel) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       kMaxDynamicSmem);
}

}  // namespace

void PrepareKernels() {
  AllowLargeSmem(reinterpret_cast<const void*>(AttendKernel<OneSeq>));
  AllowLargeSmem(reinterpret_cast<const void*>(AttendKernel<ManySeqs>));
  AllowLargeSmem(reinterpret_cast<const void*>(DeltaScanKernel<OneSeq>));
  AllowLargeSmem(reinterpret_cast<const void*>(DeltaScanKernel<ManySeqs>));
}

void AddRmsNorm(float* x, const float* add, int64_t n_tok, int64_t n,
                const float* w, float eps, float* xn, Stream stream) {
  if (n_tok <= 0) return;
  internal::WithNormElems(n, kThreads, [&](auto per) {
    AddRmsNormKernel<decltype(per)::value><<<n_tok, kThreads, 0, stream>>>(x, add, n, w, eps, xn);
  });
}

void Add(float* x, const float* y, int64_t n, Stream stream) {
  if (n <= 0) return;
  AddKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
}

namespace {

template <typename Loc>
void LaunchAttentionPrepare(const AttentionShape& s, float* q, const float* k,
                            const float* v, const float* q_norm, const float* k_norm,
                            Loc loc, int64_t n_tok, Stream stream) {
  if (n_tok <= 0) return;
  const float theta_scale =
      std::pow(s.freq_base, -2.0f / static_cast<float>(s.n_rot));
  const dim3 grid(static_cast<unsigned>(n_tok), s.n_head + s.n_head_kv);
  const int threads = RoundUp32(s.head_dim);
  AttentionPrepareKernel<<<grid, threads, s.head_dim * sizeof(float), stream>>>(
      s, theta_scale, q, k, v, q_norm, k_norm, loc);
}

template <typename Loc>
void LaunchAttend(const AttentionShape& s, const float* q, Loc loc, int64_t n_tok,
                  float* o, Stream stream) {
  if (n_tok <= 0) return;
  const size_t smem = (s.head_dim + s.kv_capacity +
                       (kThreads / 32) * 32 * kDimsPerLane) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(n_tok), s.n_head);
  AttendKernel<<<grid, kThreads, smem, stream>>>(s, q, loc, o);
}

template <typename Loc>
void LaunchDeltaNetConv(const DeltaNetShape& s, const float* kernel, float* qkv,
                        Loc loc, int n_seqs, int64_t n_tok, Stream stream) {
  if (n_tok <= 0) return;
  const dim3 conv_grid(Blocks(s.channels()), n_seqs);
  ConvSiluKernel<<<conv_grid, kThreads, 0, stream>>>(s.channels(), s.conv_kernel, kernel,
                                                     qkv, loc);
  // The norms are per row: one launch over every sequence's rows.
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(s.state_size));
  const dim3 grid(static_cast<unsigned>(n_tok), 2 * s.n_k_heads);
  L2NormHeadsKernel<<<grid, RoundUp32(s.state_size), 0, stream>>>(s, qkv,
                                                                   q_scale);
}

template <typename Loc>
void LaunchDeltaNetScan(const DeltaNetShape& s, const float* qkv, const float* beta,
                        const float* g, const float* z, const float* norm, Loc loc,
                        int n_seqs, float* o, Stream stream) {
  const int n = s.state_size;
  const dim3 grid(s.n_v_heads, n_seqs);
  if (n == kScanCols) {
    DeltaScanRegKernel<1><<<grid, n, 0, stream>>>(s, qkv, beta, g, z, norm, loc, o);
    return;
  }
  if (n == 2 * kScanCols) {
    DeltaScanRegKernel<2><<<grid, 2 * n, 0, stream>>>(s, qkv, beta, g, z, norm, loc, o);
    return;
  }
  if (n == 4 * kScanCols) {
    DeltaScanRegKernel<4><<<grid, 4 * n, 0, stream>>>(s, qkv, beta, g, z, norm, loc, o);
    return;
  }
  const size_t smem = (static_cast<size_t>(n) * (n + 1) + 2 * n) * sizeof(float);
  // More threads than state rows: the extra ones only help move the state
  // in and out of shared memory (the recurrence uses n of them).
  const int threads = std::min(1024, std::max(RoundUp32(n), 512));
  DeltaScanKernel<<<grid, threads, smem, stream>>>(s, qkv, beta, g, z, norm, loc, o);
}

}  // namespace

void AttentionPrepare(const AttentionShape& s, float* q, const float* k,
                      const float* v, const float* q_norm,
                      const float* k_norm, const int32_t* d_pos0,
                      int64_t n_tok, float* k_cache, float* v_cache,
                      Stream stream) {
  LaunchAttentionPrepare(s, q, k, v, q_norm, k_norm,
                         OneSeq{static_cast<int>(n_tok), d_pos0, k_cache, v_cache}, n_tok,
                         stream);
}

void AttentionPrepareSeqs(const AttentionShape& s, float* q, const float* k,
                          const float* v, const float* q_norm, const float* k_norm,
                          const SeqBatch& b, int64_t n_tok, Stream stream) {
  LaunchAttentionPrepare(s, q, k, v, q_norm, k_norm, ManySeqs{b}, n_tok, stream);
}

int AttentionMaxCapacity() {
  return kMaxDynamicSmem / 4 - 1024 - (kThreads / 32) * 32 * kDimsPerLane;
}

void Attend(const AttentionShape& s, const float* q, const float* k_cache,
            const float* v_cache, const int32_t* d_pos0, int64_t n_tok,
            float* o, Stream stream) {
  LaunchAttend(s, q,
               OneSeq{static_cast<int>(n_tok), d_pos0, const_cast<float*>(k_cache),
                      const_cast<float*>(v_cache)},
               n_tok, o, stream);
}

void AttendSeqs(const AttentionShape& s, const float* q, const SeqBatch& b, int64_t n_tok,
                float* o, Stream stream) {
  LaunchAttend(s, q, ManySeqs{b}, n_tok, o, stream);
}

void DeltaNetGates(const DeltaNetShape& s, float* beta, float* alpha_g,
                   const float* dt_bias, const float* a, int64_t n_tok,
                   Stream stream) {
  const int64_t n = n_tok * s.n_v_heads;
  if (n <= 0) return;
  DeltaNetGatesKernel<<<Blocks(n), kThreads, 0, stream>>>(
      s.n_v_heads, beta, alpha_g, dt_bias, a, n);
}

void DeltaNetConv(const DeltaNetShape& s, const float* kernel, float* qkv,
                  int64_t n_tok, float* conv_state, Stream stream) {
  LaunchDeltaNetConv(s, kernel, qkv, OneSeq{static_cast<int>(n_tok), nullptr, conv_state, nullptr},
                     1, n_tok, stream);
}

void DeltaNetConvSeqs(const DeltaNetShape& s, const float* kernel, float* qkv,
                      const SeqBatch& b, int64_t n_tok, Stream stream) {
  LaunchDeltaNetConv(s, kernel, qkv, ManySeqs{b}, b.n_seqs, n_tok, stream);
}

int DeltaNetMaxStateSize() {
  int n = 32;
  while (static_cast<int64_t>(n + 32) * (n + 33) * 4 + 2 * (n + 32) * 4 <=
             kMaxDynamicSmem &&
         n + 32 <= 1024) {
    n += 32;
  }
  return n;
}

void DeltaNetScan(const DeltaNetShape& s, const float* qkv, const float* beta,
                  const float* g, const float* z, const float* norm,
                  int64_t n_tok, float* ssm, float* o, Stream stream) {
  if (n_tok <= 0) return;
  LaunchDeltaNetScan(s, qkv, beta, g, z, norm,
                     OneSeq{static_cast<int>(n_tok), nullptr, nullptr, ssm}, 1, o, stream);
}

void DeltaNetScanSeqs(const DeltaNetShape& s, const float* qkv, const float* beta,
                      const float* g, const float* z, const float* norm, const SeqBatch& b,
                      float* o, Stream stream) {
  if (b.n_seqs <= 0) return;
  LaunchDeltaNetScan(s, qkv, beta, g, z, norm, ManySeqs{b}, b.n_seqs, o, stream);
}

void TopK(const float* logits, int64_t n_tok, int n_expert, int k,
          int32_t* ids, float* weights, Stream stream, int32_t* paired_ids) {
  if (n_tok <= 0) return;
  TopKKernel<<<static_cast<unsigned>(n_tok), 32, n_expert * sizeof(float),
               stream>>>(logits, n_expert, k, ids, weights, paired_ids);
}

void GroupByExpert(const int32_t* ids, int64_t n_tok, int k, int n_expert,
                   int32_t* group_begin, int32_t* active, int32_t* active_begin,
                   int32_t* entry_token, int32_t* slot_entry, Stream stream) {
  const int pairs = static_cast<int>(n_tok * k);
  if (pairs <= 0) return;
  // One block: a batch's pairs are at most kMaxMicroBatch x k.
  const size_t smem = internal::GroupSharedBytes(n_expert, internal::kGroupThreads);
  GroupByExpertKernel<<<1, internal::kGroupThreads, smem, stream>>>(
      ids, pairs, k, n_expert, group_begin, active, active_begin, entry_token, slot_entry);
}

void SwiGlu(float* g, const float* u, int64_t n, Stream stream) {
  if (n <= 0) return;
  SwiGluKernel<<<Blocks(n), kThreads, 0, stream>>>(g, u, n);
}

void CombineExperts(const float* y, const int32_t* slot_entry,
                    const float* weights, int64_t n_tok, int k, int64_t n,
                    float* out, Stream stream) {
  if (n_tok <= 0) return;
  const dim3 grid(Blocks(n), static_cast<unsigned>(n_tok));
  CombineKernel<<<grid, kThreads, 0, stream>>>(y, slot_entry, weights, k, n,
                                               out);
}

void AddGatedShared(const float* gate_inp, const float* x,
                    const float* shared, int64_t n_tok, int64_t n,
                    float* out, Stream stream) {
  if (n_tok <= 0) return;
  // A block a row took 7.6 us at 8 rows of 2,048 (ncu, H100, 2026-12-07):
  // each row's elements in parts of a thread each, up to 8
  // (SLUICE_CUDA_GATED_SHARED_PARTS overrides it, read at every call).
  const char* env = std::getenv("SLUICE_CUDA_GATED_SHARED_PARTS");
  int64_t parts = env != nullptr ? std::atoll(env) : (n + kThreads - 1) / kThreads;
  parts = parts < 1 ? 1 : (parts > 8 ? 8 : parts);
  AddGatedSharedKernel<<<dim3(static_cast<unsigned>(n_tok), static_cast<unsigned>(parts)),
                         kThreads, 0, stream>>>(gate_inp, x, shared, n, out);
}

}  // namespace sluice::cuda
