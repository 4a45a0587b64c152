// Small AVX2 helpers shared by the AVX2 kernel files. Include only from
// files compiled with -mavx2 -mfma -mf16c (the cpu_vec_dot_avx2 library),
// which are reached only after a CPUID check.
#ifndef SLUICE_KERNELS_CPU_AVX2_INLINE_H_
#define SLUICE_KERNELS_CPU_AVX2_INLINE_H_

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace sluice::kernels::internal::avx2 {

// F16C conversion: exact like Fp16ToF32, but inline and one instruction.
inline float H(uint16_t h) { return _cvtsh_ss(h); }

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i Load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Sum of signed products of 32 unsigned bytes `u` (< 128) and signed bytes
// `s`, as 8 int32 lanes.
inline __m256i DotU8I8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// Sum of products of two signed byte vectors (|a| <= 127), as 8 int32 lanes.
inline __m256i DotI8I8(__m256i a, __m256i b) {
  return DotU8I8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// Shuffle index giving element j of sub-block k the byte 4k + j/8.
inline __m256i SpreadMask(int k) {
  const int64_t b = 4 * k;
  auto rep = [](int64_t v) { return static_cast<int64_t>(0x0101010101010101ULL * v); };
  return _mm256_setr_epi64x(rep(b), rep(b + 1), rep(b + 2), rep(b + 3));
}

// The eight 6-bit scales and mins of a Q4_K / Q5_K block (see KScaleMin)
// as bytes 0..7 of two 64-bit words, without branches.
inline void UnpackKScales(const uint8_t* packed, uint64_t* scales, uint64_t* mins) {
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  const uint32_t low6 = 0x3F3F3F3F, low4 = 0x0F0F0F0F, low2 = 0x03030303;
  const uint32_t sc_hi = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);
  const uint32_t mn_hi = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);
  *scales = (u[0] & low6) | (static_cast<uint64_t>(sc_hi) << 32);
  *mins = (u[1] & low6) | (static_cast<uint64_t>(mn_hi) << 32);
}

// Shuffle masks that broadcast int16 lane s of a register to all lanes.
inline __m256i BroadcastLaneMask(int s) {
  return _mm256_set1_epi16(static_cast<int16_t>((2 * s) | ((2 * s + 1) << 8)));
}

}  // namespace sluice::kernels::internal::avx2

#endif  // defined(__x86_64__)

#endif  // SLUICE_KERNELS_CPU_AVX2_INLINE_H_
