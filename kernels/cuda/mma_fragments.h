// The pieces of mma.sync m16n8k16 that the tensor-core kernels share
// (quant_matmul_mma_kernel.h, mla_mma_device.h): the products for BF16 and
// half inputs, where each accumulator of a lane sits, and the shared-memory
// stores of two and four words. Device code that g++ also compiles through
// host_emulation.h (include that first there), which computes mma.sync
// from the 32 lanes' registers.
#ifndef SLUICE_KERNELS_CUDA_MMA_FRAGMENTS_H_
#define SLUICE_KERNELS_CUDA_MMA_FRAGMENTS_H_

#include <cstdint>

namespace sluice::cuda::internal {

// acc += A * B for one m16n8k16 tile: A 16x16 row-major and B 16x8
// column-major in the lane fragments of the PTX ISA ("Matrix Fragments for
// mma.m16n8k16 with floating point type"): with g = lane / 4, t = lane % 4,
//   a[0] = A[g][2t..2t+1]   a[1] = A[g+8][2t..2t+1]
//   a[2] = A[g][2t+8..+9]   a[3] = A[g+8][2t+8..+9]
//   b[0] = B[2t..2t+1][g]   b[1] = B[2t+8..2t+9][g]
//   acc  = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]
// (the lower k of each pair in the low 16 bits).
__device__ __forceinline__ void MmaBf16(float (&acc)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2]) {
#if defined(__CUDACC__)
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  emulation::MmaM16N8K16Bf16(acc, a, b);
#endif
}

// acc += A * B as MmaBf16, of half inputs.
__device__ __forceinline__ void MmaF16(float (&acc)[4], const uint32_t (&a)[4],
                                       const uint32_t (&b)[2]) {
#if defined(__CUDACC__)
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  emulation::MmaM16N8K16F16(acc, a, b);
#endif
}

// acc += A * B for one m16n8k32 tile of signed bytes, exact in 32-bit
// integers: A 16x32 row-major and B 32x8 column-major, each register four
// consecutive k (the lowest in its low byte), with g = lane / 4, t = lane % 4:
//   a[0] = A[g][4t..4t+3]     a[1] = A[g+8][4t..4t+3]
//   a[2] = A[g][16+4t..+3]    a[3] = A[g+8][16+4t..+3]
//   b[0] = B[4t..4t+3][g]     b[1] = B[16+4t..+3][g]
//   acc  = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]
__device__ __forceinline__ void MmaS8(int32_t (&acc)[4], const uint32_t (&a)[4],
                                      const uint32_t (&b)[2]) {
#if defined(__CUDACC__)
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  emulation::MmaM16N8K32S8(acc, a, b);
#endif
}

// acc += A * B for one m16n8k16 tile of signed bytes (A 16x16, B 16x8): the
// first half of MmaS8's fragments, a[0] = A[g][4t..4t+3], a[1] =
// A[g+8][4t..4t+3], b = B[4t..4t+3][g]; exact in 32-bit integers.
__device__ __forceinline__ void MmaS8K16(int32_t (&acc)[4], uint32_t a0, uint32_t a1,
                                         uint32_t b) {
#if defined(__CUDACC__)
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 "
      "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(a0), "r"(a1), "r"(b));
#else
  // The k32 shape with zeros in k 16..31 sums the same.
  const uint32_t a[4] = {a0, a1, 0u, 0u}, bb[2] = {b, 0u};
  emulation::MmaM16N8K32S8(acc, a, bb);
#endif
}

// Row (within the m16 tile) and entry (within the n8 tile) of accumulator i.
__device__ __forceinline__ int AccRow(int lane, int i) { return (lane >> 2) + (i >= 2 ? 8 : 0); }
__device__ __forceinline__ int AccCol(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

__device__ __forceinline__ void StoreWords4(uint32_t* p, uint32_t a, uint32_t b, uint32_t c,
                                            uint32_t d) {
#if defined(__CUDACC__)
  *reinterpret_cast<uint4*>(p) = make_uint4(a, b, c, d);  // p is 16-byte aligned
#else
  p[0] = a;
  p[1] = b;
  p[2] = c;
  p[3] = d;
#endif
}

__device__ __forceinline__ void StoreWords2(uint32_t* p, uint32_t a, uint32_t b) {
#if defined(__CUDACC__)
  *reinterpret_cast<uint2*>(p) = make_uint2(a, b);  // p is 8-byte aligned
#else
  p[0] = a;
  p[1] = b;
#endif
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_MMA_FRAGMENTS_H_
