// Device code of decode_ops.h. The products reuse the weight readers of
// quant_blocks_device.h (the batch kernels' decoders); what differs is the
// geometry: the input vector sits in shared memory (padded so the lanes of
// a quarter warp hit distinct banks for Q4_K/Q5_K rows), a lane group of L
// lanes owns kR rows of one or two matrices and loads all their chunks
// before using any, and one launch covers several matrices.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/decode_ops.h"
#include "kernels/cuda/quant_matmul_impl.h"

// A decode step streams more weight bytes than L2 holds (340 MB on bench35),
// so kept in L2 the usual way they push out what the next kernels reuse: the
// activations and the kernels' own code. The decode kernels therefore load
// weights as streaming (evict first): on the H200 bench35 decodes 894-913
// tok/s so against 715-746 without (2026-12-02, docs/STATUS.md), with the same
// bits. SLUICE_CUDA_STREAM_WEIGHTS=0 (read at PrepareDecodeKernels) turns it
// off for A/B runs.
namespace sluice::cuda {
__constant__ int c_stream_weights;
// Funnel loads (on; SLUICE_CUDA_FUNNEL_LOADS=0, read at PrepareDecodeKernels,
// turns them off): weight words at addresses not 16-byte aligned (Q6_K's
// 210-byte and Q8_0's 34-byte blocks) are read as aligned words shifted into
// place, one code path for the whole warp (quant_blocks_device.h LoadWords).
// Same bits; on the H200 the Q6_K down product took 26.0 us against 30.0 and
// bench35 decoded 1,224-1,286 tok/s against 1,161-1,258 (2026-12-03).
__constant__ int c_funnel_loads;
// Whether the decode kernels run as programmatic dependent launches (g_pdl
// below): only then do they ask L2 for weight rows before the wait (without
// them there is nothing to overlap, and the down products' table reads
// would only delay the launch).
__constant__ int c_pdl;
}  // namespace sluice::cuda
#define SLUICE_WEIGHT_LOAD(p) (::sluice::cuda::c_stream_weights ? __ldcs(p) : __ldg(p))
#define SLUICE_FUNNEL_LOADS (::sluice::cuda::c_funnel_loads != 0)

#include "kernels/cuda/decode_q8.h"
#include "kernels/cuda/delta_device.h"
#include "kernels/cuda/fast_div.h"
#include "kernels/cuda/quant_blocks_device.h"
#include "kernels/cuda/topk_device.h"
#include "kernels/cuda/warp_reduce.h"

namespace sluice::cuda {
namespace {

using namespace internal;  // the weight readers

constexpr int kMaxDynamicSmem = 200 * 1024;
constexpr int kProjThreads = 128;  // 4 warps
constexpr int kR = 2;              // rows per lane group (projections)
constexpr int kDownR = 8;          // rows per lane group (down products), at most
constexpr int kMaxDownItems = 12;  // warps of a down block: routed + shared experts

// Programmatic dependent launch (sm_90). The decode kernels are launched so
// that the next kernel of the stream may start before this one ends
// (Launch below): each kernel first does what depends on no earlier kernel
// (asking for weight bytes that never change), then waits at AwaitPrevious
// until the kernel before it has finished and its writes are visible, and
// then lets the kernel after it start (ReleaseNext). Every read of an
// activation, a routing result, a counter or a cache and every write comes
// after the wait, so at most two kernels overlap and the second only reads
// weights meanwhile. Launched without the attribute, both are no-ops.
__device__ __forceinline__ void AwaitPrevious() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void ReleaseNext() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void AwaitPreviousReleaseNext() {
  AwaitPrevious();
  ReleaseNext();
}

// Asks L2 for the lines of bytes [p, p + n), the whole block sharing the
// work (a kernel's weight rows, before it waits for its predecessor).
__device__ __forceinline__ void PrefetchL2(const void* p, int64_t n) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{127};
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  for (uintptr_t a = begin + 128 * threadIdx.x; a < end; a += 128 * blockDim.x) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
  }
}

// GGUF type ids the readers handle.
enum : int { kF32 = 0, kF16 = 1, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kBF16 = 30, kQ1_0 = 41 };

template <class T>
struct Tag {
  using type = T;
};

template <class Fn>
__device__ __forceinline__ void WithType(int type, Fn&& fn) {
  switch (type) {
    case kF32: fn(Tag<F32Weights>{}); break;
    case kF16: fn(Tag<HalfWeights<false>>{}); break;
    case kBF16: fn(Tag<HalfWeights<true>>{}); break;
    case kQ8_0: fn(Tag<Q8_0Weights>{}); break;
    case kQ1_0: fn(Tag<Q1_0Weights>{}); break;
    case kQ4_K: fn(Tag<KWeights<false>>{}); break;
    case kQ5_K: fn(Tag<KWeights<true>>{}); break;
    case kQ6_K: fn(Tag<Q6KWeights>{}); break;
    default: break;
  }
}

template <class T> __device__ constexpr int TypeOf();
template <> __device__ constexpr int TypeOf<F32Weights>() { return kF32; }
template <> __device__ constexpr int TypeOf<HalfWeights<false>>() { return kF16; }
template <> __device__ constexpr int TypeOf<HalfWeights<true>>() { return kBF16; }
template <> __device__ constexpr int TypeOf<Q8_0Weights>() { return kQ8_0; }
template <> __device__ constexpr int TypeOf<Q1_0Weights>() { return kQ1_0; }
template <> __device__ constexpr int TypeOf<KWeights<false>>() { return kQ4_K; }
template <> __device__ constexpr int TypeOf<KWeights<true>>() { return kQ5_K; }
template <> __device__ constexpr int TypeOf<Q6KWeights>() { return kQ6_K; }

// Bytes of a row of `cols` elements (host and device).
__host__ __device__ inline uint64_t RowBytesOf(int type, int64_t cols) {
  switch (type) {
    case kF32: return cols * 4;
    case kF16:
    case kBF16: return cols * 2;
    case kQ8_0: return cols / 32 * 34;
    case kQ1_0: return cols / 128 * 18;
    case kQ4_K: return cols / 256 * 144;
    case kQ5_K: return cols / 256 * 176;
    case kQ6_K: return cols / 256 * 210;
    default: return 0;
  }
}

__host__ __device__ inline int ChunkOf(int type) { return type == kF32 ? 16 : 32; }

// Lanes sharing one row: short rows keep every lane busy.
__host__ __device__ inline int LanesFor(int64_t cols, int type) {
  const int64_t chunks = cols / ChunkOf(type);
  return chunks >= 32 ? 32 : (chunks >= 16 ? 16 : 8);
}

// Rows of one DecodeProjectKernel block (or streamed tile): kProjThreads /
// 32 warps, each 32 / lanes lane groups of r rows.
__host__ __device__ inline int64_t ProjectRowsPerBlock(int lanes, int r = kR) {
  return (kProjThreads / 32) * (32 / lanes) * r;
}

// Shared-memory index of element i: 4 floats of padding per 64 elements
// (a float4 group never straddles a 64-element boundary).
__device__ __forceinline__ int Pad(int64_t i) { return static_cast<int>(i + ((i >> 6) << 2)); }
__host__ __device__ inline int64_t PaddedFloats(int64_t n) { return n + ((n + 63) / 64) * 4; }


__device__ __forceinline__ float Dot4(float4 w, float4 x, float acc) {
  acc = fmaf(w.x, x.x, acc);
  acc = fmaf(w.y, x.y, acc);
  acc = fmaf(w.z, x.z, acc);
  return fmaf(w.w, x.w, acc);
}

// acc[m][r] += rows rp[m][r] . xs over `cols` columns, this lane's chunks
// (sub, sub + L, ...). NM matrices of one type, R rows each; every load of
// two rounds of chunks is issued before the first is used.
template <class T, int NM, int R, class M = GlobalMem>
__device__ __forceinline__ void DotRows(const uint8_t* const (&rp)[NM][R], int64_t cols,
                                        const float* xs, int sub, int L, float (&acc)[NM][R]) {
  constexpr int kU = sizeof(typename T::Raw) * NM * R <= 160 ? 2 : 1;
  const int64_t n_chunks = cols / T::kChunk;
#pragma unroll 1
  for (int64_t c0 = sub; c0 < n_chunks; c0 += kU * L) {
    typename T::Raw raw[kU][NM][R];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      if (c0 + u * L < n_chunks) {
#pragma unroll
        for (int m = 0; m < NM; ++m) {
#pragma unroll
          for (int r = 0; r < R; ++r) T::template Load<M>(rp[m][r], c0 + u * L, raw[u][m][r]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t c = c0 + u * L;
      if (c >= n_chunks) break;
#pragma unroll
      for (int gi = 0; gi < T::kChunk / 4; ++gi) {
        const float4 xv = *reinterpret_cast<const float4*>(xs + Pad(T::Col(c, gi)));
#pragma unroll
        for (int m = 0; m < NM; ++m) {
#pragma unroll
          for (int r = 0; r < R; ++r) acc[m][r] = Dot4(T::Decode(raw[u][m][r], gi), xv, acc[m][r]);
        }
      }
    }
  }
  if constexpr (T::kPlain) {
    for (int64_t c = n_chunks * T::kChunk + sub; c < cols; c += L) {
      const float xv = xs[Pad(c)];
#pragma unroll
      for (int m = 0; m < NM; ++m) {
#pragma unroll
        for (int r = 0; r < R; ++r) acc[m][r] = fmaf(T::template Elem<M>(rp[m][r], c), xv, acc[m][r]);
      }
    }
  }
}

// DotRows against the 8-bit vector (decode_q8.h): one chunk per step, its
// NM x R raw blocks loaded before any is used, the chunk's part of the
// vector read once for all of them. The loop is not unrolled: a decode
// block runs its code once or twice, so the code's length, not its
// arithmetic, is what an unrolled body costs (instruction fetch was a third
// of the float path's stalls under ncu). Measured on the H200: two chunk
// steps per round made bench35's products 10-60% slower (2026-12-02).
template <class T, int NM, int R, class M = GlobalMem>
__device__ __forceinline__ void DotRowsQ8(const uint8_t* const (&rp)[NM][R], int64_t cols,
                                          const Q8Vector& xv, int sub, int L,
                                          float (&acc)[NM][R]) {
  const int n_chunks = static_cast<int>(cols / T::kChunk);
#pragma unroll 1
  for (int c = sub; c < n_chunks; c += L) {
    typename T::Raw raw[NM][R];
#pragma unroll
    for (int m = 0; m < NM; ++m) {
#pragma unroll
      for (int r = 0; r < R; ++r) T::template Load<M>(rp[m][r], c, raw[m][r]);
    }
    typename Q8Dot<T>::X x;
    Q8Dot<T>::Load(xv, c, x);
#pragma unroll
    for (int m = 0; m < NM; ++m) {
#pragma unroll
      for (int r = 0; r < R; ++r) acc[m][r] += Q8Dot<T>::Dot(raw[m][r], x);
    }
  }
}

// Rows row0.. of one matrix (or a pair) of type T against xs: the R sums
// per matrix, complete in every lane of the group.
template <class T, int NM, int R, class M = GlobalMem>
__device__ __forceinline__ void RowSumsT(const uint8_t* const (&base)[NM], int64_t rows,
                                         int64_t row0, int64_t cols, const float* xs,
                                         const Q8Input& xv, int sub, int L,
                                         float (&acc)[NM][R]) {
  const uint64_t rb = RowBytesOf(TypeOf<T>(), cols);
  const uint8_t* rp[NM][R];
#pragma unroll
  for (int m = 0; m < NM; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      // Rows past the end re-read the last row (never stored), so no lane
      // leaves the shuffles.
      const int64_t row = row0 + r < rows ? row0 + r : rows - 1;
      rp[m][r] = base[m] + row * rb;
      acc[m][r] = 0.0f;
    }
  }
  if constexpr (kHasQ8Dot<T>) {
    const Q8Vector v = Q8For<T>(xv);
    if (v.q != nullptr) {
      DotRowsQ8<T, NM, R, M>(rp, cols, v, sub, L, acc);
    } else {
      DotRows<T, NM, R, M>(rp, cols, xs, sub, L, acc);
    }
  } else {
    DotRows<T, NM, R, M>(rp, cols, xs, sub, L, acc);
  }
#pragma unroll
  for (int m = 0; m < NM; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = GroupSum(acc[m][r], L);
  }
}

// The same for a type known at run time. The switch sits outside any loop:
// inside one, the readers of every type inlined together need more
// registers than a kernel may use, and spill.
template <int NM, int R>
__device__ __forceinline__ void RowSums(int type, const uint8_t* const (&base)[NM], int64_t rows,
                                        int64_t row0, int64_t cols, const float* xs,
                                        const Q8Input& xv, int sub, int L,
                                        float (&acc)[NM][R]) {
  WithType(type, [&](auto tag) {
    RowSumsT<typename decltype(tag)::type, NM, R>(base, rows, row0, cols, xs, xv, sub, L, acc);
  });
}

// Loads per thread issued together: a prologue of one L2 round trip per
// batch, not one per element (a decode launch's blocks each read the whole
// input vector; waiting for it element by element dominated their time).
constexpr int kBatch = 8;

// Fills xs (padded) with the projection's input vector. Precondition: n is
// a multiple of 4 and the vectors are 16-byte aligned.
__device__ void LoadInput(const DecodeInput& in, float* xs, double* scratch) {
  const int64_t n4 = in.n / 4;
  const float4* x4 = reinterpret_cast<const float4*>(in.x);
  const float4* a4 = reinterpret_cast<const float4*>(in.add);
  double sum = 0.0;
  for (int64_t base = threadIdx.x; base < n4; base += kBatch * blockDim.x) {
    float4 v[kBatch], a[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t i = base + u * blockDim.x;
      if (i < n4) {
        v[u] = x4[i];
        a[u] = a4 != nullptr ? a4[i] : make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t i = base + u * blockDim.x;
      if (i < n4) {
        float4 t = v[u];
        if (a4 != nullptr) t = make_float4(t.x + a[u].x, t.y + a[u].y, t.z + a[u].z, t.w + a[u].w);
        *reinterpret_cast<float4*>(xs + Pad(4 * i)) = t;
        sum += static_cast<double>(t.x) * t.x;
        sum += static_cast<double>(t.y) * t.y;
        sum += static_cast<double>(t.z) * t.z;
        sum += static_cast<double>(t.w) * t.w;
      }
    }
  }
  if (in.norm_w == nullptr) {
    __syncthreads();
    return;
  }
  sum = BlockSum(sum, scratch);
  const float mean = static_cast<float>(sum / static_cast<double>(in.n));
  const float scale = 1.0f / sqrtf(mean + in.eps);
  const bool first = blockIdx.x == 0;
  const float4* w4 = reinterpret_cast<const float4*>(in.norm_w);
  for (int64_t base = threadIdx.x; base < n4; base += kBatch * blockDim.x) {
    float4 w[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t i = base + u * blockDim.x;
      if (i < n4) w[u] = w4[i];
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t i = base + u * blockDim.x;
      if (i >= n4) continue;
      float4* slot = reinterpret_cast<float4*>(xs + Pad(4 * i));
      const float4 v = *slot;
      const float4 y = make_float4((v.x * scale) * w[u].x, (v.y * scale) * w[u].y,
                                   (v.z * scale) * w[u].z, (v.w * scale) * w[u].w);
      *slot = y;
      if (first) {
        if (in.x_out != nullptr) reinterpret_cast<float4*>(in.x_out)[i] = v;
        if (in.xn_out != nullptr) reinterpret_cast<float4*>(in.xn_out)[i] = y;
      }
    }
  }
  __syncthreads();
}

// `rows` rows of n floats (contiguous; n a multiple of 4) into padded
// shared rows of `stride`, kBatch loads per thread in flight.
__device__ void LoadRows(const float* src, int rows, int64_t n, float* dst, int64_t stride) {
  const RowIndex index(rows, static_cast<int>(n / 4));
  const int n4 = index.per_row, total = rows * n4;
  const float4* s4 = reinterpret_cast<const float4*>(src);
  for (int base = threadIdx.x; base < total; base += kBatch * blockDim.x) {
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * blockDim.x;
      if (i < total) v[u] = s4[i];
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * blockDim.x;
      if (i < total) {
        const int row = index.Row(i);
        *reinterpret_cast<float4*>(dst + row * stride + Pad(4 * (i - row * n4))) = v[u];
      }
    }
  }
}

// The 8-bit vectors a launch's products read (decode_q8.h), as bits.
enum : int { kFormatQ8K = 1, kFormatQ8Z = 2 };

// Bytes of one row's 8-bit vectors of n elements in formats f (a multiple
// of 16).
__host__ __device__ inline int64_t Q8Bytes(int f, int64_t n) {
  return ((f & kFormatQ8K) ? Q8KBytes(n) : 0) + ((f & kFormatQ8Z) ? Q8ZBytes(n) : 0);
}
// Floats before the 8-bit vectors when `floats` come first (16-byte aligned).
__host__ __device__ inline int64_t Q8Offset(int64_t floats) { return (floats + 3) / 4 * 4; }

// Where the Q8_0 vectors of `rows` rows start at q8 (after the Q8_K ones).
__device__ __forceinline__ uint8_t* Q8ZBase(uint8_t* q8, int rows, int64_t n, int f) {
  return q8 + ((f & kFormatQ8K) ? rows * Q8KBytes(n) : 0);
}

// Quantizes `rows` padded shared rows of n floats (row stride `stride`)
// into the formats f at q8, every thread of the block taking part; the
// caller synchronizes after.
__device__ void QuantizeRows(const float* xs, int rows, int64_t n, int64_t stride, uint8_t* q8,
                             int f) {
  QuantizeBlockQ8([&](int r, int64_t e) { return xs[r * stride + Pad(e)]; }, rows, n,
                  (f & kFormatQ8K) ? q8 : nullptr,
                  (f & kFormatQ8Z) ? Q8ZBase(q8, rows, n, f) : nullptr);
}

// Row `row`'s 8-bit vectors at q8 (null q8 or format: none).
__device__ __forceinline__ Q8Input Q8InputAt(uint8_t* q8, int rows, int row, int64_t n, int f) {
  Q8Input in{nullptr, nullptr, n};
  if (q8 == nullptr) return in;
  if (f & kFormatQ8K) in.k = q8 + row * Q8KBytes(n);
  if (f & kFormatQ8Z) in.z = Q8ZBase(q8, rows, n, f) + row * Q8ZBytes(n);
  return in;
}

struct ProjectLaunch {
  DecodeProjection p;
  int block_start[kMaxDecodeMatrices + 1];  // row blocks, prefix sums
  int lanes;
  int q8;  // the 8-bit vectors the products read (kFormatQ8K | kFormatQ8Z; 0: none)
  // Whether p.in.prepared holds every format of q8 (the blocks then read it
  // and quantize nothing), and which matrices (bit i) read the float
  // vector all the same (types without an 8-bit product).
  int prepared;
  unsigned float_mask;
};

// The 8-bit input of a launch whose vector was prepared in device memory.
__device__ __forceinline__ Q8Input PreparedInput(const DecodeQ8& v, int rows, int row, int64_t n) {
  return Q8InputAt(const_cast<uint8_t*>(v.q8), rows, row, n, v.formats);
}

// One row block (kProjThreads / 32 warps x 32 / L groups x kR rows) of
// matrix m, of type T.
template <class T, int R>
__device__ __forceinline__ void ProjectRows(const DecodeMatrix& m, int64_t cols, int L,
                                            int64_t rb, const float* xs, const Q8Input& xv) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int groups = 32 / L, sub = lane & (L - 1);
  const int64_t warp_row0 = (rb * (kProjThreads / 32) + warp) * groups * R;
  if (warp_row0 >= m.rows) return;
  const int64_t row0 = warp_row0 + (lane / L) * R;
  const uint8_t* w = static_cast<const uint8_t*>(m.w);
  if (m.up != nullptr) {
    const uint8_t* base[2] = {w, static_cast<const uint8_t*>(m.up)};
    float acc[2][R];
    RowSumsT<T, 2, R>(base, m.rows, row0, cols, xs, xv, sub, L, acc);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (sub == r % L && row0 + r < m.rows) m.y[row0 + r] = SiluF(acc[0][r]) * acc[1][r];
    }
  } else {
    const uint8_t* base[1] = {w};
    float acc[1][R];
    RowSumsT<T, 1, R>(base, m.rows, row0, cols, xs, xv, sub, L, acc);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (sub == r % L && row0 + r < m.rows) m.y[row0 + r] = acc[0][r];
    }
  }
}

