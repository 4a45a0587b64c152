// The attention over the latent cache of mla_ops.h as device code that
// mla_ops.cu launches and g++ runs through host_emulation.h
// (mla_attend_emulation_test): include host_emulation.h first there.
// Products and roundings that decide a half value are written with
// __fmul_rn / __fadd_rn so that nvcc does not fuse them into FMAs the CPU
// does not use.
#ifndef SLUICE_KERNELS_CUDA_MLA_DEVICE_H_
#define SLUICE_KERNELS_CUDA_MLA_DEVICE_H_

#include <cstdint>

#include "kernels/cuda/mla_ops.h"
#include "kernels/cuda/warp_reduce.h"

namespace sluice::cuda::internal {

constexpr int kThreads = 256;
// MlaAttend: heads a block handles (they share each cache row it loads),
// keys scored per chunk, latent values per thread.
constexpr int kHeadsPerBlock = 8;
constexpr int kChunk = kMlaChunk;
constexpr int kElemsPerThread = 4;

// MlaShape's width() and nope() for device code (the header is plain C++).
__device__ __forceinline__ int Width(const MlaShape& s) { return s.kv_lora_rank + s.rope.n_rot; }
__device__ __forceinline__ int Nope(const MlaShape& s) { return s.head_k - s.rope.n_rot; }

// The nearest half value, ties to even, as a float; inf past the range (as
// kernels::RoundToHalf).
__device__ __forceinline__ float Half(float x) { return __half2float(__float2half_rn(x)); }

// One accumulator update of kernels/cpu/half_acc.h: the f32 result rounded
// to half, or kept unrounded (and the element left in f32 from then on)
// where it would not fit.
__device__ __forceinline__ float HalfOrF32(float v, bool& f32) {
  if (f32) return v;
  if (fabsf(v) >= 65520.0f) {
    f32 = true;
    return v;
  }
  return Half(v);
}

// Where a row's sequence is: its first row in the batch, its first
// position, its cache.
struct SeqAt {
  int row;
  int pos0;
  float* cache;
};

struct OneSeq {
  const int32_t* d_pos0;
  float* cache;
  __device__ SeqAt Of(int) const { return {0, *d_pos0, cache}; }
};

struct ManySeqs {
  SeqBatch b;
  __device__ SeqAt Of(int row) const {
    const int i = b.row_seq[row];
    return {b.rows[i].row, b.rows[i].pos0, b.states[i].a};
  }
};

// The scores of the chunk's keys [j0, j0 + n) for the block's heads: one
// warp per (head, key) pair at a time, lanes over the row.
__device__ inline void ScoreChunk(const MlaShape& s, const float* qs, int heads, const float* cache,
                           int j0, int n, float* sc) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  const int width = Width(s);
  for (int p = warp; p < heads * kChunk; p += n_warps) {
    const int h = p / kChunk, jj = p % kChunk;
    if (jj >= n) continue;
    const float* row = cache + static_cast<int64_t>(j0 + jj) * width;
    const float* qh = qs + h * width;
    float acc = 0.0f;
    for (int i = lane; i < width; i += 32) acc += qh[i] * row[i];
    acc = WarpSum(acc);
    if (lane == 0) sc[h * kChunk + jj] = acc * s.kq_scale;
  }
}

// One thread per head walks the chunk's scores in order (the CPU's
// sequence of running maxima): the factor the accumulator is scaled by
// and the weight of each key's row.
__device__ inline void SoftmaxSteps(int heads, int n, const float* sc, float* ms, float* vs,
                             float* max_s, float* sum) {
  const int h = threadIdx.x;
  if (h >= heads) return;
  float m = max_s[h], total = sum[h];
  for (int jj = 0; jj < n; ++jj) {
    const float x = sc[h * kChunk + jj];
    float a = 1.0f, v = 1.0f;
    if (x > m) {
      a = expf(m - x);
      m = x;
    } else {
      v = expf(x - m);
    }
    ms[h * kChunk + jj] = a;
    vs[h * kChunk + jj] = v;
    total = __fadd_rn(__fmul_rn(total, a), v);
  }
  max_s[h] = m;
  sum[h] = total;
}

// A block's share of a row's keys when MlaAttend splits them over blocks
// (blockIdx.z): range z of split_len keys each (MlaSplitKeys: a function of
// the cache's capacity alone, so that a row's ranges do not depend on the
// batch it is in).
struct KeyRange {
  int begin, end;
};
__device__ __forceinline__ KeyRange SplitRange(int n_ctx, int split_len, int z) {
  if (split_len <= 0) return {0, n_ctx};
  const int64_t b = static_cast<int64_t>(z) * split_len;
  return {static_cast<int>(b < n_ctx ? b : n_ctx),
          static_cast<int>(b + split_len < n_ctx ? b + split_len : n_ctx)};
}

// The floats of one (split, head, token) partial of MlaAttend: the
// unnormalised accumulator [kv_lora_rank], then its running maximum and
// sum (an empty range: -inf and 0).
__device__ __forceinline__ int64_t PartFloats(const MlaShape& s) { return s.kv_lora_rank + 2; }

