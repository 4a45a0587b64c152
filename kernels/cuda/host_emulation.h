// Just enough of CUDA's built-ins for g++ to run quant_matmul_kernel.h on the
// CPU (testonly): a warp is 32 fibers (ucontext) that meet at each shuffle,
// so the kernel's own indexing, tiling and reduction are what run. An exit
// that is not warp-uniform aborts (on a GPU it is undefined).
// Include this before any kernels/cuda device header.
//
// Only the built-ins those kernels use are here; memory is host memory and
// warps of a grid run one after another.
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
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(n)

struct uint2 { uint32_t x, y; };
struct uint4 { uint32_t x, y, z, w; };
struct float4 { float x, y, z, w; };
struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct __half { unsigned short bits; };

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
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t bytes = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) r |= ((bytes >> (8 * ((s >> (4 * k)) & 7))) & 0xFF) << (8 * k);
  return r;
}
inline __half __ushort_as_half(unsigned short u) { return {u}; }
inline float __half2float(__half h) { return sluice::kernels::Fp16ToF32(h.bits); }
// Rounded, never fused: volatile keeps the compiler from contracting.
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fsub_rn(float a, float b) {
  volatile float r = a - b;
  return r;
}

inline dim3 blockIdx, threadIdx, blockDim;

namespace sluice::cuda::emulation {

// The 32 lanes of the running warp, as cooperative fibers: a lane runs until
// it reaches a shuffle (or returns), then the next lane runs. A shuffle
// completes once all 32 lanes have posted their value; slots alternate
// between two buffers so a lane that moves on cannot overwrite a value
// another lane has yet to read.
struct Warp {
  ucontext_t scheduler;
  ucontext_t lane_ctx[32];
  std::vector<char> stacks[32];
  bool done[32] = {};
  float slot[2][32];
  int phase[32] = {};  // shuffles each lane has posted
  unsigned block_x = 0, block_y = 0, block_z = 0, warp = 0;
  const std::function<void()>* kernel = nullptr;
  int running = 0;
};
inline Warp* current_warp = nullptr;

inline void SetLaneIndices(const Warp& w, int lane) {
  blockIdx = {w.block_x, w.block_y, w.block_z};
  threadIdx = {32 * w.warp + static_cast<unsigned>(lane), 0, 0};
}

inline void LaneMain(int lane) {
  Warp& w = *current_warp;
  (*w.kernel)();
  w.done[lane] = true;
  swapcontext(&w.lane_ctx[lane], &w.scheduler);
}

// Runs one warp to completion. Aborts if its lanes disagree on the number
// of shuffles (an exit that is not warp-uniform: undefined on a GPU).
inline void RunWarp(Warp& w) {
  for (int l = 0; l < 32; ++l) {
    w.done[l] = false;
    w.phase[l] = 0;
    if (w.stacks[l].empty()) w.stacks[l].resize(256 << 10);
    getcontext(&w.lane_ctx[l]);
    w.lane_ctx[l].uc_stack.ss_sp = w.stacks[l].data();
    w.lane_ctx[l].uc_stack.ss_size = w.stacks[l].size();
    w.lane_ctx[l].uc_link = nullptr;
    makecontext(&w.lane_ctx[l], reinterpret_cast<void (*)()>(&LaneMain), 1, l);
  }
  for (;;) {
    int n_done = 0;
    for (int l = 0; l < 32; ++l) {
      if (w.done[l]) continue;
      w.running = l;
      SetLaneIndices(w, l);
      swapcontext(&w.scheduler, &w.lane_ctx[l]);
    }
    for (int l = 0; l < 32; ++l) n_done += w.done[l];
    if (n_done == 32) return;
    if (n_done != 0) {
      std::fprintf(stderr, "host_emulation: %d lanes returned while %d wait at a shuffle\n",
                   n_done, 32 - n_done);
      std::abort();
    }
  }
}

}  // namespace sluice::cuda::emulation

inline float __shfl_xor_sync(unsigned /*mask: always the full warp here*/, float v, int offset) {
  auto& w = *sluice::cuda::emulation::current_warp;
  const int lane = w.running;
  const int buf = w.phase[lane]++ & 1;
  w.slot[buf][lane] = v;
  swapcontext(&w.lane_ctx[lane], &w.scheduler);  // resumes once every lane posted
  return w.slot[buf][lane ^ offset];
}

namespace sluice::cuda::emulation {

// Runs `kernel` for every thread of a grid of `threads`-wide blocks (a
// multiple of 32), one warp at a time.
inline void Launch(dim3 grid, unsigned threads, const std::function<void()>& kernel) {
  Warp warp;
  current_warp = &warp;
  warp.kernel = &kernel;
  blockDim = {threads, 1, 1};
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        for (unsigned w = 0; w < threads / 32; ++w) {
          warp.block_x = x;
          warp.block_y = y;
          warp.block_z = z;
          warp.warp = w;
          RunWarp(warp);
        }
      }
    }
  }
  current_warp = nullptr;
}

}  // namespace sluice::cuda::emulation

#endif  // SLUICE_KERNELS_CUDA_HOST_EMULATION_H_
