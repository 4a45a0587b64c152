// The attention over the latent cache of mla_ops.h on the tensor cores
// (mma.sync m16n8k16, half inputs, f32 accumulation), as device code that
// mla_ops.cu launches and g++ runs through host_emulation.h
// (mla_attend_emulation_test): include host_emulation.h first there.
//
// Why it is exact enough: the queries and the cache rows are half values
// already (MlaPrepare and MlaAttendBlock round them), so the scores' products
// are exact and only their f32 sums are ordered differently from the f32
// kernel (mla_device.h). The softmax weights p (f32, at most 1) enter the
// weighted sum of latents as two halves, hi = half(p 2^14) and
// lo = half(p 2^14 - hi), the 2^14 keeping weights down to ~4e-9 clear of
// half's subnormals: ~22 bits of p, and the sum in f32. The result is the
// f32 kernel's to f32's rounding, not its bits.
//
// A block is (token t, 64 heads from blockIdx.y * 64, key range blockIdx.z
// or every range): where the f32 kernel reads each cache row once per 8
// heads, this one reads it once per 64, and its products run on the tensor
// cores. Per chunk of 64 keys: the rows into shared memory as halves; the
// scores of (heads x keys) as four m16 tiles by eight n8 tiles over the
// width, a warp two tiles; each head's chunk maximum, weights and sum (the
// f32 kernel's flash-attention rescaling, once a chunk); then a warp's
// latent columns (n8 tiles w, w + 16, ...) of every head accumulate
// (weights x rows) in registers. Ranges merge exactly as in the f32 kernel
// (MergeFactors / Merged; the in-block merge keeps its running values in
// o_lat), so a row gets the same bits split over blocks or merged in one.
#ifndef SLUICE_KERNELS_CUDA_MLA_MMA_DEVICE_H_
#define SLUICE_KERNELS_CUDA_MLA_MMA_DEVICE_H_

#include <cstdint>

#include "kernels/cuda/mla_device.h"
#include "kernels/cuda/mla_ops.h"
#include "kernels/cuda/mma_fragments.h"
#include "kernels/cuda/warp_reduce.h"

