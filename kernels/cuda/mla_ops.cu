// Device code of mla_ops.h. Products and roundings that decide a half value
// are written with __fmul_rn / __fadd_rn so that nvcc does not fuse them
// into FMAs the CPU does not use.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/mla_device.h"
#include "kernels/cuda/mla_mma_device.h"
#include "kernels/cuda/mla_ops.h"
#include "kernels/cuda/warp_reduce.h"

namespace sluice::cuda {
namespace {

using internal::BlockSum;
using internal::Half;
using internal::kElemsPerThread;
using internal::kHeadsPerBlock;
using internal::kThreads;
using internal::ManySeqs;
using internal::Nope;
using internal::OneSeq;
using internal::SeqAt;
using internal::Width;

// The queries of a block's heads in dynamic shared memory stay under the
// 48 KiB a launch gets without opting in (with the static arrays).
constexpr int kMaxWidth = 1280;

// cos / sin of pair i at position pos (model/rope_yarn.cc ScaledRopeAngles).
__device__ void RopeAngle(const MlaRope& r, int pos, int i, float* c, float* s) {
  float theta = static_cast<float>(pos);
  for (int j = 0; j < i; ++j) theta = __fmul_rn(theta, r.theta_scale);
  float t = __fmul_rn(r.freq_scale, theta);
  if (r.ext_factor != 0.0f) {
    const float y = (static_cast<float>(i) - r.corr_lo) / fmaxf(0.001f, r.corr_hi - r.corr_lo);
    const float ramp_mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * r.ext_factor;
    t = __fadd_rn(__fmul_rn(t, 1.0f - ramp_mix), __fmul_rn(theta, ramp_mix));
  }
  *c = __fmul_rn(cosf(t), r.mscale);
  *s = __fmul_rn(sinf(t), r.mscale);
}

// Rotates pair i of x[0, n_rot) (the pairs of r) into y with the angles
// cs / sn.
__device__ void RotatePair(const MlaRope& r, const float* x, const float* cs, const float* sn,
                           float* y, int i, bool round) {
  const int half = r.n_rot / 2;
  const int a = r.neox ? i : 2 * i, b = r.neox ? i + half : 2 * i + 1;
  const float x0 = x[a], x1 = x[b];
  const float y0 = __fsub_rn(__fmul_rn(x0, cs[i]), __fmul_rn(x1, sn[i]));
  const float y1 = __fadd_rn(__fmul_rn(x0, sn[i]), __fmul_rn(x1, cs[i]));
  y[a] = round ? Half(y0) : y0;
  y[b] = round ? Half(y1) : y1;
}

// One block per token: the cache row, then every head's q_pe.
template <typename Loc>
__global__ void MlaPrepareKernel(MlaShape s, const float* ckv, const float* q,
                                 const float* norm, Loc loc, int n_tok, float* q_abs) {
  __shared__ double scratch[32];
  extern __shared__ float angles[];  // cos [n_rot / 2], then sin
  const int t = blockIdx.x;
  const SeqAt seq = loc.Of(t);
  const int pos = seq.pos0 + t - seq.row;
  const int lat = s.kv_lora_rank, width = Width(s), half = s.rope.n_rot / 2;
  float* cs = angles;
  float* sn = angles + half;
  for (int i = threadIdx.x; i < half; i += blockDim.x) RopeAngle(s.rope, pos, i, &cs[i], &sn[i]);
  const float* src = ckv + static_cast<int64_t>(t) * width;
  double sum = 0.0;
  for (int i = threadIdx.x; i < lat; i += blockDim.x) sum += static_cast<double>(src[i]) * src[i];
  sum = BlockSum(sum, scratch);  // its barriers also publish the angles
  const float mean = static_cast<float>(sum / static_cast<double>(lat));
  const float scale = 1.0f / sqrtf(mean + s.eps);
  float* row = seq.cache + static_cast<int64_t>(pos) * width;
  for (int i = threadIdx.x; i < lat; i += blockDim.x) {
    row[i] = Half(__fmul_rn(__fmul_rn(src[i], scale), norm[i]));
  }
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    RotatePair(s.rope, src + lat, cs, sn, row + lat, i, /*round=*/true);
  }
  // Every head's pairs at once (a thread a pair), not a head at a time.
  for (int x = threadIdx.x; x < s.n_head * half; x += blockDim.x) {
    const int h = x / half, i = x % half;
    const float* qh = q + (static_cast<int64_t>(t) * s.n_head + h) * s.head_k + Nope(s);
    float* dst = q_abs + (static_cast<int64_t>(h) * n_tok + t) * width + lat;
    RotatePair(s.rope, qh, cs, sn, dst, i, /*round=*/false);
  }
}

__global__ void HeadEntriesKernel(int n_head, int n_tok, int32_t* begin, int32_t* x_row) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e <= n_head) begin[e] = e * n_tok;
  if (e < n_head * n_tok) x_row[e] = (e % n_tok) * n_head + e / n_tok;
}