// Block (token t, heads [h0, h0 + kHeadsPerBlock), keys range z of
// split_len keys): the chunks of keys in order; each thread owns latent values
// i = threadIdx.x + k * blockDim.x of every head and applies the updates of
// each key in turn. Unsplit (part null), the normalised values go to
// o_lat; split, the partial goes to part[z][h][t] (MlaCombineParts).
// qs: kHeadsPerBlock * width floats of the block's shared memory.
template <typename Loc>
__device__ void MlaAttendBlock(const MlaShape& s, const float* q_abs, Loc loc, int n_tok,
                               float* o_lat, float* qs, float* part = nullptr,
                               int split_len = 0) {
  __shared__ float sc[kHeadsPerBlock * kChunk], ms[kHeadsPerBlock * kChunk],
      vs[kHeadsPerBlock * kChunk];
  __shared__ float max_s[kHeadsPerBlock], sum[kHeadsPerBlock];
  const int t = blockIdx.x, h0 = blockIdx.y * kHeadsPerBlock;
  const int heads = s.n_head - h0 < kHeadsPerBlock ? s.n_head - h0 : kHeadsPerBlock;
  const int width = Width(s), lat = s.kv_lora_rank;
  const SeqAt seq = loc.Of(t);
  const int n_ctx = seq.pos0 + t - seq.row + 1;
  const KeyRange keys = SplitRange(n_ctx, part == nullptr ? 0 : split_len, blockIdx.z);
  // Where head h's partial goes (split only).
  const auto part_of = [&](int h) {
    return part + ((static_cast<int64_t>(blockIdx.z) * s.n_head + h0 + h) * n_tok + t) *
                      PartFloats(s);
  };
  if (keys.begin >= keys.end) {  // an empty share of a short context
    if (static_cast<int>(threadIdx.x) < heads) {
      part_of(threadIdx.x)[lat] = -INFINITY;
      part_of(threadIdx.x)[lat + 1] = 0.0f;
    }
    return;
  }
  for (int x = threadIdx.x; x < heads * width; x += blockDim.x) {
    const int h = x / width, i = x % width;
    qs[x] = Half(q_abs[(static_cast<int64_t>(h0 + h) * n_tok + t) * width + i]);
  }
  if (threadIdx.x < kHeadsPerBlock) {
    max_s[threadIdx.x] = -INFINITY;
    sum[threadIdx.x] = 0.0f;
  }
  float acc[kElemsPerThread][kHeadsPerBlock];
  bool f32[kElemsPerThread][kHeadsPerBlock];
#pragma unroll
  for (int k = 0; k < kElemsPerThread; ++k) {
#pragma unroll
    for (int h = 0; h < kHeadsPerBlock; ++h) {
      acc[k][h] = 0.0f;
      f32[k][h] = false;
    }
  }
  __syncthreads();
  for (int j0 = keys.begin; j0 < keys.end; j0 += kChunk) {
    const int n = keys.end - j0 < kChunk ? keys.end - j0 : kChunk;
    ScoreChunk(s, qs, heads, seq.cache, j0, n, sc);
    __syncthreads();
    SoftmaxSteps(heads, n, sc, ms, vs, max_s, sum);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kElemsPerThread; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i >= lat) break;
      for (int jj = 0; jj < n; ++jj) {
        const float v = seq.cache[static_cast<int64_t>(j0 + jj) * width + i];
#pragma unroll
        for (int h = 0; h < kHeadsPerBlock; ++h) {
          if (h >= heads) break;
          const float a = __fmul_rn(acc[k][h], ms[h * kChunk + jj]);
          acc[k][h] = HalfOrF32(a, f32[k][h]);
          const float b = __fadd_rn(acc[k][h], __fmul_rn(v, vs[h * kChunk + jj]));
          acc[k][h] = HalfOrF32(b, f32[k][h]);
        }
      }
    }
    __syncthreads();
  }
  if (part != nullptr && static_cast<int>(threadIdx.x) < heads) {
    part_of(threadIdx.x)[lat] = max_s[threadIdx.x];
    part_of(threadIdx.x)[lat + 1] = sum[threadIdx.x];
  }
#pragma unroll
  for (int k = 0; k < kElemsPerThread; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i >= lat) break;
#pragma unroll
    for (int h = 0; h < kHeadsPerBlock; ++h) {
      if (h >= heads) break;
      if (part != nullptr) {
        part_of(h)[i] = acc[k][h];
        continue;
      }
      const float inv = sum[h] == 0.0f ? 0.0f : 1.0f / sum[h];
      o_lat[(static_cast<int64_t>(h0 + h) * n_tok + t) * lat + i] = __fmul_rn(acc[k][h], inv);
    }
  }
}

// Block (token t, head h): the splits' partials of MlaAttendBlock merged,
// each scaled by exp(its maximum - the largest), and normalised. With one
// non-empty split (a context of at most split_len keys) every factor is
// exp(0) = 1 and the values are the unsplit block's bit for bit.
__device__ inline void MlaCombineBlock(const MlaShape& s, const float* part, int splits,
                                       int n_tok, float* o_lat) {
  const int t = blockIdx.x, h = blockIdx.y, lat = s.kv_lora_rank;
  const auto at = [&](int z) {
    return part + ((static_cast<int64_t>(z) * s.n_head + h) * n_tok + t) * PartFloats(s);
  };
  float m = -INFINITY;
  for (int z = 0; z < splits; ++z) {
    if (at(z)[lat + 1] != 0.0f && at(z)[lat] > m) m = at(z)[lat];
  }
  float total = 0.0f;
  for (int z = 0; z < splits; ++z) {
    if (at(z)[lat + 1] != 0.0f) total = __fadd_rn(total, __fmul_rn(at(z)[lat + 1], expf(at(z)[lat] - m)));
  }
  const float inv = total == 0.0f ? 0.0f : 1.0f / total;
  for (int i = threadIdx.x; i < lat; i += blockDim.x) {
    float acc = 0.0f;
    for (int z = 0; z < splits; ++z) {
      if (at(z)[lat + 1] != 0.0f) acc = __fadd_rn(acc, __fmul_rn(at(z)[i], expf(at(z)[lat] - m)));
    }
    o_lat[(static_cast<int64_t>(h) * n_tok + t) * lat + i] = __fmul_rn(acc, inv);
  }
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_MLA_DEVICE_H_
