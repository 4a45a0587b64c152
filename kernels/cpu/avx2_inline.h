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

// A Q4_K / Q5_K block's scales as int16 (scale s in lane s of both 128-bit
// halves) and its mins paired for the Q8_K block sums: bsums[2s] and
// bsums[2s + 1] both meet min[s].
struct KBlockScales {
  __m256i scales;
  __m256i mins_pairs;
};

inline KBlockScales LoadKBlockScales(const uint8_t* packed) {
  uint64_t sc8, mn8;
  UnpackKScales(packed, &sc8, &mn8);
  const __m128i mins16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn8)));
  const __m128i sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8)));
  return {_mm256_set_m128i(sc16, sc16),
          _mm256_set_m128i(_mm_unpackhi_epi16(mins16, mins16),
                           _mm_unpacklo_epi16(mins16, mins16))};
}

// The fifth bits of a Q5_K block (qh); zero, and unused, for Q4_K.
template <bool kFiveBit, typename Block>
inline __m256i KHighBits(const Block& b) {
  if constexpr (kFiveBit) {
    return Load256(b.qh);
  } else {
    return _mm256_setzero_si256();
  }
}

// The values of sub-blocks 2p (*lo: low nibbles of qs[32p ..]) and 2p + 1
// (*hi: high nibbles) of a Q4_K / Q5_K block; for Q5_K bits 2p and 2p + 1
// of hbits become bit 4.
template <bool kFiveBit>
inline void UnpackKPair(const uint8_t* qs, __m256i hbits, int p, __m256i* lo, __m256i* hi) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i q = Load256(qs + 32 * p);
  *lo = _mm256_and_si256(q, low4);
  *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
  if constexpr (kFiveBit) {
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * p), one);
    const __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * p + 1), one);
    *lo = _mm256_or_si256(*lo, _mm256_slli_epi16(b0, 4));
    *hi = _mm256_or_si256(*hi, _mm256_slli_epi16(b1, 4));
  }
}

// Q6_K shuffle masks: quarter k of a 128-value half uses scale 2k for its
// first 16 values and 2k + 1 for the rest (int16 lanes of Q6KHalfScales).
inline void Q6KScalePicks(__m256i pick[4]) {
  for (int k = 0; k < 4; ++k) {
    pick[k] = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>((4 * k + 2) | ((4 * k + 3) << 8))),
                               _mm_set1_epi16(static_cast<int16_t>((4 * k) | ((4 * k + 1) << 8))));
  }
}

// The eight int16 scales of half h (sc_all: all 16 scales as int16) in both
// 128-bit halves.
inline __m256i Q6KHalfScales(__m256i sc_all, int h) {
  const __m128i sc_half =
      h == 0 ? _mm256_castsi256_si128(sc_all) : _mm256_extracti128_si256(sc_all, 1);
  return _mm256_set_m128i(sc_half, sc_half);
}

// -32 * sum_g scale[g] * bsums[g]: what storing q + 32 (unsigned for
// maddubs) adds to a Q6_K block's integer sum.
inline __m256i Q6KOffset(const int16_t* bsums, __m256i sc_all) {
  return _mm256_sub_epi32(_mm256_setzero_si256(),
                          _mm256_slli_epi32(_mm256_madd_epi16(Load256(bsums), sc_all), 5));
}

// The low 4 bits of the four quarters of a Q6_K half; ql points at its 64
// low-bit bytes.
inline void Q6KLows(const uint8_t* ql, __m256i lows[4]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i ql0 = Load256(ql);
  const __m256i ql1 = Load256(ql + 32);
  lows[0] = _mm256_and_si256(ql0, low4);
  lows[1] = _mm256_and_si256(ql1, low4);
  lows[2] = _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4);
  lows[3] = _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4);
}

// The values q + 32 of quarter k of a Q6_K half: its low bits (Q6KLows)
// and bits 2k, 2k + 1 of qh (the half's 32 high-bit bytes) as bits 4, 5.
inline __m256i Q6KQuarter(__m256i low, __m256i qh, int k) {
  const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), _mm256_set1_epi8(3));
  return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
}

}  // namespace sluice::kernels::internal::avx2

#endif  // defined(__x86_64__)

#endif  // SLUICE_KERNELS_CPU_AVX2_INLINE_H_