// Whether this block is the last to finish a launch's counted work: each
// block adds its `units` (after a barrier that follows its stores) and the
// one whose add brings *counter to `total` is the last (the router: one
// unit a block). The count is one acquire-release add at device scope by
// thread 0: it releases the block's stores and acquires every earlier
// block's, and the barrier after it passes that on to the block's threads,
// in place of a __threadfence on either side of a plain add.
__device__ __forceinline__ bool LastToFinish(int32_t* counter, int units, int total, int* last) {
  if (threadIdx.x == 0) {
    int32_t old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;"
                 : "=r"(old)
                 : "l"(counter), "r"(units)
                 : "memory");
    *last = old + units == total;
  }
  __syncthreads();
  return *last != 0;
}

// The router's epilogue (every thread of the block calls it after a
// barrier that follows the block's router rows): the last router block's first warp
// routes the token and resets the counter for the next launch. (A
// block-wide version that ranked every expert against all the others
// instead of k arg-max rounds made bench35's route launch take 30 us
// against 20 on the H200, 2026-12-03: dropped.)
__device__ void RouteIfLast(const DecodeProjection& p, int router_blocks, float* probs,
                            int* last) {
  if (!LastToFinish(p.topk.counter, 1, router_blocks, last)) return;
  if (threadIdx.x < 32) {
    RouteOneToken(p.m[0].y, static_cast<int>(p.m[0].rows), p.topk.k, p.topk.ids, p.topk.weights,
                  p.topk.paired_ids, probs);
  }
  if (threadIdx.x == 0) *p.topk.counter = 0;
}

// One row block per block (the input is loaded, normed and quantized once
// per block). The block that completes the router's last row block routes
// the token. On the H200 that prologue is what bounds the launch: bench35's
// DeltaNet projection takes 24.7 us so, 13.7 us reading an 8-bit vector
// prepared once (2026-12-02, docs/STATUS.md). Asking L2 for the block's
// rows before the prologue did not change decode tok/s there.
//
// R: rows per lane group. A row's sum does not depend on it (the same lanes
// sum the same chunks in the same order), so R = 1, twice the blocks, gives
// the same bits to a launch of too few row blocks to fill the GPU.
template <int R>
__global__ void __launch_bounds__(kProjThreads, 4) DecodeProjectKernel(const ProjectLaunch a) {
  __shared__ double scratch[32];
  __shared__ int last;
  extern __shared__ float xs[];
  const DecodeProjection& p = a.p;
  const int b = blockIdx.x;
  int mi = 0;
  while (mi + 1 < p.n_matrices && b >= a.block_start[mi + 1]) ++mi;
  const DecodeMatrix& m = p.m[mi];
  if (c_pdl != 0) {  // the block's rows, which no earlier kernel writes
    const int64_t per_block = ProjectRowsPerBlock(a.lanes, R);
    const int64_t r0 = (b - a.block_start[mi]) * per_block;
    const int64_t nr = m.rows - r0 < per_block ? m.rows - r0 : per_block;
    const int64_t rb = RowBytesOf(m.type, p.in.n);
    PrefetchL2(static_cast<const uint8_t*>(m.w) + r0 * rb, nr * rb);
    if (m.up != nullptr) PrefetchL2(static_cast<const uint8_t*>(m.up) + r0 * rb, nr * rb);
  }
  AwaitPreviousReleaseNext();
  const bool floats = (a.float_mask >> mi) & 1u;  // this block's product reads xs
  Q8Input xv;
  if (a.prepared) {
    if (floats) LoadInput(p.in, xs, scratch);
    xv = PreparedInput(p.in.prepared, 1, 0, p.in.n);
  } else {
    LoadInput(p.in, xs, scratch);
    // Past the input vector and the router's probabilities; blocks whose
    // product reads floats (the F32 router's) quantize nothing.
    uint8_t* q8 = nullptr;
    if (a.q8 != 0 && !floats) {
      q8 = reinterpret_cast<uint8_t*>(
          xs + Q8Offset(PaddedFloats(p.in.n) + (p.topk.k > 0 ? p.m[0].rows : 0)));
      QuantizeRows(xs, 1, p.in.n, 0, q8, a.q8);
      __syncthreads();
    }
    xv = Q8InputAt(q8, 1, 0, p.in.n, a.q8);
  }
  WithType(m.type, [&](auto tag) {
    ProjectRows<typename decltype(tag)::type, R>(m, p.in.n, a.lanes, b - a.block_start[mi], xs,
                                                 xv);
  });
  if (mi != 0 || p.topk.k == 0) return;
  __syncthreads();  // the block's logits are stored
  RouteIfLast(p, a.block_start[1], xs + PaddedFloats(p.in.n), &last);
}

// ---- products streamed through shared memory --------------------------------
//
// The same products as DecodeProjectKernel and GateUpKernel, bit for bit
// (each row is summed by the same lanes in the same order), by at most two
// blocks per SM that each stride over row blocks ("tiles"). A block asks
// for its next kStages - 1 tiles' weight bytes with cp.async before it loads, norms
// and quantizes the input, so the HBM reads overlap that prologue and each
// other; DecodeProjectKernel's blocks each pay the prologue before their
// rows' round trip, in several waves. On the H200 (bench35 q4_k_m, all
// resident, 2026-12-02, docs/STATUS.md) decode ran 1,018.6-1,082.7 tok/s
// so against 957.5-997.3 with SLUICE_CUDA_STREAM_PROJECT=0; alone, the
// routed gate/up took 17.0 us against 21.8, the DeltaNet input projection
// 26.1 against 29.7. Three blocks per SM were no faster end to end.

constexpr int kStreamBlocksPerSm = 2;
constexpr int64_t kStreamSmemPerBlock = 110 * 1024;

__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// 16 bytes from global src to shared dst, asynchronously (weights read once:
// evict first in L2, as the other decode kernels load them).
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, uint64_t policy) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(d), "l"(src),
               "l"(policy)
               : "memory");
}
__device__ __forceinline__ void CommitAsync() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void WaitAsync() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Where a streamed launch's stages start and how large each is.
struct StreamStages {
  int64_t vec_bytes;    // shared bytes before the stages: input, probabilities, 8-bit vectors
  int64_t stage_bytes;  // one stage: the largest tile, a multiple of 16
  int rows_per_tile;
  int grid;  // blocks at most (host side: the plan's blocks per SM)
};

struct StreamLaunch {
  ProjectLaunch a;
  StreamStages st;
};

// The routed experts' gate/up, streamed: tile t is row block t % row_blocks
// of slot t / row_blocks's gate and up rows (one type).
struct StreamExperts {
  DecodeExperts e;
  StreamStages st;
  int row_blocks, lanes, q8;
  FastDiv by_row_blocks;
  int prepared;  // e.xn_q8 holds q8's formats and gate and up read it
  // e.h_q8's formats when this launch quantizes the down launch's rows as
  // it completes them (DecodeExpertsGateUpQuantizes); 0: it does not.
  int quantize_down;
};

// One tile: rows [0, nr) of its matrix (and of up, for a pair) from w
// (row_bytes each), summed into y[0, nr).
struct TileRef {
  const uint8_t* w;
  const uint8_t* up;
  int64_t row_bytes;
  int nr, type;
  float* y;
  // The tile's own 8-bit input (StreamGroupedQ8's rows); n = 0: the
  // prologue's.
  Q8Input in = {nullptr, nullptr, 0};
  // An entries launch's tile: its round's first entry and its group's end.
  int64_t e0 = 0, end = 0;
};

__device__ __forceinline__ TileRef ProjectTile(const StreamLaunch& s, int t) {
  const ProjectLaunch& a = s.a;
  int mi = 0;
  while (mi + 1 < a.p.n_matrices && t >= a.block_start[mi + 1]) ++mi;
  const DecodeMatrix& m = a.p.m[mi];
  const int64_t rb = RowBytesOf(m.type, a.p.in.n);
  const int64_t r0 = static_cast<int64_t>(t - a.block_start[mi]) * s.st.rows_per_tile;
  const int64_t nr = m.rows - r0 < s.st.rows_per_tile ? m.rows - r0 : s.st.rows_per_tile;
  return {static_cast<const uint8_t*>(m.w) + r0 * rb,
          m.up != nullptr ? static_cast<const uint8_t*>(m.up) + r0 * rb : nullptr,
          rb, static_cast<int>(nr), m.type, m.y + r0};
}

// Tile t's slot and its rows [r0, r0 + nr) of ff.
struct SlotRows {
  int j;
  int64_t r0;
  int nr;
};

__device__ __forceinline__ SlotRows SlotRowsOf(const StreamExperts& s, int t) {
  const int64_t r0 = static_cast<int64_t>(s.by_row_blocks.Mod(t)) * s.st.rows_per_tile;
  const int64_t ff = s.e.ff;
  return {static_cast<int>(s.by_row_blocks.Div(t)), r0,
          static_cast<int>(ff - r0 < s.st.rows_per_tile ? ff - r0 : s.st.rows_per_tile)};
}

