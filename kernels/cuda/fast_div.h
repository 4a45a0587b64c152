// Division by a divisor fixed for a whole launch, as one high multiply and
// a shift: the decode kernels map a tile index to (matrix, row block) for
// every tile, and a plain integer division there is a ~20-instruction
// sequence (run 17's ncu source counters: 18% of the streamed gate/up
// launch's instructions were such sequences). Host and device; plain C++
// where CUDA is absent (its test runs on the CPU).
#ifndef SLUICE_KERNELS_CUDA_FAST_DIV_H_
#define SLUICE_KERNELS_CUDA_FAST_DIV_H_

#include <cstdint>

#if defined(__CUDACC__)
#define SLUICE_FAST_DIV_HD __host__ __device__
#else
#define SLUICE_FAST_DIV_HD
#endif

namespace sluice::cuda {

// n / d and n % d for 0 <= n < 2^31 and 1 <= d < 2^31. With l the bits of
// d - 1 (d <= 2^l) and p = 31 + l, m = ceil(2^p / d) is below 2^32, and
// n m / 2^p = n / d + n e / (d 2^p) with e = m d - 2^p < d, whose second
// term is below 1 / d for n < 2^31: the floor is n / d's. d = 1 is m = 0.
struct FastDiv {
  uint32_t d = 1;
  uint32_t m = 0;
  int shift = 0;  // p - 32

  static FastDiv Of(uint32_t divisor) {  // host: computed once per launch
    FastDiv f;
    f.d = divisor;
    if (divisor <= 1) return f;
    int l = 0;
    while ((uint64_t{1} << l) < divisor) ++l;
    const int p = 31 + l;
    f.m = static_cast<uint32_t>(((uint64_t{1} << p) + divisor - 1) / divisor);
    f.shift = p - 32;
    return f;
  }
  SLUICE_FAST_DIV_HD uint32_t Div(uint32_t n) const {
    if (m == 0) return n;
#if defined(__CUDA_ARCH__)
    return __umulhi(n, m) >> shift;
#else
    return static_cast<uint32_t>((static_cast<uint64_t>(n) * m) >> 32) >> shift;
#endif
  }
  SLUICE_FAST_DIV_HD uint32_t Mod(uint32_t n) const { return n - Div(n) * d; }
};

}  // namespace sluice::cuda

#undef SLUICE_FAST_DIV_HD

#endif  // SLUICE_KERNELS_CUDA_FAST_DIV_H_