namespace sluice::cuda::internal {

constexpr int kMlaMmaHeads = 64;  // heads a block: four m16 tiles
constexpr int kMlaMmaKeys = 64;   // keys a chunk: eight n8 tiles
constexpr int kMlaMmaWarps = 16;
constexpr int kMlaMmaThreads = 32 * kMlaMmaWarps;
constexpr int kMlaMmaLatTiles = 4;  // n8 tiles of the latent a warp owns at most
constexpr int kMlaMmaMaxLat = 8 * kMlaMmaWarps * kMlaMmaLatTiles;  // 512
constexpr int kMlaMmaWeightWords = kMlaMmaKeys / 2 + 4;  // a head's weights (halves), padded
constexpr int kMlaMmaScoreStride = kMlaMmaKeys + 1;
constexpr float kMlaMmaWeightScale = 16384.0f;  // 2^14
static_assert(kMlaMmaWarps * 2 == (kMlaMmaHeads / 16) * (kMlaMmaKeys / 8), "two score tiles a warp");

// A row of halves in shared memory (queries, cache rows): width / 2 words
// and 4 of padding, so that a fragment's 8 rows x 4 words hit 32 banks.
__host__ __device__ inline int MlaMmaRowWords(int width) { return width / 2 + 4; }

// The block's shared memory: queries and a chunk's rows ([64][row words]
// each), the weights' two halves, the scores, seven per-head values.
inline int64_t MlaMmaSharedBytes(int width) {
  const int64_t words = 2 * int64_t{kMlaMmaHeads} * MlaMmaRowWords(width) +
                        2 * kMlaMmaHeads * kMlaMmaWeightWords +
                        kMlaMmaHeads * kMlaMmaScoreStride + 7 * kMlaMmaHeads;
  return words * 4;
}

// Heads a block for n_tok rows of s in `splits` key ranges: the fewest of
// 16, 32 and 64 whose blocks still fit in one wave of kMlaMmaOneWave (the
// H100's and H200's SMs, a block each: its shared memory allows no more).
// A short context's ranges are few, and then a block's chain of
// instructions, not memory, sets its time; past one wave the blocks run
// twice over and each cache row is read once per block's heads, which at
// a 16k context cost more than it gave (run 14). few_heads false: always 64.
constexpr int kMlaMmaFewHeads = 16;
constexpr int64_t kMlaMmaOneWave = 132;
inline int MlaMmaHeadsPerBlock(const MlaShape& s, int64_t n_tok, int splits, bool few_heads) {
  const int64_t groups = (s.n_head + kMlaMmaHeads - 1) / kMlaMmaHeads;
  int heads = kMlaMmaHeads;
  if (!few_heads) return heads;
  while (heads > kMlaMmaFewHeads &&
         n_tok * groups * splits * (kMlaMmaHeads / (heads / 2)) <= kMlaMmaOneWave) {
    heads /= 2;
  }
  return heads;
}

// Whether MlaMmaAttendBlock handles s: whole k16 steps over the width,
// whole n8 tiles of at most kMlaMmaMaxLat latent values.
inline bool MlaMmaShapeOk(const MlaShape& s) {
  return s.width() % 16 == 0 && s.kv_lora_rank % 8 == 0 && s.kv_lora_rank <= kMlaMmaMaxLat;
}

// The half bits of x, rounded to nearest even.
__device__ __forceinline__ uint32_t HalfBits(float x) {
#if defined(__CUDACC__)
  return __half_as_ushort(__float2half_rn(x));
#else
  return __float2half_rn(x).bits;
#endif
}
__device__ __forceinline__ uint32_t PackHalf2(float lo, float hi) {
  return HalfBits(lo) | (HalfBits(hi) << 16);
}

// The A fragment of 16 rows of `rows` (stride words a row) at word column c.
__device__ __forceinline__ void MlaAFragment(const uint32_t* rows, int stride, int c, int lane,
                                             uint32_t (&a)[4]) {
  const uint32_t* p = rows + (lane >> 2) * stride + c + (lane & 3);
  a[0] = p[0];
  a[1] = p[8 * stride];
  a[2] = p[4];
  a[3] = p[8 * stride + 4];
}

// Block (token t, heads [h0, h0 + 64), ranges as MlaAttendBlock): the same
// partials (with part) or normalised values (without) from the tensor
// cores. smem: MlaMmaSharedBytes(width) bytes.
// heads_per_block: 64, or 32 or 16 where a short context leaves too few
// blocks for the GPU (MlaMmaHeadsPerBlock): each head's products, weights and sums
// are the same operations either way, so its values are the same bits.
template <typename Loc>
__device__ void MlaMmaAttendBlock(const MlaShape& s, const float* q_abs, Loc loc, int n_tok,
                                  float* o_lat, uint32_t* smem, float* part, int split_len,
                                  int heads_per_block = kMlaMmaHeads) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int t = blockIdx.x, h0 = blockIdx.y * heads_per_block;
  const int heads = s.n_head - h0 < heads_per_block ? s.n_head - h0 : heads_per_block;
  const int m_tiles = (heads + 15) / 16, rows_used = 16 * m_tiles;
  const int width = Width(s), lat = s.kv_lora_rank, rw = MlaMmaRowWords(width);
  uint32_t* qs = smem;
  uint32_t* ks = qs + kMlaMmaHeads * rw;
  uint32_t* w_hi = ks + kMlaMmaKeys * rw;
  uint32_t* w_lo = w_hi + kMlaMmaHeads * kMlaMmaWeightWords;
  float* sc = reinterpret_cast<float*>(w_lo + kMlaMmaHeads * kMlaMmaWeightWords);
  float* max_s = sc + kMlaMmaHeads * kMlaMmaScoreStride;
  float* sum = max_s + kMlaMmaHeads;
  float* scale = sum + kMlaMmaHeads;
  float* run_max = scale + kMlaMmaHeads;
  float* run_sum = run_max + kMlaMmaHeads;
  float* fa = run_sum + kMlaMmaHeads;
  float* fb = fa + kMlaMmaHeads;
  const BlockKeys bk = KeysOf(loc, t, part, split_len);
  const SeqAt seq = bk.seq;
  const int n_ctx = bk.n_ctx, z_begin = bk.z_begin, z_end = bk.z_end;
  const auto part_of = [&](int h) { return PartOf(s, part, h0 + h, n_tok, t); };
  const auto out_of = [&](int h) {
    return o_lat + (static_cast<int64_t>(h0 + h) * n_tok + t) * lat;
  };
  if (z_begin >= bk.n_ranges) {
    PutEmptyRange(heads, lat, part_of);
    return;
  }
  // The queries as halves; the rows of an m tile past the last head are 0.
  const int half_width = width / 2;
  BatchedCopy<8>(
      rows_used * half_width,
      [&](int x) {
        const int h = x / half_width, i = x % half_width;
        if (h >= heads) return make_float2(0.0f, 0.0f);
        const float* q = q_abs + (static_cast<int64_t>(h0 + h) * n_tok + t) * width + 2 * i;
        return make_float2(q[0], q[1]);
      },
      [&](int x, float2 v) {
        const int h = x / half_width, i = x % half_width;
        qs[h * rw + i] = h < heads ? PackHalf2(v.x, v.y) : 0u;
      });
  if (threadIdx.x < kMlaMmaHeads) {
    run_max[threadIdx.x] = -INFINITY;
    run_sum[threadIdx.x] = 0.0f;
  }
  // The latent n8 tile of slot j of this warp (past lat: none).
  const auto lat_tile = [&](int j) { return warp + kMlaMmaWarps * j; };
  float acc[4][kMlaMmaLatTiles][4];
  // f(mt, j, i, head row, latent column) for each accumulator of a head.
  const auto for_acc = [&](auto f) {
#pragma unroll
    for (int j = 0; j < kMlaMmaLatTiles; ++j) {
      if (8 * lat_tile(j) >= lat) break;
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        if (mt >= m_tiles) break;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int row = mt * 16 + AccRow(lane, i);
          if (row < heads) f(mt, j, i, row, 8 * lat_tile(j) + AccCol(lane, i));
        }
      }
    }
  };
  for (int z = z_begin; z < z_end; ++z) {
    const KeyRange keys = SplitRange(n_ctx, split_len, z);
    if (threadIdx.x < kMlaMmaHeads) {
      max_s[threadIdx.x] = -INFINITY;
      sum[threadIdx.x] = 0.0f;
    }
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
      for (int j = 0; j < kMlaMmaLatTiles; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][j][i] = 0.0f;
      }
    }
    __syncthreads();
    for (int j0 = keys.begin; j0 < keys.end; j0 += kMlaMmaKeys) {
      const int n = keys.end - j0 < kMlaMmaKeys ? keys.end - j0 : kMlaMmaKeys;
      // The chunk's rows as halves (exact: they are half values); rows past
      // n are 0, so their products are 0 and their weights are 0.
      const float* rows = seq.cache + static_cast<int64_t>(j0) * width;
      const int quads = width / 4;
      BatchedCopy<3>(
          kMlaMmaKeys * quads,
          [&](int p) {
            const int r = p / quads, c = p % quads;
            if (r >= n) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            return *reinterpret_cast<const float4*>(rows + static_cast<int64_t>(r) * width + 4 * c);
          },
          [&](int p, float4 v) {
            const int r = p / quads, c = p % quads;
            uint32_t lo = 0, hi = 0;
            if (r < n) {
              lo = PackHalf2(v.x, v.y);
              hi = PackHalf2(v.z, v.w);
            }
            StoreWords2(ks + r * rw + 2 * c, lo, hi);
          });
      __syncthreads();
      // Scores: warp w, m tile w / 4, n tiles 2 (w % 4) and the next.
      {
        const int mt = warp >> 2, nt = 2 * (warp & 3);
        if (mt < m_tiles) {
          float d[2][4] = {};
          for (int c = 0; c < half_width; c += 8) {
            uint32_t a[4];
            MlaAFragment(qs + mt * 16 * rw, rw, c, lane, a);
#pragma unroll
            for (int u = 0; u < 2; ++u) {
              const uint32_t* p = ks + ((nt + u) * 8 + g) * rw + c + tq;
              const uint32_t b[2] = {p[0], p[4]};
              MmaF16(d[u], a, b);
            }
          }
#pragma unroll
          for (int u = 0; u < 2; ++u) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const int row = mt * 16 + AccRow(lane, i), key = (nt + u) * 8 + AccCol(lane, i);
              sc[row * kMlaMmaScoreStride + key] = key < n ? d[u][i] * s.kq_scale : -INFINITY;
            }
          }
        }
      }
      __syncthreads();
      // Weights: warp w takes heads w, w + 16, ...; a lane keys lane and
      // lane + 32.
      for (int h = warp; h < rows_used; h += kMlaMmaWarps) {
        const float x0 = sc[h * kMlaMmaScoreStride + lane];
        const float x1 = sc[h * kMlaMmaScoreStride + lane + 32];
        const float m_old = max_s[h];
        const float m = fmaxf(m_old, WarpMax(fmaxf(x0, x1)));
        const float p0 = lane < n ? expf(x0 - m) : 0.0f;
        const float p1 = lane + 32 < n ? expf(x1 - m) : 0.0f;
        // Each weight (times 2^14) as a half and the half of what is left.
        const auto split = [&](float p, int key) {
          const float x = __fmul_rn(p, kMlaMmaWeightScale);
          const uint32_t hi = HalfBits(x);
          const float rest = x - __half2float(__ushort_as_half(static_cast<unsigned short>(hi)));
          reinterpret_cast<uint16_t*>(w_hi + h * kMlaMmaWeightWords)[key] =
              static_cast<uint16_t>(hi);
          reinterpret_cast<uint16_t*>(w_lo + h * kMlaMmaWeightWords)[key] =
              static_cast<uint16_t>(HalfBits(rest));
        };
        split(p0, lane);
        split(p1, lane + 32);
        const float chunk_sum = WarpSum(p0 + p1);
        if (lane == 0) {
          const float a = expf(m_old - m);
          scale[h] = a;
          sum[h] = sum[h] * a + chunk_sum;
          max_s[h] = m;
        }
      }
      __syncthreads();
      // Values: (weights x rows) into the warp's latent tiles of every head.
      const auto* ks16 = reinterpret_cast<const uint16_t*>(ks);