__device__ __forceinline__ TileRef ExpertTile(const StreamExperts& s, int t) {
  const DecodeExperts& e = s.e;
  const SlotRows x = SlotRowsOf(s, t);
  const int64_t rb = RowBytesOf(e.gate_type, e.n_embd);
  const int32_t id = e.ids[x.j];
  return {static_cast<const uint8_t*>(e.gate[id]) + x.r0 * rb,
          static_cast<const uint8_t*>(e.up[id]) + x.r0 * rb, rb, x.nr, e.gate_type,
          e.h + x.j * e.ff + x.r0};
}

// Rows of one tile (in shared memory at w, and up for a pair) of type T
// against the 8-bit vector xv, into y[0, nr) (the lanes and order of
// RowSumsT's 8-bit path, so the bits of the unstreamed kernels). Not
// RowSumsT itself: its float path, compiled beside the 8-bit one inside
// the tile loop, made ptxas spill (up to 512 bytes a type).
template <class T>
__device__ __forceinline__ void StreamRows(float* y, int64_t cols, int L, int nr,
                                           const uint8_t* w, const uint8_t* up,
                                           const Q8Vector& xv) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int groups = 32 / L, sub = lane & (L - 1);
  const int warp_row0 = warp * groups * kR;
  if (warp_row0 >= nr) return;
  const int row0 = warp_row0 + (lane / L) * kR;
  const int64_t rb = RowBytesOf(TypeOf<T>(), cols);
  auto rows = [&](auto pair) {
    constexpr int NM = decltype(pair)::value ? 2 : 1;
    const uint8_t* rp[NM][kR];
    float acc[NM][kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      // Rows past the tile re-read its last row (never stored), so no lane
      // leaves the shuffles.
      const int row = row0 + r < nr ? row0 + r : nr - 1;
      rp[0][r] = w + row * rb;
      if constexpr (NM == 2) rp[1][r] = up + row * rb;
#pragma unroll
      for (int m = 0; m < NM; ++m) acc[m][r] = 0.0f;
    }
    // Q4_K/Q5_K blocks (144 and 176 bytes) and their fields sit at 16-byte
    // offsets of the stage: their loads skip the alignment test.
    using M = std::conditional_t<std::is_same_v<T, KWeights<false>> ||
                                     std::is_same_v<T, KWeights<true>>,
                                 SharedAligned16, SharedMem>;
    DotRowsQ8<T, NM, kR, M>(rp, cols, xv, sub, L, acc);
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      float v = GroupSum(acc[0][r], L);
      if constexpr (NM == 2) v = SiluF(v) * GroupSum(acc[1][r], L);
      if (sub == r % L && row0 + r < nr) y[row0 + r] = v;
    }
  };
  if (up != nullptr) {
    rows(std::true_type{});
  } else {
    rows(std::false_type{});
  }
}

// WithType over the types that have an 8-bit product (the streamed ones).
template <class Fn>
__device__ __forceinline__ void WithQ8Type(int type, Fn&& fn) {
  switch (type) {
    case kQ8_0: fn(Tag<Q8_0Weights>{}); break;
    case kQ1_0: fn(Tag<Q1_0Weights>{}); break;
    case kQ4_K: fn(Tag<KWeights<false>>{}); break;
    case kQ5_K: fn(Tag<KWeights<true>>{}); break;
    case kQ6_K: fn(Tag<Q6KWeights>{}); break;
    default: break;
  }
}

// `bytes` (a multiple of 16) from src to the stage dst by the whole block:
// asynchronously from a 16-byte aligned src, else (a file whose tensors are
// aligned to less than 16) by plain 2-byte loads and stores, which the
// caller's barrier before use covers as well.
__device__ __forceinline__ void CopyTile(uint8_t* dst, const uint8_t* src, int64_t bytes,
                                         uint64_t policy) {
  if ((reinterpret_cast<uintptr_t>(src) & 15) == 0) {
    for (int64_t off = 16 * threadIdx.x; off < bytes; off += 16 * blockDim.x) {
      CopyAsync16(dst + off, src + off, policy);
    }
    return;
  }
  for (int64_t off = 2 * threadIdx.x; off < bytes; off += 2 * blockDim.x) {
    *reinterpret_cast<uint16_t*>(dst + off) = *reinterpret_cast<const uint16_t*>(src + off);
  }
}

// A staged tile's rows against one 8-bit vector: the tile's own (r.in) or
// the prologue's (xv). The body of StreamTiles's rounds unless it is given
// another.
struct SumOneVector {
  __device__ __forceinline__ void operator()(int, const TileRef& r, int64_t cols, int L,
                                             const uint8_t* w, const uint8_t* up,
                                             const Q8Input& xv) const {
    WithQ8Type(r.type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      StreamRows<T>(r.y, cols, L, r.nr, w, up, Q8For<T>(r.in.n > 0 ? r.in : xv));
    });
  }
};

// The block's tiles blockIdx.x, + gridDim.x, ... of `count`, each
// tile(t) streamed through kStages stages at `stages`: the first
// kStages - 1 are asked for before prologue() (which fills and quantizes
// the input vector, returning where it is), then each round asks for one
// more, waits for the oldest, sums its rows (sum(t, tile, cols, L, w, up,
// xv), w and up in the stage) and calls after(t).
template <int kStages, bool kStaticTiles, class TileFn, class Prologue, class After,
          class Sum = SumOneVector>
__device__ __forceinline__ void StreamTiles(int count, const StreamStages& st, int64_t cols,
                                            int L, uint8_t* stages, TileFn&& tile,
                                            Prologue&& prologue, After&& after,
                                            Sum&& sum = Sum{}) {
  const uint64_t policy = EvictFirstPolicy();
  // The block's i-th tile into stage i % kStages (a group either way, so
  // that the waits below count whole tiles).
  auto issue = [&](int i) {
    const int t = blockIdx.x + i * gridDim.x;
    if (t < count) {
      const TileRef r = tile(t);
      const int64_t bytes = r.nr * r.row_bytes;
      uint8_t* dst = stages + (i % kStages) * st.stage_bytes;
      CopyTile(dst, r.w, bytes, policy);
      if (r.up != nullptr) CopyTile(dst + bytes, r.up, bytes, policy);
    }
    CommitAsync();
  };
  // Tiles whose addresses depend on nothing computed (a projection's rows)
  // are asked for before the previous kernel has finished; an expert's
  // rows only once the routing that names it is known.
  if constexpr (!kStaticTiles) AwaitPreviousReleaseNext();
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(i);
  if constexpr (kStaticTiles) AwaitPreviousReleaseNext();
  const Q8Input xv = prologue();
#pragma unroll 1
  for (int i = 0; blockIdx.x + i * gridDim.x < count; ++i) {
    issue(i + kStages - 1);
    const int t = blockIdx.x + i * gridDim.x;
    const TileRef r = tile(t);
    // A tile without rows (an entries launch's empty round) was never
    // staged: nothing to wait for, and its stage, refilled next round, is
    // read by no one.
    if (r.nr == 0) continue;
    WaitAsync<kStages - 1>();
    __syncthreads();
    const uint8_t* w = stages + (i % kStages) * st.stage_bytes;
    const uint8_t* up = r.up != nullptr ? w + r.nr * r.row_bytes : nullptr;
    sum(t, r, cols, L, w, up, xv);
    __syncthreads();  // the stage is refilled by the next round's issue
    after(t);
  }
  WaitAsync<0>();
}

template <int kStages>
__global__ void __launch_bounds__(kProjThreads, kStreamBlocksPerSm)
    StreamProjectKernel(const __grid_constant__ StreamLaunch s) {
  __shared__ double scratch[32];
  __shared__ int last;
  extern __shared__ __align__(16) float xs[];
  const ProjectLaunch& a = s.a;
  const DecodeProjection& p = a.p;
  auto prologue = [&] {
    if (a.prepared) return PreparedInput(p.in.prepared, 1, 0, p.in.n);
    LoadInput(p.in, xs, scratch);
    uint8_t* q8 = reinterpret_cast<uint8_t*>(
        xs + Q8Offset(PaddedFloats(p.in.n) + (p.topk.k > 0 ? p.m[0].rows : 0)));
    QuantizeRows(xs, 1, p.in.n, 0, q8, a.q8);
    __syncthreads();
    return Q8InputAt(q8, 1, 0, p.in.n, a.q8);
  };
  // The block that completes the router's last tile routes the token
  // (StreamTiles calls after() past the barrier that ends the tile).
  auto after = [&](int t) {
    if (p.topk.k == 0 || t >= a.block_start[1]) return;
    RouteIfLast(p, a.block_start[1], xs + PaddedFloats(p.in.n), &last);
  };
  StreamTiles<kStages, true>(
      a.block_start[p.n_matrices], s.st, p.in.n, a.lanes,
      reinterpret_cast<uint8_t*>(xs) + s.st.vec_bytes, [&](int t) { return ProjectTile(s, t); },
      prologue, after);
}

// Row `item` of the down launch's 8-bit rows (DecodeExpertsPrepareDown's
// layout in e.h_q8, formats f) from src, by every thread of the block with
// DecodeExpertsPrepareDown's chunk-to-lane order, so its bits. src was
// written by other blocks of this launch (or by the launch before): read
// from L2.
__device__ __forceinline__ void QuantizeDownRow(const DecodeExperts& e, int item,
                                                const float* src, int f) {
  const int items = e.k + (e.shared_ff > 0 ? 1 : 0);
  uint8_t* q8 = const_cast<uint8_t*>(e.h_q8.q8);
  uint8_t* kq = (f & kFormatQ8K) ? q8 + item * Q8KBytes(e.ff) : nullptr;
  uint8_t* zq = (f & kFormatQ8Z) ? Q8ZBase(q8, items, e.ff, f) + item * Q8ZBytes(e.ff) : nullptr;
  QuantizeQ8([src](int, int64_t i) { return __ldcg(src + i); }, 1, e.ff, kq, zq,
             static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
}

template <int kStages>
__global__ void __launch_bounds__(kProjThreads, kStreamBlocksPerSm)
    StreamGateUpKernel(const __grid_constant__ StreamExperts s) {
  extern __shared__ __align__(16) float xs[];
  __shared__ int last;
  const DecodeExperts& e = s.e;
  auto prologue = [&] {
    // The shared expert's hidden row came from the launch before: the
    // grid's last block quantizes it for the down launch.
    if (s.quantize_down != 0 && e.shared_ff > 0 && blockIdx.x == gridDim.x - 1) {
      QuantizeDownRow(e, e.k, e.shared_h, s.quantize_down);
    }
    if (s.prepared) return PreparedInput(e.xn_q8, 1, 0, e.n_embd);
    LoadRows(e.xn, 1, e.n_embd, xs, 0);
    __syncthreads();
    uint8_t* q8 = reinterpret_cast<uint8_t*>(xs + Q8Offset(PaddedFloats(e.n_embd)));
    QuantizeRows(xs, 1, e.n_embd, 0, q8, s.q8);
    __syncthreads();
    return Q8InputAt(q8, 1, 0, e.n_embd, s.q8);
  };
  // Past the barrier that ends tile t: the block that completes a slot's
  // ff rows quantizes them for the down launch and resets the slot's
  // counter for the next launch.
  auto after = [&](int t) {
    if (s.quantize_down == 0) return;
    const SlotRows x = SlotRowsOf(s, t);
    if (!LastToFinish(e.h_counters + x.j, x.nr, static_cast<int>(e.ff), &last)) return;
    QuantizeDownRow(e, x.j, e.h + x.j * e.ff, s.quantize_down);
    if (threadIdx.x == 0) e.h_counters[x.j] = 0;
  };
  StreamTiles<kStages, false>(
      s.row_blocks * e.k, s.st, e.n_embd, s.lanes,
      reinterpret_cast<uint8_t*>(xs) + s.st.vec_bytes, [&](int t) { return ExpertTile(s, t); },
      prologue, after);
}

// StreamGroupedQ8's launch: tile t is row block t % row_blocks of group
// t / row_blocks, entry g of group g; with several entries a group
// (HasSeveralEntries, StreamGroupsKernel<.., true>) each staged tile is
// summed against every entry of its group (GroupEntries).
struct StreamGroups {
  RawGroupedMatMul g;
  StreamStages st;
  int lanes, row_blocks, q8;
  FastDiv by_row_blocks;
  // Several entries: a group's tiles are its row blocks times `rounds`, round
  // fastest (so the tiles of one row block run side by side and its bytes
  // come from HBM once and from L2 after); round j of a tile sums the
  // group's entries in runs of `run` (kTileEntries or fewer,
  // StreamEntriesPerRound), runs j, j + rounds, ... One
  // group of many entries (a dense product) takes a round per run; groups
  // through group_begin (the experts) take one: most of them hold a run or
  // less, and a round without entries still costs its block a tile's
  // bounds (bench35 at 32 sequences: rounds for the largest group made
  // the experts' launches 2.3x slower, H100 2026-12-07).
  int rounds, run;
  FastDiv by_rounds, by_group_tiles;
  // Rounds of more than kTileEntries / 2 entries sum their lanes scattered
  // (GroupSumScattered); 0: one GroupSum a sum.
  int scatter;
};

// Entries a staged tile is summed against in one round at most.
constexpr int kTileEntries = kStreamTileEntries;

template <bool kEntries>
__device__ __forceinline__ TileRef GroupTile(const StreamGroups& s, int t) {
  const RawGroupedMatMul& g = s.g;
  const int64_t rb = static_cast<int64_t>(g.row_bytes);
  auto index = [&](int gi) { return g.group_weight != nullptr ? g.group_weight[gi] : gi; };
  auto matrix = [&](int gi) {
    return static_cast<const uint8_t*>(g.single_weight != nullptr ? g.single_weight
                                                                  : g.weights[index(gi)]);
  };
  if constexpr (kEntries) {
    // Group, row block and round of tile t; its round's first entry. A
    // round without entries (an empty group, or a group smaller than the
    // largest) stages and sums nothing.
    const int gi = static_cast<int>(s.by_group_tiles.Div(t));
    const uint32_t in_group = s.by_group_tiles.Mod(t);
    const int64_t r0 = static_cast<int64_t>(s.by_rounds.Div(in_group)) * s.st.rows_per_tile;
    int64_t begin, end;
    GroupEntries(g, gi, begin, end);
    const int64_t e0 = begin + static_cast<int64_t>(s.by_rounds.Mod(in_group)) * s.run;
    if (e0 >= end) return {nullptr, nullptr, rb, 0, g.type, nullptr};
    const int64_t nr = g.rows - r0 < s.st.rows_per_tile ? g.rows - r0 : s.st.rows_per_tile;
    // A pair's second rows are staged after the first (StreamTiles).
    const uint8_t* up = g.up_offset != 0
                            ? static_cast<const uint8_t*>(g.weights[index(gi) + g.up_offset]) +
                                  r0 * rb
                            : nullptr;
    TileRef r{matrix(gi) + r0 * rb, up, rb, static_cast<int>(nr), g.type, g.y + r0};
    r.e0 = e0;
    r.end = end;
    return r;
  }
  const int gi = static_cast<int>(s.by_row_blocks.Div(t));
  const int64_t r0 = static_cast<int64_t>(s.by_row_blocks.Mod(t)) * s.st.rows_per_tile;
  const int64_t nr = g.rows - r0 < s.st.rows_per_tile ? g.rows - r0 : s.st.rows_per_tile;
  const int64_t xr = g.x_row != nullptr ? g.x_row[gi] : gi;
  const uint8_t* x = g.x_q8 + xr * Q8Bytes(s.q8, g.cols);
  TileRef r{matrix(gi) + r0 * rb, nullptr, rb, static_cast<int>(nr), g.type,
            g.y + gi * g.y_stride + r0};
  r.in = {(s.q8 & kFormatQ8K) ? x : nullptr, (s.q8 & kFormatQ8Z) ? x : nullptr, g.cols};
  return r;
}

// The rows of one staged tile of type T (nr rows at w; y: the tile's first
// row of entry 0's output) against the rounded rows of entries [e0, e0 +
// ne) of g, ne <= kTileEntries: each weight chunk is read from the stage
// once for all of them. Each row's sum takes the lanes and order of
// StreamRows, so each entry gets the grouped kernel's bits.
template <class T>
__device__ __forceinline__ void StreamEntryRows(const RawGroupedMatMul& g, int64_t e0, int ne,
                                                float* y, int L, int nr, const uint8_t* w,
                                                bool scatter) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int groups = 32 / L, sub = lane & (L - 1);
  const int warp_row0 = warp * groups * kR;
  if (warp_row0 >= nr) return;
  const int row0 = warp_row0 + (lane / L) * kR;
  const int64_t cols = g.cols;
  const uint8_t* rp[kR];
#pragma unroll
  for (int r = 0; r < kR; ++r) rp[r] = w + (row0 + r < nr ? row0 + r : nr - 1) * g.row_bytes;
  const int64_t q8_bytes = kReadsQ8K<T> ? Q8KBytes(cols) : Q8ZBytes(cols);
  const uint8_t* xq[kTileEntries];
  float acc[kTileEntries][kR];
#pragma unroll
  for (int e = 0; e < kTileEntries; ++e) {
    const int64_t entry = e0 + (e < ne ? e : ne - 1);
    xq[e] = g.x_q8 + (g.x_row != nullptr ? g.x_row[entry] : entry) * q8_bytes;
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[e][r] = 0.0f;
  }
  using M = std::conditional_t<std::is_same_v<T, KWeights<false>> ||
                                   std::is_same_v<T, KWeights<true>>,
                               SharedAligned16, SharedMem>;
  const int n_chunks = static_cast<int>(cols / T::kChunk);
#pragma unroll 1
  for (int c = sub; c < n_chunks; c += L) {
    // Each row's chunk decoded once for every entry (Q8Dot<T>::W).
    typename Q8Dot<T>::W dw[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      typename T::Raw raw;
      T::template Load<M>(rp[r], c, raw);
      Q8Dot<T>::Decode(raw, dw[r]);
    }
#pragma unroll
    for (int e = 0; e < kTileEntries; ++e) {
      if (e < ne) {
        typename Q8Dot<T>::X x;
        Q8Dot<T>::Load(kReadsQ8K<T> ? Q8KAt(xq[e], cols) : Q8ZAt(xq[e], cols), c, x);
#pragma unroll
        for (int r = 0; r < kR; ++r) acc[e][r] += Q8Dot<T>::Dot(dw[r], x);
      }
    }
  }
  if (scatter && ne > kTileEntries / 2) {
    // Most entries of a round: the sums scattered over the group's lanes
    // (the same bits as GroupSum's); the first lane holding a sum stores
    // it.
    constexpr int kN = kTileEntries * kR;
    float v[kN];  // entry e's row r at e * kR + r
#pragma unroll
    for (int e = 0; e < kTileEntries; ++e) {
#pragma unroll
      for (int r = 0; r < kR; ++r) v[e * kR + r] = acc[e][r];
    }
    const int base = GroupSumScattered(v, L);
    const int held = ScatteredHeld(kN, L), copies = ScatteredCopies(kN, L);
#pragma unroll
    for (int i = 0; i < kN / 8; ++i) {  // L >= 8: at most kN / 8 held
      const int idx = base + i, e = idx / kR, r = idx % kR;
      if (i < held && e < ne && row0 + r < nr && (lane & (copies - 1)) == 0) {
        y[(e0 + e) * g.y_stride + row0 + r] = v[i];
      }
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < kTileEntries; ++e) {
    if (e >= ne) break;  // ne is the block's: the whole warp leaves together
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const float v = GroupSum(acc[e][r], L);
      if (sub == r % L && row0 + r < nr) y[(e0 + e) * g.y_stride + row0 + r] = v;
    }
  }
}

