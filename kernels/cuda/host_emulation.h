// Just enough of CUDA's built-ins for g++ to run quant_matmul_kernel.h and
// quant_matmul_mma_kernel.h on the CPU (testonly): every thread of a block is
// a fiber (ucontext); the 32 lanes of a warp meet at each shuffle and MMA,
// the whole block at each __syncthreads, so the kernels' own indexing,
// tiling, fragment layouts and reductions are what run. An exit that is not
// warp-uniform (or a barrier some threads skip) aborts: on a GPU it is
// undefined. Include this before any kernels/cuda device header.
//
// Only the built-ins those kernels use are here; memory is host memory,
// __shared__ arrays are function statics, and the blocks of a grid run one
// after another.
#ifndef SLUICE_KERNELS_CUDA_HOST_EMULATION_H_
#define SLUICE_KERNELS_CUDA_HOST_EMULATION_H_

#if defined(__CUDACC__)
#error "host_emulation.h is for host compilers only"
#endif

#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/cpu/dequant.h"

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
#define __align__(n) alignas(n)

struct uint2 { uint32_t x, y; };
struct uint4 { uint32_t x, y, z, w; };
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct __half { unsigned short bits; };

inline float2 make_float2(float a, float b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
template <typename T>
T __ldg(const T* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
// Result byte k is byte (s >> 4k) & 7 of the pair {x: bytes 0-3, y: 4-7}
// (the sign-replicating mode, bit 3 of each selector, is not used here).
// The low 32 bits of the 64-bit (hi:lo) shifted right by shift & 31.
inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t shift) {
  const uint64_t v = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<uint32_t>(v >> (shift & 31));
}

inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t bytes = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) r |= ((bytes >> (8 * ((s >> (4 * k)) & 7))) & 0xFF) << (8 * k);
  return r;
}
inline __half __ushort_as_half(unsigned short u) { return {u}; }
inline float __half2float(__half h) { return sluice::kernels::Fp16ToF32(h.bits); }
inline __half __float2half_rn(float f) { return {sluice::kernels::F32ToFp16(f)}; }
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return {x, y, z, w}; }
// Rounded, never fused: volatile keeps the compiler from contracting.
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fsub_rn(float a, float b) {
  volatile float r = a - b;
  return r;
}
inline float __fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}

// Four signed byte products added to c (dp4a).
inline int __dp4a(int a, int b, int c) {
  for (int k = 0; k < 4; ++k) {
    c += static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * k)) *
         static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * k));
  }
  return c;
}
// Bytewise a - b, each byte modulo 256.
inline uint32_t __vsub4(uint32_t a, uint32_t b) {
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) r |= (((a >> (8 * k)) - (b >> (8 * k))) & 0xFF) << (8 * k);
  return r;
}
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }

inline dim3 blockIdx, threadIdx, blockDim;