// Two blocks an SM where a thread owns two latent values (at most 128
// registers: the loads of four keys in flight with no spills).
template <int E, typename Loc>
__global__ void __launch_bounds__(kThreads, E == 2 ? 2 : 1)
    MlaAttendKernel(MlaShape s, const float* q_abs, Loc loc, int n_tok, float* o_lat,
                    float* part, int split_len) {
  extern __shared__ float qs[];  // [kHeadsPerBlock][width]
  internal::MlaAttendBlock<E, Loc>(s, q_abs, loc, n_tok, o_lat, qs, part, split_len);
}

// The tensor-core attention (mla_mma_device.h): one block an SM.
template <typename Loc>
__global__ void __launch_bounds__(internal::kMlaMmaThreads, 1)
    MlaMmaAttendKernel(MlaShape s, const float* q_abs, Loc loc, int n_tok, float* o_lat,
                       float* part, int split_len, int heads_per_block) {
  extern __shared__ __align__(16) uint32_t mma_smem[];
  internal::MlaMmaAttendBlock<Loc>(s, q_abs, loc, n_tok, o_lat, mma_smem, part, split_len,
                                   heads_per_block);
}

// The shared memory a block may opt into (227 KiB on sm_90).
constexpr int64_t kMaxOptInShared = 227 * 1024;

__global__ void MlaCombineKernel(MlaShape s, const float* part, int splits, int n_tok,
                                 float* o_lat) {
  internal::MlaCombineBlock(s, part, splits, n_tok, o_lat);
}

__global__ void HeadsToTokensKernel(const float* in, int n_head, int n_tok, int64_t n,
                                    float* out) {
  const int t = blockIdx.x, h = blockIdx.y;
  const float* src = in + (static_cast<int64_t>(h) * n_tok + t) * n;
  float* dst = out + (static_cast<int64_t>(t) * n_head + h) * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

template <typename Loc>
void LaunchPrepare(const MlaShape& s, const float* ckv, const float* q, const float* norm,
                   Loc loc, int64_t n_tok, float* q_abs, Stream stream) {
  if (n_tok <= 0) return;
  const size_t smem = s.rope.n_rot * sizeof(float);
  MlaPrepareKernel<<<static_cast<unsigned>(n_tok), kThreads, smem, stream>>>(
      s, ckv, q, norm, loc, static_cast<int>(n_tok), q_abs);
}

template <typename Loc>
void LaunchAttend(const MlaShape& s, const float* q_abs, Loc loc, int64_t n_tok, float* o_lat,
                  float* scratch, Stream stream) {
  if (n_tok <= 0) return;
  // No capacity (a caller that does not split): one range.
  const int split_len = s.kv_capacity > 0 ? MlaSplitKeys(s.kv_capacity) : 0;
  const int splits =
      scratch == nullptr || n_tok > kMlaSplitMaxTokens || split_len >= s.kv_capacity
          ? 1
          : (s.kv_capacity + split_len - 1) / split_len;
  const dim3 grid(static_cast<unsigned>(n_tok),
                  (s.n_head + kHeadsPerBlock - 1) / kHeadsPerBlock, splits);
  float* part = splits > 1 ? scratch : nullptr;
  const int n = static_cast<int>(n_tok);
  const size_t smem = static_cast<size_t>(kHeadsPerBlock) * s.width() * sizeof(float);
  if (MlaTensorCoresEnabled() && MlaMmaSupported(s)) {
    const int hpb = internal::MlaMmaHeadsPerBlock(s, n_tok, splits, MlaFewHeadsEnabled());
    const dim3 mma_grid(static_cast<unsigned>(n_tok), (s.n_head + hpb - 1) / hpb, splits);
    // Within kMaxOptInShared (MlaMmaSupported), which PrepareMlaKernels
    // allowed.
    const auto bytes = static_cast<size_t>(internal::MlaMmaSharedBytes(s.width()));
    MlaMmaAttendKernel<Loc><<<mma_grid, internal::kMlaMmaThreads, bytes, stream>>>(
        s, q_abs, loc, n, o_lat, part, split_len, hpb);
  } else if (internal::ElemsFor(s.kv_lora_rank) == 2) {  // the values a thread owns
    MlaAttendKernel<2, Loc><<<grid, kThreads, smem, stream>>>(s, q_abs, loc, n, o_lat, part,
                                                              split_len);
  } else {
    MlaAttendKernel<kElemsPerThread, Loc>
        <<<grid, kThreads, smem, stream>>>(s, q_abs, loc, n, o_lat, part, split_len);
  }
  if (splits > 1) {
    const dim3 merge(static_cast<unsigned>(n_tok), s.n_head);
    MlaCombineKernel<<<merge, kThreads, 0, stream>>>(s, scratch, splits,
                                                     static_cast<int>(n_tok), o_lat);
  }
}

}  // namespace