// Entries launches take the small grid (4 blocks an SM) where their tiles
// fit it: their registers are kept within what 4 blocks allow.
template <int kStages, bool kEntries>
__global__ void __launch_bounds__(kProjThreads, kEntries ? 4 : kStreamBlocksPerSm)
    StreamGroupsKernel(const __grid_constant__ StreamGroups s) {
  extern __shared__ __align__(16) float xs[];
  auto tile = [&](int t) { return GroupTile<kEntries>(s, t); };
  auto none = [] { return Q8Input{nullptr, nullptr, 0}; };
  auto after = [](int) {};
  uint8_t* stages = reinterpret_cast<uint8_t*>(xs) + s.st.vec_bytes;
  const int count = s.row_blocks * s.rounds * s.g.n_groups;
  if constexpr (!kEntries) {
    // Every tile reads its own rounded row: no prologue.
    StreamTiles<kStages, false>(count, s.st, s.g.cols, s.lanes, stages, tile, none, after);
  } else {
    auto sum = [&](int, const TileRef& r, int64_t, int L, const uint8_t* w, const uint8_t* up,
                   const Q8Input&) {
      // A pair's second matrix sums into y_up where the first sums into y.
      float* y_up = up != nullptr ? s.g.y_up + (r.y - s.g.y) : nullptr;
      WithQ8Type(r.type, [&](auto tag) {
        using T = typename decltype(tag)::type;
#pragma unroll 1
        for (int64_t e0 = r.e0; e0 < r.end; e0 += s.run * s.rounds) {
          const int ne = static_cast<int>(r.end - e0 < s.run ? r.end - e0 : s.run);
          StreamEntryRows<T>(s.g, e0, ne, r.y, L, r.nr, w, s.scatter != 0);
          if (up != nullptr) StreamEntryRows<T>(s.g, e0, ne, y_up, L, r.nr, up, s.scatter != 0);
        }
      });
    };
    StreamTiles<kStages, false>(count, s.st, s.g.cols, s.lanes, stages, tile, none, after, sum);
  }
}

// One expert slot's gate and up rows row0.. (types G and U).
template <class G, class U>
__device__ __forceinline__ void GateUpRows(const DecodeExperts& e, int j, int64_t row0,
                                           const float* xs, const Q8Input& xv, int sub, int L) {
  const int32_t id = e.ids[j];
  const uint8_t* g = static_cast<const uint8_t*>(e.gate[id]);
  const uint8_t* u = static_cast<const uint8_t*>(e.up[id]);
  float gs[kR], us[kR];
  if constexpr (std::is_same_v<G, U>) {
    const uint8_t* base[2] = {g, u};
    float acc[2][kR];
    RowSumsT<G, 2, kR>(base, e.ff, row0, e.n_embd, xs, xv, sub, L, acc);
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      gs[r] = acc[0][r];
      us[r] = acc[1][r];
    }
  } else {
    const uint8_t* bg[1] = {g};
    const uint8_t* bu[1] = {u};
    float ag[1][kR], au[1][kR];
    RowSumsT<G, 1, kR>(bg, e.ff, row0, e.n_embd, xs, xv, sub, L, ag);
    RowSumsT<U, 1, kR>(bu, e.ff, row0, e.n_embd, xs, xv, sub, L, au);
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      gs[r] = ag[0][r];
      us[r] = au[0][r];
    }
  }
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    if (sub == r % L && row0 + r < e.ff) e.h[j * e.ff + row0 + r] = SiluF(gs[r]) * us[r];
  }
}

template <class G, class U>
__device__ __forceinline__ void GateUpLoop(const DecodeExperts& e, int L, int row_blocks,
                                           const float* xs, const Q8Input& xv) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int groups = 32 / L, sub = lane & (L - 1);
#pragma unroll 1
  for (int b = blockIdx.x; b < row_blocks * e.k; b += gridDim.x) {
    const int j = b / row_blocks;
    const int64_t rb = b % row_blocks;
    const int64_t warp_row0 = (rb * (kProjThreads / 32) + warp) * groups * kR;
    if (warp_row0 < e.ff) GateUpRows<G, U>(e, j, warp_row0 + (lane / L) * kR, xs, xv, sub, L);
  }
}

// Routed experts, gate and up: blocks stride over (row block of ff,
// expert slot) pairs (at most DecodeBlocks, each paying the input's load
// and quantization once). Gate and up of one type (the usual case) share
// their loads; otherwise the up type must be one of the common pairings
// below (the host checks DecodeExpertsSupported).
__global__ void __launch_bounds__(kProjThreads, 3)
    GateUpKernel(const DecodeExperts e, int L, int row_blocks, int q8_formats, int prepared) {
  extern __shared__ float xs[];
  AwaitPreviousReleaseNext();
  Q8Input xv;
  if (prepared) {
    xv = PreparedInput(e.xn_q8, 1, 0, e.n_embd);
  } else {
    LoadRows(e.xn, 1, e.n_embd, xs, 0);
    __syncthreads();
    uint8_t* q8 = nullptr;
    if (q8_formats != 0) {
      q8 = reinterpret_cast<uint8_t*>(xs + Q8Offset(PaddedFloats(e.n_embd)));
      QuantizeRows(xs, 1, e.n_embd, 0, q8, q8_formats);
      __syncthreads();
    }
    xv = Q8InputAt(q8, 1, 0, e.n_embd, q8_formats);
  }
  if (e.gate_type == e.up_type) {
    WithType(e.gate_type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      GateUpLoop<T, T>(e, L, row_blocks, xs, xv);
    });
  } else {
    WithType(e.gate_type, [&](auto tg) {
      using G = typename decltype(tg)::type;
      if (e.up_type == kQ4_K) GateUpLoop<G, KWeights<false>>(e, L, row_blocks, xs, xv);
      if (e.up_type == kQ5_K) GateUpLoop<G, KWeights<true>>(e, L, row_blocks, xs, xv);
      if (e.up_type == kQ6_K) GateUpLoop<G, Q6KWeights>(e, L, row_blocks, xs, xv);
      if (e.up_type == kQ8_0) GateUpLoop<G, Q8_0Weights>(e, L, row_blocks, xs, xv);
    });
  }
}

// Down products: grid over row blocks of n_embd, one warp per item (the k
// routed experts, then the shared one) for the block's rows; their sums
// meet in slot order. R: rows per lane group; a row's sum does not depend
// on it (the same lanes sum the same chunks in the same order), so fewer
// rows a block, more blocks, give the same bits (SLUICE_CUDA_DOWN_ROWS);
// with fewer rows unrolled a thread needs fewer registers, so more blocks
// fit an SM (at 8 rows, 168 registers: one block of up to 12 warps).
// kPasses: a block's lane groups take kPasses rounds of R rows each (the
// same lanes and order for every row, so the same bits), which spreads a
// warp's prologue (vector, ids, slot table) over more rows and the grid
// over fewer blocks. A compile-time count: with a run-time one the
// one-pass launch, bench35's, took 27% longer (H100, run 23).
template <int R, int kPasses = 1>
__global__ void __launch_bounds__(32 * kMaxDownItems, R >= 8 ? 1 : (R == 4 ? 2 : 3))
    DownKernel(const DecodeExperts e, int L, int q8_formats, int prepared, int float_warps) {
  extern __shared__ float smem[];
  const bool shared = e.shared_ff > 0;
  // A warp an item: the routed experts, then the shared one unless an
  // earlier launch computed its product (shared_y). The prepared rows keep
  // the shared row either way (DecodeExpertsDownFormats' layout).
  const bool shared_warp = shared && e.shared_y == nullptr;
  const int items = e.k + (shared_warp ? 1 : 0);
  const int q8_rows = e.k + (shared ? 1 : 0);
  const int64_t stride = PaddedFloats(e.ff);
  const int groups = 32 / L;
  const int rows_per_pass = groups * R;
  const int rows_per_block = rows_per_pass * kPasses;
  const int64_t block_row0 = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  // The block's rows of every item's down matrix. The routing that names
  // the experts is two launches back: this launch starts only once the
  // gate/up launch before it has passed its own wait, so the ids and the
  // slot table are final here, while the gate/up products still run.
  // (Without programmatic launches there is nothing to overlap.)
  if (c_pdl != 0) {
    const int64_t nr =
        e.n_embd - block_row0 < rows_per_block ? e.n_embd - block_row0 : rows_per_block;
    for (int x = 0; x < items; ++x) {
      const bool routed_x = x < e.k;
      const int64_t rb = RowBytesOf(routed_x ? e.down_type : e.shared_down_type, e.ff);
      const void* w = routed_x ? e.down[e.ids[x]] : e.shared_down;
      PrefetchL2(static_cast<const uint8_t*>(w) + block_row0 * rb, nr * rb);
    }
  }
  AwaitPreviousReleaseNext();
  float* partial = smem;                        // [items][rows_per_block]
  float* hs = smem + items * rows_per_block;    // [items][stride] (the float path)
  const int lane = threadIdx.x & 31, s = threadIdx.x >> 5;
  Q8Input xvs;
  if (prepared) {
    xvs = PreparedInput(e.h_q8, q8_rows, s, e.ff);
  } else if (q8_formats != 0) {
    // Each warp reads only its own item's row: it quantizes that row alone,
    // straight from global memory, with no block barrier (the same bytes as
    // the block quantizer: the same chunks meet in the same lanes'
    // shuffles), or, where its type has no 8-bit product (float_warps: bit
    // 0 the routed warps, bit 1 the shared one), loads its floats.
    const float* src = s < e.k ? e.h + s * e.ff : e.shared_h;
    if ((float_warps >> (s < e.k ? 0 : 1)) & 1) {
      for (int i = 4 * lane; i < e.ff; i += 128) {
        *reinterpret_cast<float4*>(hs + s * stride + Pad(i)) =
            *reinterpret_cast<const float4*>(src + i);
      }
      xvs = Q8InputAt(nullptr, items, s, e.ff, 0);
    } else {
      uint8_t* q8 =
          reinterpret_cast<uint8_t*>(smem + Q8Offset(items * rows_per_block +
                                                     (float_warps != 0 ? items * stride : 0)));
      xvs = Q8InputAt(q8, items, s, e.ff, q8_formats);
      QuantizeQ8([src](int, int64_t i) { return __ldg(src + i); }, 1, e.ff,
                 const_cast<uint8_t*>(xvs.k), const_cast<uint8_t*>(xvs.z), lane, 32);
    }
    __syncwarp();
  } else {
    LoadRows(e.h, e.k, e.ff, hs, stride);
    if (shared_warp) LoadRows(e.shared_h, 1, e.ff, hs + e.k * stride, 0);
    __syncthreads();
    xvs = Q8InputAt(nullptr, items, s, e.ff, 0);
  }
  const int sub = lane & (L - 1);
  const bool routed = s < e.k;
  const int type = routed ? e.down_type : e.shared_down_type;
  const uint8_t* base[1] = {static_cast<const uint8_t*>(routed ? e.down[e.ids[s]] : e.shared_down)};
  if constexpr (kPasses == 1) {
    float acc[1][R];
    RowSums<1, R>(type, base, e.n_embd, block_row0 + (lane / L) * R, e.ff, hs + s * stride, xvs,
                  sub, L, acc);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (sub == r % L) partial[s * rows_per_block + (lane / L) * R + r] = acc[0][r];
    }
  } else {
    // The type's switch outside the passes' loop (see RowSums).
    WithType(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
#pragma unroll 1
      for (int pass = 0; pass < kPasses; ++pass) {
        const int pass_row0 = pass * rows_per_pass;
        if (block_row0 + pass_row0 >= e.n_embd) break;  // the same for the whole block
        float acc[1][R];
        RowSumsT<T, 1, R>(base, e.n_embd, block_row0 + pass_row0 + (lane / L) * R, e.ff,
                          hs + s * stride, xvs, sub, L, acc);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (sub == r % L) {
            partial[s * rows_per_block + pass_row0 + (lane / L) * R + r] = acc[0][r];
          }
        }
      }
    });
  }
  __syncthreads();
  for (int t = threadIdx.x; t < rows_per_block; t += blockDim.x) {
    const int64_t row = block_row0 + t;
    if (row >= e.n_embd) return;
    float out = 0.0f;
    for (int x = 0; x < e.k; ++x) {
      float y = partial[x * rows_per_block + t];
      if (e.host_y != nullptr) y += e.host_y[x * e.n_embd + row];
      out = x == 0 ? y * e.weights[0] : out + y * e.weights[x];
    }
    if (shared) {
      out += (shared_warp ? partial[e.k * rows_per_block + t] : e.shared_y[row]) *
             SigmoidF(*e.shared_logit);
    }
    e.out[row] = out;
  }
}

