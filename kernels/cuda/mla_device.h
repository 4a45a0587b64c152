// The attention over the latent cache of mla_ops.h as device code that
// mla_ops.cu launches and g++ runs through host_emulation.h
// (mla_attend_emulation_test): include host_emulation.h first there.
// The merges of ranges are written with __fmul_rn / __fadd_rn so that the
// split and the in-block merge give the same bits whatever nvcc fuses.
#ifndef SLUICE_KERNELS_CUDA_MLA_DEVICE_H_
#define SLUICE_KERNELS_CUDA_MLA_DEVICE_H_

#include <cstdint>
#include <cstring>

#include "kernels/cuda/mla_ops.h"
#include "kernels/cuda/warp_reduce.h"

namespace sluice::cuda::internal {

constexpr int kThreads = 256;
// MlaAttend: heads a block handles (they share each cache row it loads),
// keys scored per chunk, latent values per thread.
constexpr int kHeadsPerBlock = 8;
constexpr int kChunk = kMlaChunk;
constexpr int kElemsPerThread = 4;
// The latent values a thread owns for kv_lora_rank lat (MlaAttendBlock's
// E): 2 where they cover it (DeepSeek's and Kimi's 512), which leaves the
// registers of the other two to the loads in flight.
constexpr int ElemsFor(int lat) { return lat <= 2 * kThreads ? 2 : kElemsPerThread; }
// ChunkWeights gives each head of a block a warp.
static_assert(kThreads / 32 == kHeadsPerBlock, "a warp per head");

// MlaShape's width() and nope() for device code (the header is plain C++).
__device__ __forceinline__ int Width(const MlaShape& s) { return s.kv_lora_rank + s.rope.n_rot; }
__device__ __forceinline__ int Nope(const MlaShape& s) { return s.head_k - s.rope.n_rot; }

// The nearest half value, ties to even, as a float; inf past the range (as
// kernels::RoundToHalf).
__device__ __forceinline__ float Half(float x) { return __half2float(__float2half_rn(x)); }

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

// f(k, i, h) for each latent value i = threadIdx.x + k * blockDim.x < lat a
// thread owns (k < E) and each of the block's heads h.
template <int E, typename F>
__device__ __forceinline__ void ForOwned(int lat, int heads, F f) {
#pragma unroll
  for (int k = 0; k < E; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i >= lat) break;
#pragma unroll
    for (int h = 0; h < kHeadsPerBlock; ++h) {
      if (h >= heads) break;
      f(k, i, h);
    }
  }
}

// The scores of the chunk's n keys (rows: its first) for the block's heads: warp
// w takes keys w, w + 8, w + 16, w + 24 together, its lanes over the rows,
// so that each query value read from shared memory serves four keys and
// each row is read once for every head. A lane loads kRowBatch values of
// each of its keys before it multiplies any (a key waits for memory a few
// times, not once per value); each dot still adds its terms in the order
// of the row, summed lane-strided, then across the warp.
constexpr int kKeysPerWarp = kChunk / (kThreads / 32);
constexpr int kRowBatch = 3;
__device__ inline void ScoreChunk(const MlaShape& s, const float* qs, int heads,
                                  const float* chunk, int n, float* sc) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  const int width = Width(s);
  const float* rows[kKeysPerWarp];
#pragma unroll
  for (int g = 0; g < kKeysPerWarp; ++g) {
    const int jj = warp + g * n_warps;
    rows[g] = jj < n ? chunk + static_cast<int64_t>(jj) * width : nullptr;
  }
  float dot[kKeysPerWarp][kHeadsPerBlock];
#pragma unroll
  for (int g = 0; g < kKeysPerWarp; ++g) {
#pragma unroll
    for (int h = 0; h < kHeadsPerBlock; ++h) dot[g][h] = 0.0f;
  }
  for (int i0 = lane; i0 < width; i0 += 32 * kRowBatch) {
    float r[kKeysPerWarp][kRowBatch];
#pragma unroll
    for (int g = 0; g < kKeysPerWarp; ++g) {
#pragma unroll
      for (int u = 0; u < kRowBatch; ++u) {
        const int i = i0 + 32 * u;
        r[g][u] = rows[g] != nullptr && i < width ? rows[g][i] : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kRowBatch; ++u) {
      const int i = i0 + 32 * u;
      if (i >= width) break;
#pragma unroll
      for (int h = 0; h < kHeadsPerBlock; ++h) {
        if (h >= heads) break;
        const float q = qs[h * width + i];
#pragma unroll
        for (int g = 0; g < kKeysPerWarp; ++g) dot[g][h] += q * r[g][u];
      }
    }
  }
#pragma unroll
  for (int g = 0; g < kKeysPerWarp; ++g) {
    const int jj = warp + g * n_warps;
#pragma unroll
    for (int h = 0; h < kHeadsPerBlock; ++h) {
      if (h >= heads) break;
      const float d = WarpSum(dot[g][h]);
      if (lane == 0 && jj < n) sc[h * kChunk + jj] = d * s.kq_scale;
    }
  }
}