#pragma unroll
      for (int j = 0; j < kMlaMmaLatTiles; ++j) {
        const int col = 8 * lat_tile(j) + g;
        if (8 * lat_tile(j) >= lat) break;
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          if (mt >= m_tiles) break;
          const float a0 = scale[mt * 16 + g], a1 = scale[mt * 16 + g + 8];
          acc[mt][j][0] *= a0;
          acc[mt][j][1] *= a0;
          acc[mt][j][2] *= a1;
          acc[mt][j][3] *= a1;
        }
        for (int kk = 0; kk < kMlaMmaKeys / 16; ++kk) {
          // B[key][col]: two keys' halves a register, rows 2tq, 2tq + 1
          // (and 8 on) of the k16 step.
          const int key = kk * 16 + 2 * tq;
          const auto v = [&](int r) {
            return static_cast<uint32_t>(ks16[static_cast<int64_t>(r) * 2 * rw + col]);
          };
          const uint32_t b[2] = {v(key) | (v(key + 1) << 16), v(key + 8) | (v(key + 9) << 16)};
#pragma unroll
          for (int mt = 0; mt < 4; ++mt) {
            if (mt >= m_tiles) break;
            uint32_t a_hi[4], a_lo[4];
            MlaAFragment(w_hi + mt * 16 * kMlaMmaWeightWords, kMlaMmaWeightWords, kk * 8, lane,
                         a_hi);
            MlaAFragment(w_lo + mt * 16 * kMlaMmaWeightWords, kMlaMmaWeightWords, kk * 8, lane,
                         a_lo);
            MmaF16(acc[mt][j], a_lo, b);
            MmaF16(acc[mt][j], a_hi, b);
          }
        }
      }
      __syncthreads();  // the rows and weights are read before the next chunk's
    }
    constexpr float kUnscale = 1.0f / kMlaMmaWeightScale;  // exact: a power of two
    if (part != nullptr) {
      PutRangeStats(heads, lat, max_s, sum, part_of);
      for_acc([&](int mt, int j, int i, int row, int col) {
        part_of(row)[col] = acc[mt][j][i] * kUnscale;
      });
      return;
    }
    FoldRangeStats(heads, max_s, sum, run_max, run_sum, fa, fb);
    __syncthreads();
    // The running values live in o_lat (each thread its own).
    for_acc([&](int mt, int j, int i, int row, int col) {
      float* o = out_of(row) + col;
      const float run = z == z_begin ? 0.0f : *o;
      *o = Merged(run, fa[row], acc[mt][j][i] * kUnscale, fb[row]);
    });
  }
  for_acc([&](int, int, int, int row, int col) {
    const float inv = run_sum[row] == 0.0f ? 0.0f : 1.0f / run_sum[row];
    float* o = out_of(row) + col;
    *o = __fmul_rn(*o, inv);
  });
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_MLA_MMA_DEVICE_H_