// ---- vectors prepared once ---------------------------------------------------

// in's vector (add, norm, x_out, xn_out as a DecodeProject block: the same
// block size, so the same sum order and bits) quantized into q8.
__global__ void __launch_bounds__(kProjThreads) PrepareKernel(const DecodeInput in, uint8_t* q8,
                                                              int formats) {
  __shared__ double scratch[32];
  extern __shared__ __align__(16) float xs[];
  AwaitPreviousReleaseNext();
  LoadInput(in, xs, scratch);
  QuantizeRows(xs, 1, in.n, 0, q8, formats);
}

// The down products' rows (h, then shared_h) quantized into q8, read in
// place (the quantizer's bits do not depend on where its floats come from).
__global__ void __launch_bounds__(512) PrepareDownKernel(const DecodeExperts e,
                                                                  uint8_t* q8, int formats) {
  AwaitPreviousReleaseNext();
  const int items = e.k + (e.shared_ff > 0 ? 1 : 0);
  const int64_t ff = e.ff;
  QuantizeBlockQ8(
      [&](int r, int64_t i) { return r < e.k ? e.h[r * ff + i] : e.shared_h[i]; }, items, ff,
      (formats & kFormatQ8K) ? q8 : nullptr,
      (formats & kFormatQ8Z) ? Q8ZBase(q8, items, ff, formats) : nullptr);
}

// ---- DeltaNet ---------------------------------------------------------------

// Blocks [0, 2G): a q or k head's channels (conv, SiLU, L2 norm; q also
// scaled); [2G, 2G + R): a v head's channels (conv, SiLU); the last block:
// the gates of the R heads.
__global__ void DeltaPrepKernel(DeltaNetShape s, float* beta, float* alpha_g, const float* dt_bias,
                                const float* a, const float* kernel, float* qkv, float* state,
                                float q_scale) {
  __shared__ double scratch[32];
  AwaitPreviousReleaseNext();
  const int S = s.state_size, G = s.n_k_heads, R = s.n_v_heads;
  const int b = blockIdx.x;
  if (b == 2 * G + R) {
    for (int i = threadIdx.x; i < R; i += blockDim.x) {
      DeltaGates(beta[i], alpha_g[i], dt_bias[i], a[i], &beta[i], &alpha_g[i]);
    }
    return;
  }
  const int ch = 2 * S * G + S * R, taps = s.conv_kernel, hist = taps - 1;
  const int i = threadIdx.x;
  const int c = (b < 2 * G ? b * S : 2 * S * G + (b - 2 * G) * S) + i;
  float v = 0.0f;
  if (i < S) {
    float keep[kDeltaNetMaxConvTaps];
    v = DeltaConvSilu(state, qkv, kernel, ch, taps, c, keep);
    for (int j = 0; j < hist; ++j) state[j * ch + c] = keep[j];
  }
  if (b >= 2 * G) {
    if (i < S) qkv[c] = v;
    return;
  }
  const double sum = BlockSum(static_cast<double>(v) * v, scratch);
  const float scale = 1.0f / fmaxf(static_cast<float>(sqrt(sum)), s.eps);
  if (i < S) {
    float y = v * scale;
    if (b < G) y *= q_scale;
    qkv[c] = y;
  }
}

// ---- DeltaNet, one launch -----------------------------------------------------

// DeltaPrepKernel and DeltaScanRegKernel<4> (ops.cu) of one token for state
// size kFusedS, as one cluster launch: cluster c is k head c and the
// `ratio` v heads j = c + h G that read it, each split over P blocks of
// 128 / P state rows (4 threads a row, as the scan kernel). Each block
// repeats the head's q/k conv and L2 norms (in 128-thread order, so the
// bits of the prep kernel's blocks), convolves its own v rows and computes
// its head's gates; after a cluster barrier (every block has read the old
// conv state) rank 0 writes the q/k conv state and each block its v rows'.
// The gated RMS norm sums each warp's rows, then every block of the head
// reads the head's 16 warp sums from its parts' shared memory and sums them
// as BlockSum sums a 512-thread block's: the same bits as the two launches.
constexpr int kFusedS = 128;
constexpr int kFusedCluster = 8;  // the portable cluster size limit

// The sequence a DeltaFusedKernel block steps (blockIdx.y): its row of
// qkv, the gate inputs, z and o, and its conv and recurrent states.
struct FusedSeq {
  int64_t row;
  float* conv;
  float* ssm;
};
// The decode program's one sequence: row 0, its states given.
struct FusedOne {
  float* conv;
  float* ssm;
  __device__ FusedSeq At(int) const { return {0, conv, ssm}; }
};
// A batch of sequences of one row each (SeqBatch: conv state in a,
// recurrent state in b).
struct FusedMany {
  SeqBatch b;
  __device__ FusedSeq At(int i) const { return {b.rows[i].row, b.states[i].a, b.states[i].b}; }
};

template <int P, typename Seqs>
__global__ void __launch_bounds__(512 / P)
    DeltaFusedKernel(DeltaNetShape s, const float* qkv, const float* beta_in,
                     const float* alpha_in, const float* dt_bias, const float* a,
                     const float* kernel, const float* z, const float* norm, Seqs seqs,
                     float* o, float q_scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  constexpr int n = kFusedS, parts = 4, rows = n / P, threads = 512 / P;
  constexpr int warps = threads / 32;
  __shared__ double scratch[32];
  __shared__ double warp_sums[warps];
  __shared__ float qs[n], ks[n], vs[rows];
  AwaitPreviousReleaseNext();
  const int G = s.n_k_heads, taps = s.conv_kernel, hist = taps - 1;
  const int ch = 2 * n * G + n * s.n_v_heads;
  const FusedSeq seq = seqs.At(blockIdx.y);
  float* state = seq.conv;
  float* ssm = seq.ssm;
  qkv += seq.row * ch;
  beta_in += seq.row * s.n_v_heads;
  alpha_in += seq.row * s.n_v_heads;
  z += seq.row * n * s.n_v_heads;
  o += seq.row * n * s.n_v_heads;
  const int rank = static_cast<int>(cluster.block_rank());
  const int kh = blockIdx.x / cluster.num_blocks();
  const int h = rank / P, part = rank % P;
  const int j = kh + h * G;
  const int tid = threadIdx.x;
  // This thread's state columns, asked for first: their loads overlap the
  // convolutions and norms below.
  const int r0 = part * rows;
  const int r = r0 + tid / parts, p = tid % parts;
  float* head_state = ssm + static_cast<int64_t>(j) * n * n + r * n + p;
  float st[kFusedS / parts];
#pragma unroll
  for (int m = 0; m < n / parts; ++m) st[m] = head_state[m * parts];
  // q and k of head kh: element i < 2n is channel kh S + i (q) for i < n,
  // else K + kh S + i - n (k). The convs keep the channels' next conv state
  // for after the barrier.
  auto qk_channel = [&](int i) { return i < n ? kh * n + i : G * n + kh * n + (i - n); };
  float keep_qk[2][kDeltaNetMaxConvTaps];
  float qv = 0.0f, kv = 0.0f;
  for (int u = 0; u < 2; ++u) {
    const int i = tid + u * threads;
    if (i >= 2 * n) break;
    const float v = DeltaConvSilu(state, qkv, kernel, ch, taps, qk_channel(i), keep_qk[u]);
    (i < n ? qv : kv) = v;
  }
  const bool has_q = tid < n, has_k = (threads >= 2 * n ? tid >= n && tid < 2 * n : tid < n);
  const double q_sum = BlockSum(has_q ? static_cast<double>(qv) * qv : 0.0, scratch);
  const double k_sum = BlockSum(has_k ? static_cast<double>(kv) * kv : 0.0, scratch);
  const float q_norm = 1.0f / fmaxf(static_cast<float>(sqrt(q_sum)), s.eps);
  const float k_norm = 1.0f / fmaxf(static_cast<float>(sqrt(k_sum)), s.eps);
  if (has_q) qs[tid] = (qv * q_norm) * q_scale;
  if (has_k) ks[threads >= 2 * n ? tid - n : tid] = kv * k_norm;
  // This block's v rows.
  float keep_v[kDeltaNetMaxConvTaps];
  const int vc = 2 * G * n + j * n + r0 + tid;
  if (tid < rows) vs[tid] = DeltaConvSilu(state, qkv, kernel, ch, taps, vc, keep_v);
  // The head's gates (DeltaPrepKernel's last block).
  float b, g;
  DeltaGates(beta_in[j], alpha_in[j], dt_bias[j], a[j], &b, &g);
  const float decay = expf(g);
  cluster.sync();  // every block has read the old conv state; qs/ks/vs are set
  if (rank == 0) {
    for (int u = 0; u < 2; ++u) {
      const int i = tid + u * threads;
      if (i >= 2 * n) break;
      for (int t = 0; t < hist; ++t) state[t * ch + qk_channel(i)] = keep_qk[u][t];
    }
  }
  if (tid < rows) {
    for (int t = 0; t < hist; ++t) state[t * ch + vc] = keep_v[t];
  }
  // The recurrence of rows r0 + tid / 4 (DeltaScanRegKernel<4>).
  const float out = DeltaRowStep<parts>(st, ks, qs, p, decay, b, vs[tid / parts]);
#pragma unroll
  for (int m = 0; m < n / parts; ++m) head_state[m * parts] = st[m];
  const double sq = WarpSum(p == 0 ? static_cast<double>(out) * out : 0.0);
  if ((tid & 31) == 0) warp_sums[tid >> 5] = sq;
  cluster.sync();
  // The head's 16 warp sums, in the 512-thread block's warp order.
  const int lane = tid & 31;
  double total = 0.0;
  if (lane < 16) {
    const double* remote = cluster.map_shared_rank(warp_sums, h * P + lane / warps);
    total = remote[lane % warps];
  }
  const double sum = WarpSum(total);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / sqrtf(mean + s.eps);
  if (p == 0) {
    const int64_t idx = static_cast<int64_t>(j) * n + r;
    o[idx] = ((out * scale) * norm[r]) * SiluF(z[idx]);
  }
  cluster.sync();  // no block leaves while another reads its warp sums
#endif
}

// ---- attention --------------------------------------------------------------

constexpr int kAttnThreads = 256;
constexpr int kAttnWarps = kAttnThreads / 32;
constexpr int kAttnRegs = 64;  // q heads x dims per lane held per block

// A cache this small is read once per head chunk from L2 at little cost,
// so its q heads are spread over blocks of kAttnFewHeads: each block's
// serial work per key (a dot, a warp sum and an online-softmax step per
// head) shrinks, and more blocks run. Larger caches keep every head of a
// KV head (up to the registers' kAttnRegs) in one block, reading each key
// once.
constexpr int kAttnFewHeads = 2;
constexpr int64_t kAttnFewHeadsCacheBytes = 16ll << 20;

int HeadsPerBlock(const AttentionShape& s) {
  const int dpl = s.head_dim / 32;
  const int per_group = s.n_head / s.n_head_kv;
  int cap = kAttnRegs / dpl;
  const int64_t cache = static_cast<int64_t>(s.kv_capacity) * s.n_head_kv * s.head_dim * 8;
  if (cache <= kAttnFewHeadsCacheBytes && cap > kAttnFewHeads) cap = kAttnFewHeads;
  return per_group < cap ? per_group : cap;
}
int HeadChunks(const AttentionShape& s) {
  const int per_group = s.n_head / s.n_head_kv, hb = HeadsPerBlock(s);
  return (per_group + hb - 1) / hb;
}