// The chunk's n weighted values (rows: its first) added to each head's
// accumulator of the latent values a thread owns, after its rescaling by
// scale[h]: a thread loads kKeyBatch keys' values before it adds any (the
// loads of a chunk overlap), each accumulator still adding its keys in
// order.
constexpr int kKeyBatch = 8;
template <int E>
__device__ inline void AccumulateChunk(const MlaShape& s, int heads, const float* chunk, int n,
                                       const float* w, const float* scale,
                                       float (&acc)[E][kHeadsPerBlock]) {
  const int width = Width(s), lat = s.kv_lora_rank;
  ForOwned<E>(lat, heads, [&](int k, int, int h) { acc[k][h] *= scale[h]; });
  for (int jb = 0; jb < n; jb += kKeyBatch) {
    float v[E][kKeyBatch];
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
#pragma unroll
      for (int u = 0; u < kKeyBatch; ++u) {
        v[k][u] = i < lat && jb + u < n ? chunk[static_cast<int64_t>(jb + u) * width + i] : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kKeyBatch; ++u) {
      if (jb + u >= n) break;
      ForOwned<E>(lat, heads, [&](int k, int, int h) {
        acc[k][h] = fmaf(w[h * kChunk + jb + u], v[k][u], acc[k][h]);
      });
    }
  }
}

// Warp h < heads (a block has kHeadsPerBlock warps) takes head h's scores
// of the chunk, a lane a key: the chunk's maximum joins the running one,
// each key's weight exp(score - max) goes to w, their sum to the running
// sum, and scale[h] is what the accumulator is multiplied by first
// (exp(old max - new max); 0 before the first key).
__device__ inline void ChunkWeights(int heads, int n, const float* sc, float* w, float* scale,
                                    float* max_s, float* sum) {
  const int lane = threadIdx.x & 31, h = threadIdx.x >> 5;
  if (h >= heads) return;
  const float x = lane < n ? sc[h * kChunk + lane] : -INFINITY;
  const float m_old = max_s[h];
  const float m = fmaxf(m_old, WarpMax(x));
  const float p = lane < n ? expf(x - m) : 0.0f;
  w[h * kChunk + lane] = p;
  const float chunk_sum = WarpSum(p);
  if (lane == 0) {
    const float a = expf(m_old - m);
    scale[h] = a;
    sum[h] = sum[h] * a + chunk_sum;
    max_s[h] = m;
  }
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

// The keys of a block's row t (a SeqAt's cache, n_ctx keys) and the ranges
// it takes: with `part`, range blockIdx.z alone; else all n_ranges. Head
// `head`'s partial of range blockIdx.z for row t is PartOf's.
struct BlockKeys {
  SeqAt seq;
  int n_ctx, n_ranges, z_begin, z_end;
};
template <typename Loc>
__device__ __forceinline__ BlockKeys KeysOf(Loc loc, int t, const float* part, int split_len) {
  BlockKeys k;
  k.seq = loc.Of(t);
  k.n_ctx = k.seq.pos0 + t - k.seq.row + 1;
  k.n_ranges = split_len > 0 ? (k.n_ctx + split_len - 1) / split_len : 1;
  k.z_begin = part != nullptr ? static_cast<int>(blockIdx.z) : 0;
  k.z_end = part != nullptr ? k.z_begin + 1 : k.n_ranges;
  return k;
}
__device__ __forceinline__ float* PartOf(const MlaShape& s, float* part, int head, int n_tok,
                                         int t) {
  return part + ((static_cast<int64_t>(blockIdx.z) * s.n_head + head) * n_tok + t) * PartFloats(s);
}
// A block's copy of `total` items into shared memory, thread by thread as
// `for (x = threadIdx.x; x < total; x += blockDim.x) store(x, load(x))`,
// but kBatch of a thread's loads issued before any of its stores: a loop
// that stores each item before loading the next waits out a memory round
// trip per item (the 64 heads' queries and a chunk's 64 cache rows took
// ~50 us a layer that way). The same items, the same values.
template <int kBatch, typename Load, typename Store>
__device__ __forceinline__ void BatchedCopy(int total, Load load, Store store) {
  for (int x0 = threadIdx.x; x0 < total; x0 += kBatch * static_cast<int>(blockDim.x)) {
    decltype(load(0)) v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int x = x0 + b * static_cast<int>(blockDim.x);
      if (x < total) v[b] = load(x);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int x = x0 + b * static_cast<int>(blockDim.x);
      if (x < total) store(x, v[b]);
    }
  }
}