namespace sluice::cuda::emulation {

// The threads of the running block, as cooperative fibers. A thread runs
// until it reaches a warp collective (a shuffle, an MMA), a barrier or its
// end, then the next one runs. A collective completes once all 32 lanes of
// the warp have posted to it: the scheduler then computes every lane's
// result (so a lane that moves on cannot disturb another's inputs). A
// barrier completes once every thread of the block waits at it.
struct LaneSlot {
  enum Kind { kNone, kShuffle, kMma, kMmaS8 } kind = kNone;
  double value = 0.0;  // shuffle: posted value (a float's exactly), then the result
  int offset = 0;
  uint32_t a[4] = {}, b[2] = {};
  float c[4] = {};  // MMA: accumulators in, then D out
  bool f16 = false;  // MMA: half inputs (else BF16)
  int32_t ci[4] = {};  // s8 MMA: accumulators in, then D out
};

struct Block {
  unsigned n_threads = 0;
  ucontext_t scheduler;
  std::vector<ucontext_t> ctx;
  std::vector<std::vector<char>> stacks;
  std::vector<char> done, at_barrier;
  std::vector<LaneSlot> slot;
  unsigned block_x = 0, block_y = 0, block_z = 0;
  const std::function<void()>* kernel = nullptr;
  unsigned running = 0;
};
inline Block* current_block = nullptr;

inline void ThreadMain(int t) {
  Block& b = *current_block;
  (*b.kernel)();
  b.done[t] = 1;
  swapcontext(&b.ctx[t], &b.scheduler);
}

[[noreturn]] inline void Fail(const char* what, unsigned warp) {
  std::fprintf(stderr, "host_emulation: block (%u,%u,%u) warp %u: %s\n",
               current_block->block_x, current_block->block_y, current_block->block_z, warp, what);
  std::abort();
}

// BF16 bits of f, rounded to nearest even (as cvt.rn.bf16x2.f32 does for
// finite values; NaN becomes the canonical quiet NaN).
inline uint32_t Bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFFu;
  return (u + 0x7FFFu + ((u >> 16) & 1)) >> 16;
}
inline float Bf16Value(uint32_t bits) {
  const uint32_t u = (bits & 0xFFFFu) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Row and column of accumulator i of `lane` in an m16n8 tile (C and D of
// every mma shape here): (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
struct AccCell {
  int row, col;
};
inline AccCell CellOf(int lane, int i) {
  return {(lane >> 2) + (i >= 2 ? 8 : 0), 2 * (lane & 3) + (i & 1)};
}

// D = A * B + C of mma.m16n8k16.row.col.f32.bf16.bf16.f32 (.f16.f16 with
// `f16` set) from the 32
// lanes' fragments, laid out as the PTX ISA's "Matrix Fragments for
// mma.m16n8k16 with floating point type" says (g = lane / 4, t = lane % 4;
// each 32-bit register holds the lower-index element in its low half):
//   A: a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g, 2t+8..),
//      a[3] = (g+8, 2t+8..)      B: b[0] = (2t..2t+1, g), b[1] = (2t+8.., g)
//   C/D: c[0] = (g, 2t), c[1] = (g, 2t+1), c[2] = (g+8, 2t), c[3] = (g+8, 2t+1)
// Products are exact in double; each D element is rounded to F32 once.
inline void ResolveMma(LaneSlot* lanes) {
  float A[16][16], B[16][8], C[16][8];
  const bool f16 = lanes[0].f16;
  const auto Value = [f16](uint32_t bits) {
    return f16 ? sluice::kernels::Fp16ToF32(static_cast<uint16_t>(bits & 0xFFFFu))
               : emulation::Bf16Value(bits);
  };
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l & 3;
    const LaneSlot& s = lanes[l];
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = Value(s.a[0] >> (16 * h));
      A[g + 8][2 * t + h] = Value(s.a[1] >> (16 * h));
      A[g][2 * t + 8 + h] = Value(s.a[2] >> (16 * h));
      A[g + 8][2 * t + 8 + h] = Value(s.a[3] >> (16 * h));
      B[2 * t + h][g] = Value(s.b[0] >> (16 * h));
      B[2 * t + 8 + h][g] = Value(s.b[1] >> (16 * h));
    }
    for (int i = 0; i < 4; ++i) C[CellOf(l, i).row][CellOf(l, i).col] = s.c[i];
  }
  for (int l = 0; l < 32; ++l) {
    for (int i = 0; i < 4; ++i) {
      const AccCell p = CellOf(l, i);
      double d = C[p.row][p.col];
      for (int k = 0; k < 16; ++k) d += static_cast<double>(A[p.row][k]) * B[k][p.col];
      lanes[l].c[i] = static_cast<float>(d);
    }
  }
}