// Grid (n_head_kv, splits, head chunks). Scratch per (head, split): m, l,
// then head_dim sums.
template <int DPL, int kHB>
__global__ void __launch_bounds__(kAttnThreads)
    AttendSplitKernel(AttentionShape s, const float* q, const float* k_cache, const float* v_cache,
                      const int32_t* d_pos0, float* scratch, int32_t* counters, float* o, int hb) {
  extern __shared__ float smem[];
  __shared__ int last;
  __shared__ float fw[kAttnWarps * kHB];  // each warp's weight exp(m_w - M) per head
  __shared__ float mh[kHB];               // M: the heads' maxima over the warps
  AwaitPreviousReleaseNext();
  const int d = s.head_dim, g = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  const int per_group = s.n_head / s.n_head_kv;
  const int h0 = g * per_group + blockIdx.z * hb;
  const int nh = min(hb, g * per_group + per_group - h0);
  const int q_stride = s.gated ? 2 * d : d, kv_dim = s.n_head_kv * d;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* qs = smem;                       // [kHB][d]
  float* wm = qs + kHB * d;               // [warps][kHB] maxima
  float* wl = wm + kAttnWarps * kHB;      // [warps][kHB] sums
  float* wo = wl + kAttnWarps * kHB;      // [warps][kHB][d]
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  for (int base = threadIdx.x; base < nh * d; base += kBatch * blockDim.x) {
    float v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * blockDim.x;
      if (i < nh * d) v[u] = q[(h0 + i / d) * q_stride + i % d];
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * blockDim.x;
      if (i < nh * d) qs[i] = v[u] * scale;
    }
  }
  __syncthreads();
  const int n_ctx = *d_pos0 + 1;
  const int per = (n_ctx + splits - 1) / splits;
  const int j0 = split * per, j1 = min(n_ctx, j0 + per);
  float m[kHB], l[kHB], acc[kHB][DPL];
#pragma unroll
  for (int h = 0; h < kHB; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[h][i] = 0.0f;
  }
  // Two keys per warp per step, both rows loaded before either is used.
  for (int j = j0 + warp; j < j1; j += 2 * kAttnWarps) {
    const int jn = j + kAttnWarps;
    const bool two = jn < j1;
    float kv[2][DPL], vv[2][DPL];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const int64_t row = static_cast<int64_t>(t == 0 || !two ? j : jn) * kv_dim + g * d;
#pragma unroll
      for (int i = 0; i < DPL; ++i) {
        kv[t][i] = k_cache[row + lane + 32 * i];
        vv[t][i] = v_cache[row + lane + 32 * i];
      }
    }
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      if (t == 1 && !two) break;
#pragma unroll
      for (int h = 0; h < kHB; ++h) {
        if (h < nh) {
          float dot = 0.0f;
#pragma unroll
          for (int i = 0; i < DPL; ++i) dot = fmaf(qs[h * d + lane + 32 * i], kv[t][i], dot);
          dot = WarpSum(dot);
          const float mn = fmaxf(m[h], dot);
          const float corr = expf(m[h] - mn), pj = expf(dot - mn);
          l[h] = l[h] * corr + pj;
#pragma unroll
          for (int i = 0; i < DPL; ++i) acc[h][i] = acc[h][i] * corr + pj * vv[t][i];
          m[h] = mn;
        }
      }
    }
  }
#pragma unroll
  for (int h = 0; h < kHB; ++h) {
    if (h < nh) {
      if (lane == 0) {
        wm[warp * kHB + h] = m[h];
        wl[warp * kHB + h] = l[h];
      }
#pragma unroll
      for (int i = 0; i < DPL; ++i) wo[(warp * kHB + h) * d + lane + 32 * i] = acc[h][i];
    }
  }
  __syncthreads();
  // This block's split: the warps merged, each warp's weight per head
  // computed once.
  if (threadIdx.x < nh) {
    const int h = threadIdx.x;
    float mx = -INFINITY;
    for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, wm[w * kHB + h]);
    mh[h] = mx;
    for (int w = 0; w < kAttnWarps; ++w) {
      fw[w * kHB + h] = mx != -INFINITY ? expf(wm[w * kHB + h] - mx) : 0.0f;
    }
  }
  __syncthreads();
  for (int x = threadIdx.x; x < nh * (d + 2); x += blockDim.x) {
    const int h = x / (d + 2), c = x % (d + 2);
    const float mx = mh[h];
    float v = 0.0f;
    if (c == 0) {
      v = mx;
    } else if (mx != -INFINITY) {
      for (int w = 0; w < kAttnWarps; ++w) {
        v += fw[w * kHB + h] * (c == 1 ? wl[w * kHB + h] : wo[(w * kHB + h) * d + c - 2]);
      }
    }
    scratch[((h0 + h) * splits + split) * (d + 2) + c] = v;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const int idx = g * gridDim.z + blockIdx.z;
    last = atomicAdd(counters + idx, 1) == splits - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // The splits merged: each split's weight exp(m_s - M) / den per head in
  // shared memory (reusing the warps' area), then each output sums its
  // splits kBatch loads at a time.
  float* f = wo;  // [kHB][splits]
  for (int x = threadIdx.x; x < nh * splits; x += blockDim.x) {
    f[x] = __ldcg(scratch + ((h0 + x / splits) * splits + x % splits) * (d + 2));
  }
  __syncthreads();
  for (int h = warp; h < nh; h += kAttnWarps) {
    float mx = -INFINITY;
    for (int sp = lane; sp < splits; sp += 32) mx = fmaxf(mx, f[h * splits + sp]);
    mx = WarpMax(mx);
    float den = 0.0f;
    for (int sp = lane; sp < splits; sp += 32) {
      const float ms = f[h * splits + sp];
      const float l = __ldcg(scratch + ((h0 + h) * splits + sp) * (d + 2) + 1);
      den += ms == -INFINITY ? 0.0f : expf(ms - mx) * l;
    }
    den = WarpSum(den);
    __syncwarp();
    for (int sp = lane; sp < splits; sp += 32) {
      const float ms = f[h * splits + sp];
      f[h * splits + sp] = ms == -INFINITY ? 0.0f : expf(ms - mx) / den;
    }
  }
  __syncthreads();
  // kOut outputs per thread, 4 splits per step: 4 * kOut loads in flight.
  constexpr int kOut = 8;
  for (int x0 = threadIdx.x; x0 < nh * d; x0 += kOut * blockDim.x) {
    float num[kOut];
#pragma unroll
    for (int u = 0; u < kOut; ++u) num[u] = 0.0f;
    for (int s0 = 0; s0 < splits; s0 += 4) {
#pragma unroll
      for (int u = 0; u < kOut; ++u) {
        const int x = x0 + u * blockDim.x;
        if (x >= nh * d) continue;
        const int h = x / d, c = x % d;
        const float* sc = scratch + (h0 + h) * splits * (d + 2) + 2 + c;
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          if (s0 + t < splits) num[u] += f[h * splits + s0 + t] * __ldcg(sc + (s0 + t) * (d + 2));
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kOut; ++u) {
      const int x = x0 + u * blockDim.x;
      if (x >= nh * d) continue;
      const int h = x / d, c = x % d;
      float out = num[u];
      if (s.gated) out *= SigmoidF(q[(h0 + h) * q_stride + d + c]);
      o[(h0 + h) * d + c] = out;
    }
  }
  if (threadIdx.x == 0) counters[g * gridDim.z + blockIdx.z] = 0;
}

// kHB of the kernel instance that runs s (the register arrays' heads).
int AttendRegHeads(const AttentionShape& s) {
  return HeadsPerBlock(s) <= kAttnFewHeads ? kAttnFewHeads : kAttnRegs / (s.head_dim / 32);
}

size_t AttendSmem(const AttentionShape& s) {
  const int hb = AttendRegHeads(s);
  // The last block's split weights [hb][splits] reuse the warps' area.
  return (static_cast<size_t>(hb) * s.head_dim * (1 + kAttnWarps) + 2 * kAttnWarps * hb) *
         sizeof(float);
}

// The 8-bit vector products of `type` over n columns read (decode_q8.h):
// Q8_K for the K-quants, Q8_0 for Q8_0 and Q1_0, as llama.cpp's CPU
// backend; 0 (the float path) for the other types, or for every type when
// SLUICE_CUDA_Q8 is "0" at the first launch.
int Q8FormatOf(int type, int64_t n) {
  static const bool on = [] {
    const char* v = std::getenv("SLUICE_CUDA_Q8");
    return v == nullptr || std::string(v) != "0";
  }();
  if (!on) return 0;
  switch (type) {
    case kQ4_K:
    case kQ5_K:
    case kQ6_K: return n % 256 == 0 ? kFormatQ8K : 0;
    case kQ8_0: return n % 32 == 0 ? kFormatQ8Z : 0;
    case kQ1_0: return n % 128 == 0 ? kFormatQ8Z : 0;
    default: return 0;
  }
}

// The formats a launch of these matrix types over n columns needs.
int Q8Formats(const int* types, int n_types, int64_t n) {
  int f = 0;
  for (int i = 0; i < n_types; ++i) f |= Q8FormatOf(types[i], n);
  return f;
}

// Blocks of the routed experts' gate/up launch with `row_blocks` (row
// block, expert) pairs: at most blocks-per-SM x SMs, set at
// PrepareDecodeKernels: 2 (on the H200 bench35's gate/up took 16.3 us so
// against 19.2 us with 4 and with one block a pair, 2026-12-02);
// SLUICE_CUDA_DECODE_BLOCKS_PER_SM overrides it for measurements, 0 meaning
// one block a pair.
int g_resident_blocks = 0;
// Blocks of a streamed projection (StreamProjectKernel): kStreamBlocksPerSm
// per SM, set at PrepareDecodeKernels.
int g_stream_grid = 0;
// A streamed launch whose input and 3 or 4 stages fit kStreamSmallKb KB a
// block (SLUICE_CUDA_STREAM_SMALL_KB=K overrides it, 0 off) runs up to 4
// blocks an SM (the kernels' ~125 registers allow 4 of 128 threads)
// instead of 2 of up to kStreamSmemPerBlock: twice the warps to issue
// from, for kernels that wait on their own instructions' latency (ncu: 2
// warps a scheduler, each issuing every 6.3 cycles). H100, run 18
// (docs/BENCHMARKS.md): bench35's DeltaNet input projections 136.0 -> 127.5
// us a step, the attention's 39.4 -> 36.0; 80 KB was slower.
constexpr int64_t kStreamSmallKb = 56;
int64_t g_stream_small_bytes = 0;
int g_stream_small_grid = 0;
int g_sms = 0;  // the device's multiprocessors (PrepareDecodeKernels)
int DecodeBlocks(int row_blocks) {
  return g_resident_blocks > 0 && row_blocks > g_resident_blocks ? g_resident_blocks : row_blocks;
}

// Whether the decode kernels are launched with programmatic stream
// serialization (AwaitPrevious above), on devices of compute capability 9
// or more: SLUICE_CUDA_PDL=1 or 0, else kPdlByDefault; set at
// PrepareDecodeKernels.
constexpr bool kPdlByDefault = false;
bool g_pdl = false;

// Sets config's attributes: programmatic stream serialization when g_pdl,
// and a cluster of `cluster` blocks when > 0.
void SetLaunchAttributes(cudaLaunchConfig_t* config, cudaLaunchAttribute (&attr)[2],
                         int cluster) {
  config->numAttrs = 0;
  config->attrs = attr;
  if (g_pdl) {
    attr[config->numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[config->numAttrs].val.programmaticStreamSerializationAllowed = 1;
    ++config->numAttrs;
  }
  if (cluster > 0) {
    attr[config->numAttrs].id = cudaLaunchAttributeClusterDimension;
    attr[config->numAttrs].val.clusterDim.x = static_cast<unsigned>(cluster);
    attr[config->numAttrs].val.clusterDim.y = 1;
    attr[config->numAttrs].val.clusterDim.z = 1;
    ++config->numAttrs;
  }
}

// kernel<<<grid, threads, smem, stream>>>(args...), as a programmatic
// dependent launch where g_pdl.
template <class... Params, class... Args>
void Launch(void (*kernel)(Params...), dim3 grid, int threads, size_t smem, Stream stream,
            Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attr[2];
  SetLaunchAttributes(&config, attr, 0);
  cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// The shared-memory carveout every decode kernel asks for (percent of the
// unified L1; -1: the driver's choice). An SM runs blocks of two kernels at
// once only under one carveout, so with programmatic launches all ask for
// the most shared memory (the streamed products need it): a kernel asking
// for less would wait for the SM to drain before its blocks could start.
// SLUICE_CUDA_CARVEOUT (0..100, or -1) overrides it for measurements.
int g_carveout = -1;

template <class K>
void AllowSmem(K kernel) {
  cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                       cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxDynamicSmem);
  cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                       cudaFuncAttributePreferredSharedMemoryCarveout, g_carveout);
}

}  // namespace

void PrepareDecodeKernels() {
  const char* stream = std::getenv("SLUICE_CUDA_STREAM_WEIGHTS");
  const int on = stream != nullptr && std::string(stream) == "0" ? 0 : 1;
  cudaMemcpyToSymbol(c_stream_weights, &on, sizeof(on));
  const char* funnel = std::getenv("SLUICE_CUDA_FUNNEL_LOADS");
  const int funnel_on = funnel != nullptr && std::string(funnel) == "0" ? 0 : 1;
  cudaMemcpyToSymbol(c_funnel_loads, &funnel_on, sizeof(funnel_on));
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  const char* pdl = std::getenv("SLUICE_CUDA_PDL");
  g_pdl = major >= 9 && (pdl != nullptr ? std::string(pdl) != "0" : kPdlByDefault);
  const int pdl_on = g_pdl ? 1 : 0;
  cudaMemcpyToSymbol(c_pdl, &pdl_on, sizeof(pdl_on));
  const char* carveout = std::getenv("SLUICE_CUDA_CARVEOUT");
  g_carveout = carveout != nullptr ? std::atoi(carveout)
                                   : (g_pdl ? cudaSharedmemCarveoutMaxShared
                                            : cudaSharedmemCarveoutDefault);
  const char* per_sm = std::getenv("SLUICE_CUDA_DECODE_BLOCKS_PER_SM");
  g_resident_blocks = sms * (per_sm != nullptr ? std::atoi(per_sm) : 2);
  AllowSmem(DecodeProjectKernel<1>);
  AllowSmem(DecodeProjectKernel<kR>);
  AllowSmem(StreamProjectKernel<3>);
  AllowSmem(StreamProjectKernel<4>);
  AllowSmem(StreamGateUpKernel<3>);
  AllowSmem(StreamGateUpKernel<4>);
  AllowSmem(StreamGroupsKernel<3, false>);
  AllowSmem(StreamGroupsKernel<4, false>);
  AllowSmem(StreamGroupsKernel<3, true>);
  AllowSmem(StreamGroupsKernel<4, true>);
  // SLUICE_CUDA_STREAM_BLOCKS_PER_SM (1..3) overrides kStreamBlocksPerSm for
  // measurements (the kernels' registers allow 3 of 128 threads per SM).
  const char* stream_per_sm = std::getenv("SLUICE_CUDA_STREAM_BLOCKS_PER_SM");
  const int per_sm_stream = stream_per_sm != nullptr ? std::atoi(stream_per_sm) : 0;
  g_stream_grid = sms * (per_sm_stream >= 1 && per_sm_stream <= 3 ? per_sm_stream
                                                                  : kStreamBlocksPerSm);
  const char* small = std::getenv("SLUICE_CUDA_STREAM_SMALL_KB");
  g_stream_small_bytes = (small != nullptr ? std::atoll(small) : kStreamSmallKb) * 1024;
  g_stream_small_grid = 4 * sms;
  g_sms = sms;
  AllowSmem(GateUpKernel);
  AllowSmem(PrepareKernel);
  AllowSmem(DownKernel<2>);
  AllowSmem(DownKernel<4>);
  AllowSmem(DownKernel<4, 2>);
  AllowSmem(DownKernel<4, 4>);
  AllowSmem(DownKernel<kDownR>);
  AllowSmem(AttendSplitKernel<2, kAttnFewHeads>);
  AllowSmem(AttendSplitKernel<4, kAttnFewHeads>);
  AllowSmem(AttendSplitKernel<8, kAttnFewHeads>);
  AllowSmem(AttendSplitKernel<2, 32>);
  AllowSmem(AttendSplitKernel<4, 16>);
  AllowSmem(AttendSplitKernel<8, 8>);
  if (g_pdl) {  // no large shared memory, but the same carveout as the rest
    AllowSmem(PrepareDownKernel);
    AllowSmem(DeltaPrepKernel);
    AllowSmem(DeltaFusedKernel<1, FusedOne>);
    AllowSmem(DeltaFusedKernel<2, FusedOne>);
    AllowSmem(DeltaFusedKernel<4, FusedOne>);
    AllowSmem(DeltaFusedKernel<1, FusedMany>);
    AllowSmem(DeltaFusedKernel<2, FusedMany>);
    AllowSmem(DeltaFusedKernel<4, FusedMany>);
  }
}