// An empty range of a short context: thread h < heads writes head h's
// partial as one (maximum -inf, sum 0), which the merge skips.
template <typename PartOfHead>
__device__ __forceinline__ void PutEmptyRange(int heads, int lat, PartOfHead part_of) {
  if (static_cast<int>(threadIdx.x) < heads) {
    part_of(threadIdx.x)[lat] = -INFINITY;
    part_of(threadIdx.x)[lat + 1] = 0.0f;
  }
}

// Folds one range's (maximum, sum) into a running pair, as MlaCombineBlock
// and the in-block merge of MlaAttendBlock both do (in the same order of
// operations, so that the two give the same bits): the factors the running
// values and the range's are scaled by.
__device__ __forceinline__ void MergeFactors(float run_max, float max_z, float* a, float* b,
                                             float* m) {
  *m = max_z > run_max ? max_z : run_max;
  *a = expf(run_max - *m);
  *b = expf(max_z - *m);
}
__device__ __forceinline__ float Merged(float run, float a, float x, float b) {
  return __fadd_rn(__fmul_rn(run, a), __fmul_rn(x, b));
}

// After a range, thread h < heads: with a partial to write, head h's
// maximum and sum after its accumulator (part_of(h)[lat], [lat + 1]);
// merging in the block, head h's pair folded into the running one, the
// factors of the running values and the range's left in fa[h], fb[h].
template <typename PartOf>
__device__ __forceinline__ void PutRangeStats(int heads, int lat, const float* max_s,
                                              const float* sum, PartOf part_of) {
  if (static_cast<int>(threadIdx.x) < heads) {
    part_of(threadIdx.x)[lat] = max_s[threadIdx.x];
    part_of(threadIdx.x)[lat + 1] = sum[threadIdx.x];
  }
}
__device__ __forceinline__ void FoldRangeStats(int heads, const float* max_s, const float* sum,
                                               float* run_max, float* run_sum, float* fa,
                                               float* fb) {
  if (static_cast<int>(threadIdx.x) < heads) {
    const int h = threadIdx.x;
    float m;
    MergeFactors(run_max[h], max_s[h], &fa[h], &fb[h], &m);
    run_sum[h] = Merged(run_sum[h], fa[h], sum[h], fb[h]);
    run_max[h] = m;
  }
}