// D = A * B + C of mma.m16n8k32.row.col.s32.s8.s8.s32 from the 32 lanes'
// fragments (PTX ISA, "Matrix Fragments for mma.m16n8k32"; g = lane / 4,
// t = lane % 4, byte i of a register is element 4t + i of its run):
//   A: a[0] = (g, 4t..4t+3), a[1] = (g+8, 4t..), a[2] = (g, 16+4t..),
//      a[3] = (g+8, 16+4t..)      B: b[0] = (4t..4t+3, g), b[1] = (16+4t.., g)
//   C/D: as the floating-point shapes. Exact in 32-bit integers (wrapping
// as the hardware's two's complement sums do).
inline void ResolveMmaS8(LaneSlot* lanes) {
  int A[16][32], B[32][8], C[16][8];
  const auto Byte = [](uint32_t w, int i) {
    return static_cast<int>(static_cast<int8_t>(w >> (8 * i)));
  };
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l & 3;
    const LaneSlot& s = lanes[l];
    for (int i = 0; i < 4; ++i) {
      A[g][4 * t + i] = Byte(s.a[0], i);
      A[g + 8][4 * t + i] = Byte(s.a[1], i);
      A[g][16 + 4 * t + i] = Byte(s.a[2], i);
      A[g + 8][16 + 4 * t + i] = Byte(s.a[3], i);
      B[4 * t + i][g] = Byte(s.b[0], i);
      B[16 + 4 * t + i][g] = Byte(s.b[1], i);
    }
    for (int i = 0; i < 4; ++i) C[CellOf(l, i).row][CellOf(l, i).col] = s.ci[i];
  }
  for (int l = 0; l < 32; ++l) {
    for (int i = 0; i < 4; ++i) {
      const AccCell p = CellOf(l, i);
      uint32_t d = static_cast<uint32_t>(C[p.row][p.col]);
      for (int k = 0; k < 32; ++k) d += static_cast<uint32_t>(A[p.row][k] * B[k][p.col]);
      lanes[l].ci[i] = static_cast<int32_t>(d);
    }
  }
}

// Completes the collective all 32 lanes of `warp` wait at, if they do.
// Returns whether it did.
inline bool ResolveWarp(Block& b, unsigned warp) {
  LaneSlot* lanes = &b.slot[32 * warp];
  int waiting = 0, finished = 0;
  for (int l = 0; l < 32; ++l) {
    waiting += lanes[l].kind != LaneSlot::kNone;
    finished += b.done[32 * warp + l];
  }
  if (waiting == 0) return false;
  if (finished != 0) Fail("lanes returned while others wait at a warp collective", warp);
  if (waiting != 32) return false;  // the others are at a barrier or still running
  for (int l = 1; l < 32; ++l) {
    if (lanes[l].kind != lanes[0].kind) Fail("lanes wait at different collectives", warp);
  }
  if (lanes[0].kind == LaneSlot::kShuffle) {
    double posted[32];
    for (int l = 0; l < 32; ++l) posted[l] = lanes[l].value;
    for (int l = 0; l < 32; ++l) lanes[l].value = posted[l ^ lanes[l].offset];
  } else if (lanes[0].kind == LaneSlot::kMmaS8) {
    ResolveMmaS8(lanes);
  } else {
    ResolveMma(lanes);
  }
  for (int l = 0; l < 32; ++l) lanes[l].kind = LaneSlot::kNone;
  return true;
}

// Runs one block to completion. Aborts on a deadlock: lanes of a warp that
// disagree on their collectives, or a barrier some threads never reach.
inline void RunBlock(Block& b) {
  for (unsigned t = 0; t < b.n_threads; ++t) {
    b.done[t] = 0;
    b.at_barrier[t] = 0;
    b.slot[t] = LaneSlot{};
    if (b.stacks[t].empty()) b.stacks[t].resize(256 << 10);
    getcontext(&b.ctx[t]);
    b.ctx[t].uc_stack.ss_sp = b.stacks[t].data();
    b.ctx[t].uc_stack.ss_size = b.stacks[t].size();
    b.ctx[t].uc_link = nullptr;
    makecontext(&b.ctx[t], reinterpret_cast<void (*)()>(&ThreadMain), 1, static_cast<int>(t));
  }
  for (;;) {
    for (unsigned t = 0; t < b.n_threads; ++t) {
      if (b.done[t] || b.at_barrier[t] || b.slot[t].kind != LaneSlot::kNone) continue;
      b.running = t;
      blockIdx = {b.block_x, b.block_y, b.block_z};
      threadIdx = {t, 0, 0};
      swapcontext(&b.scheduler, &b.ctx[t]);
    }
    bool progress = false;
    for (unsigned w = 0; w < b.n_threads / 32; ++w) progress |= ResolveWarp(b, w);
    unsigned n_done = 0, n_barrier = 0;
    for (unsigned t = 0; t < b.n_threads; ++t) {
      n_done += b.done[t];
      n_barrier += b.at_barrier[t];
    }
    if (n_done == b.n_threads) return;
    if (n_barrier != 0 && n_done != 0) Fail("threads returned while others wait at __syncthreads", 0);
    if (n_barrier == b.n_threads) {
      for (unsigned t = 0; t < b.n_threads; ++t) b.at_barrier[t] = 0;
      progress = true;
    }
    if (!progress) Fail("deadlock: no thread can run", 0);
  }
}