int DecodeMaxCols() { return 16384; }

namespace {

// DecodeProjectKernel's launch of p: row blocks, lanes, 8-bit formats and
// shared bytes; false: no rows.
bool PlanProject(const DecodeProjection& p, ProjectLaunch* out, int64_t* rows_per_block,
                 size_t* smem, int r = kR) {
  ProjectLaunch& a = *out;
  a.p = p;
  a.lanes = 32;
  int blocks = 0;
  for (int i = 0; i < p.n_matrices; ++i) {
    const int L = LanesFor(p.in.n, p.m[i].type);
    a.lanes = i == 0 ? L : (L < a.lanes ? L : a.lanes);
  }
  *rows_per_block = ProjectRowsPerBlock(a.lanes, r);
  for (int i = 0; i < p.n_matrices; ++i) {
    a.block_start[i] = blocks;
    blocks += static_cast<int>((p.m[i].rows + *rows_per_block - 1) / *rows_per_block);
  }
  a.block_start[p.n_matrices] = blocks;
  if (blocks == 0) return false;
  const int64_t probs = p.topk.k > 0 ? p.m[0].rows : 0;
  int types[kMaxDecodeMatrices];
  for (int i = 0; i < p.n_matrices; ++i) types[i] = p.m[i].type;
  a.q8 = Q8Formats(types, p.n_matrices, p.in.n);
  const DecodeQ8& pre = p.in.prepared;
  a.prepared = pre.q8 != nullptr && p.in.norm_w == nullptr && p.in.add == nullptr && a.q8 != 0 &&
               (a.q8 & ~pre.formats) == 0;
  a.float_mask = 0;
  for (int i = 0; i < p.n_matrices; ++i) {
    if (Q8FormatOf(types[i], p.in.n) == 0) a.float_mask |= 1u << i;
  }
  *smem = a.q8 != 0 ? Q8Offset(PaddedFloats(p.in.n) + probs) * sizeof(float) +
                          Q8Bytes(a.q8, p.in.n)
                    : (PaddedFloats(p.in.n) + probs) * sizeof(float);
  return true;
}

// Whether an unstreamed launch of too few row blocks takes one row a lane
// group (on unless SLUICE_CUDA_PROJECT_ONE_ROW is "0"; read at every call,
// as StreamingOn, so a test can compare both).
bool ProjectOneRow() {
  const char* env = std::getenv("SLUICE_CUDA_PROJECT_ONE_ROW");
  return !(env != nullptr && std::string(env) == "0");
}

bool StreamingOn() {
  const char* env = std::getenv("SLUICE_CUDA_STREAM_PROJECT");
  return !(env != nullptr && std::string(env) == "0") && g_stream_grid != 0;
}

// Tiles a streamed entries launch of dense groups should reach before its
// rounds take fewer entries each (StreamEntriesPerRound):
// kEntryTilesPerSm blocks an SM, or SLUICE_CUDA_ENTRY_TILES_PER_SM (0:
// always kTileEntries; read at every call, so a test can compare them).
constexpr int kEntryTilesPerSm = 2;
int64_t EntryTilesTarget() {
  const char* env = std::getenv("SLUICE_CUDA_ENTRY_TILES_PER_SM");
  const int64_t per_sm = env != nullptr ? std::atoll(env) : kEntryTilesPerSm;
  return per_sm * g_sms;
}

// Whether the streamed entries kernel sums its rounds' lanes scattered
// (StreamGroups::scatter): on unless SLUICE_CUDA_SCATTER_SUMS is "0", read
// once (an A/B between processes; no test switches it).
bool ScatteredSumsOn() {
  static const bool on = [] {
    const char* env = std::getenv("SLUICE_CUDA_SCATTER_SUMS");
    return env == nullptr || std::string_view(env) != "0";
  }();
  return on;
}

// Stages of `tile` bytes after `vec_bytes`: 4 or 3 within
// kStreamSmemPerBlock, else 0.
int PlanStages(int64_t rows_per_tile, int64_t vec_bytes, int64_t tile, StreamStages* st) {
  st->rows_per_tile = static_cast<int>(rows_per_tile);
  st->vec_bytes = (vec_bytes + 127) / 128 * 128;
  st->stage_bytes = tile;
  auto stages_within = [&](int64_t bytes) {
    for (int stages = 4; stages >= 3; --stages) {
      if (st->vec_bytes + stages * tile <= bytes) return stages;
    }
    return 0;
  };
  if (const int small = stages_within(g_stream_small_bytes); small != 0) {
    st->grid = g_stream_small_grid;
    return small;
  }
  st->grid = g_stream_grid;
  return stages_within(kStreamSmemPerBlock);
}

// Launches the 4- or 3-stage instance of a streamed kernel over at most
// g_stream_grid blocks, with its stages' shared memory.
template <class Args>
void LaunchStreamed(void (*k4)(Args), void (*k3)(Args), int stages, int tiles,
                    const StreamStages& st, const Args& args, Stream stream) {
  const int grid = tiles < st.grid ? tiles : st.grid;
  const size_t smem = st.vec_bytes + stages * st.stage_bytes;
  Launch(stages == 4 ? k4 : k3, grid, kProjThreads, smem, stream, args);
}

// The streamed launch of a's products (StreamProjectKernel), in *s with its
// stage count, when every matrix takes the 8-bit path, its tiles fit the
// stages (rows a multiple of 16 bytes) and SLUICE_CUDA_STREAM_PROJECT is not
// "0" (read at every call, so a test can compare both kernels); 0: not
// streamed.
int PlanStream(const ProjectLaunch& a, int64_t rows_per_tile, int64_t vec_bytes,
               StreamLaunch* s) {
  if (!StreamingOn()) return 0;
  s->a = a;
  int64_t tile = 0;
  for (int i = 0; i < a.p.n_matrices; ++i) {
    const DecodeMatrix& m = a.p.m[i];
    const int64_t rb = RowBytesOf(m.type, a.p.in.n);
    if (Q8FormatOf(m.type, a.p.in.n) == 0 || rb % 16 != 0) return 0;
    const int64_t bytes = rows_per_tile * rb * (m.up != nullptr ? 2 : 1);
    if (bytes > tile) tile = bytes;
  }
  return PlanStages(rows_per_tile, vec_bytes, tile, &s->st);
}

}  // namespace

void DecodeProject(const DecodeProjection& p, Stream stream) {
  ProjectLaunch a;
  int64_t rows_per_block = 0;
  size_t smem = 0;
  if (!PlanProject(p, &a, &rows_per_block, &smem)) return;
  const int blocks = a.block_start[p.n_matrices];
  StreamLaunch s;
  const int stages = PlanStream(a, rows_per_block, static_cast<int64_t>(smem), &s);
  if (stages == 0) {
    // Too few row blocks to fill the GPU twice over (bench35's route launch:
    // an F32 router, which is not streamed, beside the shared pair, 97 blocks
    // of 4 warps on 132 SMs): rows of one lane group a block, twice the
    // blocks (SLUICE_CUDA_PROJECT_ONE_ROW=0 turns it off). H100, run 18:
    // bench35's route launches 145.8 -> 128.1 us a step.
    if (blocks < g_stream_grid && ProjectOneRow()) {
      PlanProject(p, &a, &rows_per_block, &smem, 1);
      Launch(DecodeProjectKernel<1>, a.block_start[p.n_matrices], kProjThreads, smem, stream, a);
      return;
    }
    Launch(DecodeProjectKernel<kR>, blocks, kProjThreads, smem, stream, a);
    return;
  }
  LaunchStreamed(StreamProjectKernel<4>, StreamProjectKernel<3>, stages, blocks, s.st, s, stream);
}

bool DecodeProjectStreamed(const DecodeProjection& p) {
  ProjectLaunch a;
  int64_t rows_per_block = 0;
  size_t smem = 0;
  if (!PlanProject(p, &a, &rows_per_block, &smem)) return false;
  StreamLaunch s;
  return PlanStream(a, rows_per_block, static_cast<int64_t>(smem), &s) != 0;
}

bool DecodeExpertsSupported(int k, bool shared, int64_t ff, int64_t n_embd) {
  const int items = k + (shared ? 1 : 0);
  // The float path's rows (the 8-bit ones, when they do not fit as well,
  // give way to it: DecodeExpertsDown).
  const int64_t smem = (items * PaddedFloats(ff) + items * 32 * kDownR) * 4;
  return k > 0 && items <= kMaxDownItems && n_embd <= DecodeMaxCols() &&
         smem <= kMaxDynamicSmem;
}

namespace {

constexpr int64_t kGateUpQuantizesFromFf = 1024;

// The 8-bit formats the down launch reads when every item's down type has
// an 8-bit product (and the shared expert's rows are as wide as the routed
// ones); 0 otherwise.
int DownFormats(const DecodeExperts& e) {
  const bool shared = e.shared_ff > 0;
  if (Q8FormatOf(e.down_type, e.ff) == 0 ||
      (shared && (e.shared_ff != e.ff || Q8FormatOf(e.shared_down_type, e.ff) == 0))) {
    return 0;
  }
  const int types[2] = {e.down_type, shared ? e.shared_down_type : e.down_type};
  return Q8Formats(types, 2, e.ff);
}

// Whether the streamed gate/up launch quantizes the down launch's rows of
// ff: SLUICE_CUDA_GATE_UP_Q8 "1" always, "0" never (read at every call, as
// StreamingOn, so a test can compare both), else from 1,024 rows. H100, run
// 19: bench397 (ff 1,024) decoded 704 tok/s with it against 640 without;
// bench35 (ff 512) 1,319 against 1,332 (its gate/up launches took 151.8 us
// a step against 120.9, its down launches 120.0 against 139.5): the down
// launch's redundant quantizing, which this saves, grows with ff, the count
// and the last block's quantizing it costs hardly at all.
// Environment variable `name` read now: "1" true, "0" false, else
// `otherwise` (a default a test can override either way).
bool EnvForcedOr(const char* name, bool otherwise) {
  const char* env = std::getenv(name);
  if (env != nullptr && std::string(env) == "1") return true;
  if (env != nullptr && std::string(env) == "0") return false;
  return otherwise;
}

bool GateUpQuantizesOn(int64_t ff) {
  return EnvForcedOr("SLUICE_CUDA_GATE_UP_Q8", ff >= kGateUpQuantizesFromFf);
}

// GateUpKernel's launch of e (lanes, row blocks, 8-bit formats, shared
// bytes) and, when gate and up share a type with an 8-bit product whose
// rows are a multiple of 16 bytes and the stages fit, the streamed one in
// *s: its stage count (0: not streamed).
int PlanGateUp(const DecodeExperts& e, StreamExperts* s, size_t* smem) {
  const int L = LanesFor(e.n_embd, e.gate_type) < LanesFor(e.n_embd, e.up_type)
                    ? LanesFor(e.n_embd, e.gate_type)
                    : LanesFor(e.n_embd, e.up_type);
  const int64_t rows_per_block = ProjectRowsPerBlock(L);
  s->e = e;
  s->lanes = L;
  s->row_blocks = static_cast<int>((e.ff + rows_per_block - 1) / rows_per_block);
  s->by_row_blocks = FastDiv::Of(static_cast<uint32_t>(s->row_blocks));
  const int types[2] = {e.gate_type, e.up_type};
  s->q8 = Q8Formats(types, 2, e.n_embd);
  s->prepared = e.xn_q8.q8 != nullptr && Q8FormatOf(e.gate_type, e.n_embd) != 0 &&
                Q8FormatOf(e.up_type, e.n_embd) != 0 && (s->q8 & ~e.xn_q8.formats) == 0;
  *smem = s->q8 != 0 ? Q8Offset(PaddedFloats(e.n_embd)) * sizeof(float) + Q8Bytes(s->q8, e.n_embd)
                     : PaddedFloats(e.n_embd) * sizeof(float);
  s->quantize_down = 0;
  const int64_t rb = RowBytesOf(e.gate_type, e.n_embd);
  if (!StreamingOn() || e.gate_type != e.up_type || Q8FormatOf(e.gate_type, e.n_embd) == 0 ||
      rb % 16 != 0) {
    return 0;
  }
  const int stages =
      PlanStages(rows_per_block, static_cast<int64_t>(*smem), 2 * rows_per_block * rb, &s->st);
  if (stages != 0 && GateUpQuantizesOn(e.ff) && e.h_counters != nullptr && e.h_q8.q8 != nullptr &&
      e.h_q8.formats == DownFormats(e)) {
    s->quantize_down = e.h_q8.formats;
  }
  return stages;
}

}  // namespace

bool DecodeExpertsGateUpStreamed(const DecodeExperts& e) {
  StreamExperts s;
  size_t smem = 0;
  return PlanGateUp(e, &s, &smem) != 0;
}

int DecodeExpertsDownFormats(const DecodeExperts& e) { return DownFormats(e); }

bool DecodeExpertsSharedApart(const DecodeExperts& e) {
  return e.shared_ff > 0 &&
         EnvForcedOr("SLUICE_CUDA_SHARED_APART", RowBytesOf(e.shared_down_type, e.shared_ff) >=
                                                     2 * RowBytesOf(e.down_type, e.ff));
}

bool DecodeExpertsGateUpQuantizes(const DecodeExperts& e) {
  StreamExperts s;
  size_t smem = 0;
  return PlanGateUp(e, &s, &smem) != 0 && s.quantize_down != 0;
}