// Block (token t, heads [h0, h0 + kHeadsPerBlock)): the keys in ranges of
// split_len (0: one range), each range's chunks in order, an f32
// accumulator per head rescaled once a chunk (ChunkWeights); each thread
// owns latent values i = threadIdx.x + k * blockDim.x, k < E (ElemsFor),
// of every head. With `part`, the block takes range blockIdx.z alone and writes its partial to part[z][h][t]
// (MlaCombineBlock merges them); without, it takes every range in turn and
// merges each into a running result as MlaCombineBlock would, then writes
// the normalised values to o_lat. Either way a row's values depend only on
// its keys and split_len; one range is the plain one pass.
// qs: kHeadsPerBlock * width floats of the block's shared memory.
template <int E, typename Loc>
__device__ void MlaAttendBlock(const MlaShape& s, const float* q_abs, Loc loc, int n_tok,
                               float* o_lat, float* qs, float* part = nullptr,
                               int split_len = 0) {
  __shared__ float sc[kHeadsPerBlock * kChunk], w[kHeadsPerBlock * kChunk];
  __shared__ float scale[kHeadsPerBlock], max_s[kHeadsPerBlock], sum[kHeadsPerBlock];
  __shared__ float run_max[kHeadsPerBlock], run_sum[kHeadsPerBlock];
  __shared__ float fa[kHeadsPerBlock], fb[kHeadsPerBlock];
  const int t = blockIdx.x, h0 = blockIdx.y * kHeadsPerBlock;
  const int heads = s.n_head - h0 < kHeadsPerBlock ? s.n_head - h0 : kHeadsPerBlock;
  const int width = Width(s), lat = s.kv_lora_rank;
  const BlockKeys bk = KeysOf(loc, t, part, split_len);
  const SeqAt seq = bk.seq;
  const int n_ctx = bk.n_ctx, z_begin = bk.z_begin, z_end = bk.z_end;
  // Where head h's partial goes (with part).
  const auto part_of = [&](int h) { return PartOf(s, part, h0 + h, n_tok, t); };
  if (z_begin >= bk.n_ranges) {
    PutEmptyRange(heads, lat, part_of);
    return;
  }
  for (int x = threadIdx.x; x < heads * width; x += blockDim.x) {
    const int h = x / width, i = x % width;
    qs[x] = Half(q_abs[(static_cast<int64_t>(h0 + h) * n_tok + t) * width + i]);
  }
  if (threadIdx.x < kHeadsPerBlock) {
    run_max[threadIdx.x] = -INFINITY;
    run_sum[threadIdx.x] = 0.0f;
  }
  float run[E][kHeadsPerBlock];
#pragma unroll
  for (int k = 0; k < E; ++k) {
#pragma unroll
    for (int h = 0; h < kHeadsPerBlock; ++h) run[k][h] = 0.0f;
  }
  for (int z = z_begin; z < z_end; ++z) {
    const KeyRange keys = SplitRange(n_ctx, split_len, z);
    if (threadIdx.x < kHeadsPerBlock) {
      max_s[threadIdx.x] = -INFINITY;
      sum[threadIdx.x] = 0.0f;
    }
    float acc[E][kHeadsPerBlock];
#pragma unroll
    for (int k = 0; k < E; ++k) {
#pragma unroll
      for (int h = 0; h < kHeadsPerBlock; ++h) acc[k][h] = 0.0f;
    }
    __syncthreads();
    for (int j0 = keys.begin; j0 < keys.end; j0 += kChunk) {
      const int n = keys.end - j0 < kChunk ? keys.end - j0 : kChunk;
      const float* rows = seq.cache + static_cast<int64_t>(j0) * width;
      ScoreChunk(s, qs, heads, rows, n, sc);
      __syncthreads();
      ChunkWeights(heads, n, sc, w, scale, max_s, sum);
      __syncthreads();
      AccumulateChunk(s, heads, rows, n, w, scale, acc);
      __syncthreads();
    }
    if (part != nullptr) {
      PutRangeStats(heads, lat, max_s, sum, part_of);
      ForOwned<E>(lat, heads, [&](int k, int i, int h) { part_of(h)[i] = acc[k][h]; });
      return;
    }
    FoldRangeStats(heads, max_s, sum, run_max, run_sum, fa, fb);
    __syncthreads();
    ForOwned<E>(lat, heads,
             [&](int k, int, int h) { run[k][h] = Merged(run[k][h], fa[h], acc[k][h], fb[h]); });
  }
  ForOwned<E>(lat, heads, [&](int k, int i, int h) {
    const float inv = run_sum[h] == 0.0f ? 0.0f : 1.0f / run_sum[h];
    o_lat[(static_cast<int64_t>(h0 + h) * n_tok + t) * lat + i] = __fmul_rn(run[k][h], inv);
  });
}

// Block (token t, head h): the ranges' partials of MlaAttendBlock merged in
// order, as the block merges them itself without `part` (so a row's values
// do not depend on which of the two ran), and normalised. The partials of
// kMergeBatch ranges are loaded before any is merged (the loads do not
// wait on the merge before them).
constexpr int kMergeBatch = 8;
__device__ inline void MlaCombineBlock(const MlaShape& s, const float* part, int splits,
                                       int n_tok, float* o_lat) {
  const int t = blockIdx.x, h = blockIdx.y, lat = s.kv_lora_rank;
  const auto at = [&](int z) {
    return part + ((static_cast<int64_t>(z) * s.n_head + h) * n_tok + t) * PartFloats(s);
  };
  for (int i = threadIdx.x; i < lat; i += blockDim.x) {
    float run_max = -INFINITY, run_sum = 0.0f, run = 0.0f;
    bool done = false;
    for (int z0 = 0; z0 < splits && !done; z0 += kMergeBatch) {
      float max_z[kMergeBatch], sum_z[kMergeBatch], x_z[kMergeBatch];
#pragma unroll
      for (int u = 0; u < kMergeBatch; ++u) {
        max_z[u] = -INFINITY;  // past the last range: as an empty one
        sum_z[u] = 0.0f;
        x_z[u] = 0.0f;
        if (z0 + u < splits) {
          const float* p = at(z0 + u);
          max_z[u] = p[lat];
          sum_z[u] = p[lat + 1];
          x_z[u] = p[i];
        }
      }
#pragma unroll
      for (int u = 0; u < kMergeBatch; ++u) {
        if (sum_z[u] == 0.0f) {  // the empty ranges are the last
          done = true;
          break;
        }
        float a, b, m;
        MergeFactors(run_max, max_z[u], &a, &b, &m);
        run_sum = Merged(run_sum, a, sum_z[u], b);
        run = Merged(run, a, x_z[u], b);
        run_max = m;
      }
    }
    const float inv = run_sum == 0.0f ? 0.0f : 1.0f / run_sum;
    o_lat[(static_cast<int64_t>(h) * n_tok + t) * lat + i] = __fmul_rn(run, inv);
  }
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_MLA_DEVICE_H_