// Posts to a warp collective and returns once the scheduler completed it.
inline LaneSlot& WaitCollective(LaneSlot::Kind kind) {
  Block& b = *current_block;
  const unsigned t = b.running;
  b.slot[t].kind = kind;
  swapcontext(&b.ctx[t], &b.scheduler);
  return b.slot[t];
}

inline void MmaM16N8K16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&bf)[2],
                        bool f16) {
  LaneSlot& s = current_block->slot[current_block->running];
  s.f16 = f16;
  std::memcpy(s.a, a, sizeof(s.a));
  std::memcpy(s.b, bf, sizeof(s.b));
  std::memcpy(s.c, acc, sizeof(s.c));
  WaitCollective(LaneSlot::kMma);
  std::memcpy(acc, s.c, sizeof(s.c));
}
inline void MmaM16N8K32S8(int32_t (&acc)[4], const uint32_t (&a)[4], const uint32_t (&bf)[2]) {
  LaneSlot& s = current_block->slot[current_block->running];
  std::memcpy(s.a, a, sizeof(s.a));
  std::memcpy(s.b, bf, sizeof(s.b));
  std::memcpy(s.ci, acc, sizeof(s.ci));
  WaitCollective(LaneSlot::kMmaS8);
  std::memcpy(acc, s.ci, sizeof(s.ci));
}
inline void MmaM16N8K16Bf16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&bf)[2]) {
  MmaM16N8K16(acc, a, bf, false);
}
inline void MmaM16N8K16F16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&bf)[2]) {
  MmaM16N8K16(acc, a, bf, true);
}

}  // namespace sluice::cuda::emulation

inline double __shfl_xor_sync(unsigned /*mask: always the full warp here*/, double v,
                              int offset) {
  auto& s = sluice::cuda::emulation::current_block->slot[sluice::cuda::emulation::current_block->running];
  s.value = v;
  s.offset = offset;
  return sluice::cuda::emulation::WaitCollective(sluice::cuda::emulation::LaneSlot::kShuffle).value;
}
inline float __shfl_xor_sync(unsigned mask, float v, int offset) {
  return static_cast<float>(__shfl_xor_sync(mask, static_cast<double>(v), offset));
}
inline int __shfl_xor_sync(unsigned mask, int v, int offset) {
  return static_cast<int>(__shfl_xor_sync(mask, static_cast<double>(v), offset));
}

// The fibers of a block run one at a time: a plain read-modify-write is
// atomic among them.
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}

inline void __syncthreads() {
  auto& b = *sluice::cuda::emulation::current_block;
  b.at_barrier[b.running] = 1;
  swapcontext(&b.ctx[b.running], &b.scheduler);
}

namespace sluice::cuda::emulation {

// The launch's dynamic shared memory (`extern __shared__` on a GPU): one
// buffer serves every block, since blocks run one after another.
inline uint8_t* DynamicShared() {
  alignas(16) static uint8_t bytes[256 << 10];
  return bytes;
}

// Runs `kernel` for every thread of a grid of `threads`-wide blocks (a
// multiple of 32), one block at a time.
inline void Launch(dim3 grid, unsigned threads, const std::function<void()>& kernel) {
  Block block;
  block.n_threads = threads;
  block.ctx.resize(threads);
  block.stacks.resize(threads);
  block.done.resize(threads);
  block.at_barrier.resize(threads);
  block.slot.resize(threads);
  block.kernel = &kernel;
  current_block = &block;
  blockDim = {threads, 1, 1};
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        block.block_x = x;
        block.block_y = y;
        block.block_z = z;
        RunBlock(block);
      }
    }
  }
  current_block = nullptr;
}

}  // namespace sluice::cuda::emulation

#endif  // SLUICE_KERNELS_CUDA_HOST_EMULATION_H_