void DecodeExpertsGateUp(const DecodeExperts& e, Stream stream) {
  StreamExperts s;
  size_t smem = 0;
  const int stages = PlanGateUp(e, &s, &smem);
  const int tiles = s.row_blocks * e.k;
  if (stages == 0) {
    Launch(GateUpKernel, DecodeBlocks(tiles), kProjThreads, smem, stream, e, s.lanes,
           s.row_blocks, s.q8, s.prepared);
    return;
  }
  LaunchStreamed(StreamGateUpKernel<4>, StreamGateUpKernel<3>, stages, tiles, s.st, s, stream);
}

namespace internal {

bool StreamGroupedQ8(const RawGroupedMatMul& g, int lanes, int min_chunks_per_lane,
                     Stream stream) {
  StreamGroups s;
  s.g = g;
  s.lanes = lanes;
  s.q8 = Q8FormatOf(g.type, g.cols);
  const bool entries = HasSeveralEntries(g);
  const int L = lanes;
  const int64_t rows_per_tile = ProjectRowsPerBlock(L);
  // A tile is copied in 16-byte pieces: its bytes, and the last tile's,
  // multiples of 16 (rows of 420 or 72 bytes make whole tiles of 16 rows).
  const int64_t rb = static_cast<int64_t>(g.row_bytes);
  if (!StreamingOn() || s.q8 == 0 || g.x_q8 == nullptr || rows_per_tile * rb % 16 != 0 ||
      g.rows % rows_per_tile * rb % 16 != 0 || g.n_groups <= 0 || g.rows <= 0 ||
      (L != 8 && L != 16 && L != 32) ||
      g.cols / ChunkOf(g.type) < static_cast<int64_t>(min_chunks_per_lane) * L) {
    return false;
  }
  s.row_blocks = static_cast<int>((g.rows + rows_per_tile - 1) / rows_per_tile);
  s.by_row_blocks = FastDiv::Of(static_cast<uint32_t>(s.row_blocks));
  s.run = entries ? StreamEntriesPerRound(g, s.row_blocks, EntryTilesTarget()) : kTileEntries;
  s.rounds = entries && g.group_begin == nullptr
                 ? static_cast<int>((g.max_entries_per_group + s.run - 1) / s.run)
                 : 1;
  s.by_rounds = FastDiv::Of(static_cast<uint32_t>(s.rounds));
  s.by_group_tiles = FastDiv::Of(static_cast<uint32_t>(s.row_blocks * s.rounds));
  s.scatter = ScatteredSumsOn() ? 1 : 0;
  // A pair stages both matrices' rows of a tile: entries launches only.
  const int halves = g.up_offset != 0 ? 2 : 1;
  if (halves == 2 && (!entries || g.weights == nullptr || g.y_up == nullptr)) return false;
  const int stages = PlanStages(rows_per_tile, 0, halves * rows_per_tile * rb, &s.st);
  if (stages == 0) return false;
  const int tiles = s.row_blocks * s.rounds * g.n_groups;
  if (entries) {
    LaunchStreamed(StreamGroupsKernel<4, true>, StreamGroupsKernel<3, true>, stages, tiles, s.st,
                   s, stream);
  } else {
    LaunchStreamed(StreamGroupsKernel<4, false>, StreamGroupsKernel<3, false>, stages, tiles,
                   s.st, s, stream);
  }
  return true;
}

}  // namespace internal

namespace {

// Rows per lane group of the down launch: 4, or SLUICE_CUDA_DOWN_ROWS (2, 4
// or 8; read at every call, so a test can compare them). H100, run 18:
// bench35's down launches took 140.5 us a step at 4 (two blocks an SM),
// 148.6 at 2, 158.5 at 8 (one block an SM); preparing the hidden rows once
// (SLUICE_CUDA_PREPARE=8) made the step slower at 2 and at 4.
constexpr int kDownRowsDefault = 4;
int DownRows() {
  const char* env = std::getenv("SLUICE_CUDA_DOWN_ROWS");
  const int r = env != nullptr ? std::atoi(env) : kDownRowsDefault;
  return r == 2 || r == 4 || r == 8 ? r : kDownRowsDefault;
}

// Passes of R rows per lane group a down block takes (1, 2 or 4; R = 4
// only): SLUICE_CUDA_DOWN_PASSES (read at every call, so a test can compare
// them; other values round down), else as many as bring the grid nearest
// to one wave of resident blocks (`blocks`: the grid at one pass):
// bench397's 1,024 blocks to 256 (4 passes), bench35's 256 stay. H100, run
// 23, bench397's down launches a step: 373.1 us at 1 pass, 355.2 at 2,
// 332.2 at 4, 576.7 at 8; bench35's 177.3 at 1, 193.9 at 2.
int DownPasses(int64_t blocks) {
  const char* env = std::getenv("SLUICE_CUDA_DOWN_PASSES");
  int64_t p = 1;
  if (env != nullptr) {
    p = std::atoi(env);
  } else if (g_resident_blocks > 0) {
    p = (blocks + g_resident_blocks / 2) / g_resident_blocks;
  }
  return p >= 4 ? 4 : (p >= 2 ? 2 : 1);
}

}  // namespace

void DecodeExpertsDown(const DecodeExperts& e, Stream stream) {
  const bool shared_warp = e.shared_ff > 0 && e.shared_y == nullptr;
  int L = LanesFor(e.ff, e.down_type);
  if (shared_warp && LanesFor(e.ff, e.shared_down_type) < L) L = LanesFor(e.ff, e.shared_down_type);
  const int R = DownRows();
  // Passes with 4 rows a lane group only; at most DecodeExpertsSupported's
  // rows a block (32 * kDownR: 4 passes of 4 rows at any L).
  const int passes = R == 4 ? DownPasses((e.n_embd + (32 / L) * R - 1) / ((32 / L) * R)) : 1;
  const int rows_per_block = (32 / L) * R * passes;
  const int items = e.k + (shared_warp ? 1 : 0);
  const int types[2] = {e.down_type, shared_warp ? e.shared_down_type : e.down_type};
  // Shared memory: the partial sums, the float rows where a warp's type
  // has no 8-bit product (or on the float path), then the 8-bit vectors.
  const int64_t floats = items * rows_per_block + items * PaddedFloats(e.ff);
  const int formats = Q8Formats(types, 2, e.ff);
  const int float_warps = (Q8FormatOf(e.down_type, e.ff) == 0 ? 1 : 0) |
                          (shared_warp && Q8FormatOf(e.shared_down_type, e.ff) == 0 ? 2 : 0);
  const size_t q8_smem =
      Q8Offset(float_warps != 0 ? floats : items * rows_per_block) * sizeof(float) +
      items * Q8Bytes(formats, e.ff);
  const int q8 = q8_smem <= static_cast<size_t>(kMaxDynamicSmem) ? formats : 0;
  const size_t smem = q8 != 0 ? q8_smem : floats * sizeof(float);
  const unsigned blocks = static_cast<unsigned>((e.n_embd + rows_per_block - 1) / rows_per_block);
  const int prepared =
      e.h_q8.q8 != nullptr && DownFormats(e) != 0 && (formats & ~e.h_q8.formats) == 0;
  auto* kernel = R == 2 ? DownKernel<2> : (R == 8 ? DownKernel<kDownR> : DownKernel<4>);
  if (passes == 2) kernel = DownKernel<4, 2>;
  if (passes == 4) kernel = DownKernel<4, 4>;
  Launch(kernel, blocks, 32 * items, smem, stream, e, L, q8, prepared, float_warps);
}

int DecodeQ8Formats(const int* types, int n_types, int64_t n) { return Q8Formats(types, n_types, n); }

int64_t DecodeQ8Bytes(int formats, int64_t n, int rows) { return rows * Q8Bytes(formats, n); }

int64_t DecodeQ8MaxBytes(int64_t n, int rows) {
  return rows * Q8Bytes(kFormatQ8K | kFormatQ8Z, n);
}

void DecodePrepare(const DecodeInput& in, uint8_t* q8, int formats, Stream stream) {
  Launch(PrepareKernel, 1, kProjThreads, PaddedFloats(in.n) * sizeof(float), stream, in, q8,
         formats);
}

void DecodeExpertsPrepareDown(const DecodeExperts& e, uint8_t* q8, int formats, Stream stream) {
  // A thread a chunk of 16 (one round), at most 512.
  const int64_t chunks = (e.k + (e.shared_ff > 0 ? 1 : 0)) * e.ff / 16;
  const int threads = static_cast<int>(std::min<int64_t>(512, (chunks + 31) / 32 * 32));
  Launch(PrepareDownKernel, 1, threads, 0, stream, e, q8, formats);
}

void DeltaNetDecodePrep(const DeltaNetShape& s, float* beta, float* alpha_g, const float* dt_bias,
                        const float* a, const float* conv_kernel, float* qkv, float* conv_state,
                        Stream stream) {
  const int blocks = 2 * s.n_k_heads + s.n_v_heads + 1;
  const int threads = ((s.state_size + 31) / 32) * 32;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(s.state_size));
  Launch(DeltaPrepKernel, blocks, threads < 32 ? 32 : threads, 0, stream, s, beta, alpha_g,
         dt_bias, a, conv_kernel, qkv, conv_state, q_scale);
}

namespace {

// Blocks per v head of DeltaFusedKernel: 4, or fewer where the k head's v
// heads times 4 exceed the cluster limit; 0: not fused.
int FusedParts(const DeltaNetShape& s) {
  if (s.state_size != kFusedS || s.n_k_heads <= 0 || s.n_v_heads % s.n_k_heads != 0 ||
      s.conv_kernel < 1 || s.conv_kernel > kDeltaNetMaxConvTaps) {
    return 0;
  }
  const int ratio = s.n_v_heads / s.n_k_heads;
  for (int p = 4; p >= 1; p /= 2) {
    if (ratio * p <= kFusedCluster) return p;
  }
  return 0;
}

bool ClusterLaunchOn() {
  static const bool on = [] {
    int device = 0, major = 0, cluster = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&cluster, cudaDevAttrClusterLaunch, device);
    return major >= 9 && cluster != 0;
  }();
  return on;
}

}  // namespace

bool DeltaNetDecodeFusedSupports(const DeltaNetShape& s) {
  const char* env = std::getenv("SLUICE_CUDA_DELTA_FUSED");
  if (env != nullptr && std::string(env) == "0") return false;
  return FusedParts(s) != 0 && ClusterLaunchOn();
}

namespace {

template <typename Seqs>
void LaunchDeltaFused(const DeltaNetShape& s, const float* qkv, const float* beta,
                      const float* alpha, const float* dt_bias, const float* a,
                      const float* conv_kernel, const float* z, const float* norm, Seqs seqs,
                      int n_seqs, float* o, Stream stream) {
  const int P = FusedParts(s);
  const int cluster = s.n_v_heads / s.n_k_heads * P;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(s.state_size));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(s.n_k_heads * cluster), static_cast<unsigned>(n_seqs));
  config.blockDim = dim3(static_cast<unsigned>(512 / P));
  config.stream = stream;
  cudaLaunchAttribute attr[2];
  SetLaunchAttributes(&config, attr, cluster);
  auto launch = [&](auto kernel) {
    cudaLaunchKernelEx(&config, kernel, s, qkv, beta, alpha, dt_bias, a, conv_kernel, z, norm,
                       seqs, o, q_scale);
  };
  if (P == 4) {
    launch(DeltaFusedKernel<4, Seqs>);
  } else if (P == 2) {
    launch(DeltaFusedKernel<2, Seqs>);
  } else {
    launch(DeltaFusedKernel<1, Seqs>);
  }
}

}  // namespace

void DeltaNetDecodeFused(const DeltaNetShape& s, const float* qkv, const float* beta,
                         const float* alpha, const float* dt_bias, const float* a,
                         const float* conv_kernel, const float* z, const float* norm,
                         float* conv_state, float* ssm, float* o, Stream stream) {
  LaunchDeltaFused(s, qkv, beta, alpha, dt_bias, a, conv_kernel, z, norm,
                   FusedOne{conv_state, ssm}, 1, o, stream);
}

void DeltaNetDecodeFusedSeqs(const DeltaNetShape& s, const float* qkv, const float* beta,
                             const float* alpha, const float* dt_bias, const float* a,
                             const float* conv_kernel, const float* z, const float* norm,
                             const SeqBatch& b, float* o, Stream stream) {
  if (b.n_seqs <= 0) return;
  LaunchDeltaFused(s, qkv, beta, alpha, dt_bias, a, conv_kernel, z, norm, FusedMany{b},
                   b.n_seqs, o, stream);
}

bool AttendDecodeSupports(const AttentionShape& s) {
  return (s.head_dim == 64 || s.head_dim == 128 || s.head_dim == 256) && s.n_head_kv > 0 &&
         s.n_head % s.n_head_kv == 0;
}

int AttendDecodeSplits(const AttentionShape& s) {
  // About two blocks per multiprocessor at the full context, never fewer
  // than ~32 keys a block (4 a warp).
  const int blocks_per_split = s.n_head_kv * HeadChunks(s);
  int splits = 264 / (blocks_per_split > 0 ? blocks_per_split : 1);
  if (splits > kAttendDecodeMaxSplits) splits = kAttendDecodeMaxSplits;
  const int by_keys = (s.kv_capacity + 31) / 32;
  if (by_keys < splits) splits = by_keys;
  return splits < 1 ? 1 : splits;
}

int64_t AttendDecodeScratchFloats(const AttentionShape& s) {
  return static_cast<int64_t>(s.n_head) * AttendDecodeSplits(s) * (s.head_dim + 2);
}

int AttendDecodeCounters(const AttentionShape& s) { return s.n_head_kv * HeadChunks(s); }

void AttendDecode(const AttentionShape& s, const float* q, const float* k_cache,
                  const float* v_cache, const int32_t* d_pos0, float* scratch, int32_t* counters,
                  float* o, Stream stream) {
  const dim3 grid(s.n_head_kv, AttendDecodeSplits(s), HeadChunks(s));
  const int hb = HeadsPerBlock(s);
  const size_t smem = AttendSmem(s);
  const bool few = AttendRegHeads(s) == kAttnFewHeads;
  auto launch = [&](auto kernel) {
    Launch(kernel, grid, kAttnThreads, smem, stream, s, q, k_cache, v_cache, d_pos0, scratch,
           counters, o, hb);
  };
  switch (s.head_dim / 32) {
    case 2:
      few ? launch(AttendSplitKernel<2, kAttnFewHeads>) : launch(AttendSplitKernel<2, 32>);
      break;
    case 4:
      few ? launch(AttendSplitKernel<4, kAttnFewHeads>) : launch(AttendSplitKernel<4, 16>);
      break;
    default:
      few ? launch(AttendSplitKernel<8, kAttnFewHeads>) : launch(AttendSplitKernel<8, 8>);
      break;
  }
}

}  // namespace sluice::cuda