MlaRope MlaRopeOf(int n_rot, bool neox, float freq_base, float freq_scale, float ext_factor,
                  float attn_factor, float corr_lo, float corr_hi) {
  MlaRope r;
  r.n_rot = n_rot;
  r.neox = neox;
  r.theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  r.freq_scale = freq_scale;
  r.ext_factor = ext_factor;
  r.corr_lo = corr_lo;
  r.corr_hi = corr_hi;
  r.mscale = attn_factor;
  if (ext_factor != 0.0f) r.mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
  return r;
}

bool MlaSupported(const MlaShape& s) {
  return s.n_head > 0 && s.kv_lora_rank > 0 && s.kv_lora_rank <= kThreads * kElemsPerThread &&
         s.rope.n_rot % 2 == 0 && s.rope.n_rot > 0 && s.head_k > s.rope.n_rot &&
         s.width() <= kMaxWidth;
}

void PrepareMlaKernels() {
  for (const void* k : {reinterpret_cast<const void*>(MlaMmaAttendKernel<internal::OneSeq>),
                        reinterpret_cast<const void*>(MlaMmaAttendKernel<internal::ManySeqs>)}) {
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(kMaxOptInShared));
  }
}

bool MlaMmaSupported(const MlaShape& s) {
  return MlaSupported(s) && internal::MlaMmaShapeOk(s) &&
         internal::MlaMmaSharedBytes(s.width()) <= kMaxOptInShared;
}

void MlaPrepare(const MlaShape& s, const float* ckv, const float* q, const float* kv_a_norm,
                const int32_t* d_pos0, int64_t n_tok, float* cache, float* q_abs, Stream stream) {
  LaunchPrepare(s, ckv, q, kv_a_norm, OneSeq{d_pos0, cache}, n_tok, q_abs, stream);
}

void MlaPrepareSeqs(const MlaShape& s, const float* ckv, const float* q, const float* kv_a_norm,
                    const SeqBatch& b, int64_t n_tok, float* q_abs, Stream stream) {
  LaunchPrepare(s, ckv, q, kv_a_norm, ManySeqs{b}, n_tok, q_abs, stream);
}

void MlaHeadEntries(int n_head, int64_t n_tok, int32_t* begin, int32_t* x_row, Stream stream) {
  const int64_t n = n_head * n_tok + 1;
  if (n_tok <= 0) return;
  HeadEntriesKernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0,
                      stream>>>(n_head, static_cast<int>(n_tok), begin, x_row);
}

void MlaAttend(const MlaShape& s, const float* q_abs, const float* cache, const int32_t* d_pos0,
               int64_t n_tok, float* o_lat, float* scratch, Stream stream) {
  LaunchAttend(s, q_abs, OneSeq{d_pos0, const_cast<float*>(cache)}, n_tok, o_lat, scratch,
               stream);
}

void MlaAttendSeqs(const MlaShape& s, const float* q_abs, const SeqBatch& b, int64_t n_tok,
                   float* o_lat, float* scratch, Stream stream) {
  LaunchAttend(s, q_abs, ManySeqs{b}, n_tok, o_lat, scratch, stream);
}

void HeadsToTokens(const float* in, int n_head, int64_t n_tok, int64_t n, float* out,
                   Stream stream) {
  if (n_tok <= 0 || n_head <= 0) return;
  const dim3 grid(static_cast<unsigned>(n_tok), n_head);
  HeadsToTokensKernel<<<grid, 128, 0, stream>>>(in, n_head, static_cast<int>(n_tok), n, out);
}

}  // namespace sluice::cuda
