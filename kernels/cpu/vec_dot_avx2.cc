// AVX2 + FMA + F16C dot-product kernels. This file alone is compiled with
// -mavx2 -mfma -mf16c; callers reach it only after DetectIsa() saw those
// features, so nothing here runs on an older CPU.
//
// Integer parts are exact (as in the scalar kernels); float accumulation
// runs in 8 lanes and is reduced at the end, so results differ from the
// scalar kernels only by float summation order.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matvec_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sluice::kernels::internal {

#if defined(__x86_64__)
namespace {

// F16C conversion: exact like Fp16ToF32, but inline and one instruction.
inline float H(uint16_t h) { return _cvtsh_ss(h); }

float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Sum of signed products of 32 unsigned bytes `u` (< 128) and signed bytes
// `s`, as 8 int32 lanes.
__m256i DotU8I8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// Sum of products of two signed byte vectors (|a| <= 127), as 8 int32 lanes.
__m256i DotI8I8(__m256i a, __m256i b) {
  return DotU8I8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// F32 weights: one 8-lane accumulator per (row, token); the multi-row
// kernels keep several rows' chains in flight instead, and every kernel sums
// each output identically.
float DotF32(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const float*>(w);
  const auto* y = static_cast<const float*>(a);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
  }
  float sum = HSum(acc);
  for (; i < n; ++i) sum += x[i] * y[i];
  return sum;
}

// kRows rows against kTok activation rows (a + t * act_bytes):
// out[t * out_stride + k].
template <int kRows, int kTok>
void F32Tile(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
             float* out, int64_t out_stride) {
  const float* x[kRows];
#pragma GCC unroll 8
  for (int k = 0; k < kRows; ++k) {
    x[k] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(w) + k * row_bytes);
  }
  const float* y[kTok];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) {
    y[t] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(a) + t * act_bytes);
  }
  __m256 acc[kTok][kRows];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) {
#pragma GCC unroll 8
    for (int k = 0; k < kRows; ++k) acc[t][k] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 yv[kTok];
#pragma GCC unroll 2
    for (int t = 0; t < kTok; ++t) yv[t] = _mm256_loadu_ps(y[t] + i);
#pragma GCC unroll 8
    for (int k = 0; k < kRows; ++k) {
      const __m256 xv = _mm256_loadu_ps(x[k] + i);
#pragma GCC unroll 2
      for (int t = 0; t < kTok; ++t) acc[t][k] = _mm256_fmadd_ps(xv, yv[t], acc[t][k]);
    }
  }
  for (int t = 0; t < kTok; ++t) {
    for (int k = 0; k < kRows; ++k) {
      float sum = HSum(acc[t][k]);
      for (int64_t j = i; j < n; ++j) sum += x[k][j] * y[t][j];
      out[t * out_stride + k] = sum;
    }
  }
}

void DotF32x4(const void* w, int64_t row_bytes, const void* a, int64_t n, float* out) {
  F32Tile<4, 1>(w, row_bytes, a, 0, n, out, 0);
}

// Eight rows: eight independent chains for decode.
void DotF32x8(const void* w, int64_t row_bytes, const void* a, int64_t n, float* out) {
  F32Tile<8, 1>(w, row_bytes, a, 0, n, out, 0);
}

void DotF32x4x2(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
                float* out, int64_t out_stride) {
  F32Tile<4, 2>(w, row_bytes, a, act_bytes, n, out, out_stride);
}

template <bool kBf16>
float DotHalf(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* af = static_cast<const float*>(a);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  auto load = [&](int64_t k) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 2 * k));
    if constexpr (kBf16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  };
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load(i), _mm256_loadu_ps(af + i), acc0);
    acc1 = _mm256_fmadd_ps(load(i + 8), _mm256_loadu_ps(af + i + 8), acc1);
  }
  float sum = HSum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, wb + 2 * i, 2);
    sum += (kBf16 ? Bf16ToF32(h) : Fp16ToF32(h)) * af[i];
  }
  return sum;
}

float DotQ8_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 32; ++i) {
    const __m256i p = DotI8I8(Load256(x[i].qs), Load256(y[i].qs));
    const __m256 d = _mm256_set1_ps(H(x[i].d) * H(y[i].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
  }
  return HSum(acc);
}

// The fp16 scales of block i of four Q8_0 rows, as f32 (exact).
__m128 RowScales4(const BlockQ8_0* const (&x)[4], int64_t i) {
  return _mm_cvtph_ps(_mm_setr_epi16(
      static_cast<int16_t>(x[0][i].d), static_cast<int16_t>(x[1][i].d),
      static_cast<int16_t>(x[2][i].d), static_cast<int16_t>(x[3][i].d), 0, 0, 0, 0));
}

// out[k] = lane k of d4 in all eight lanes.
void SpreadScales(__m128 d4, __m256 (&out)[4]) {
  const __m256 d8 = _mm256_insertf128_ps(_mm256_castps128_ps256(d4), d4, 1);
  out[0] = _mm256_permute_ps(d8, 0x00);
  out[1] = _mm256_permute_ps(d8, 0x55);
  out[2] = _mm256_permute_ps(d8, 0xAA);
  out[3] = _mm256_permute_ps(d8, 0xFF);
}

// Four Q8_0 rows against one activation row. Each row's arithmetic is
// exactly DotQ8_0's (same integer sums, scales, accumulation order and final
// reduction), so a row gives the same bits whichever kernel computes it; the
// gain is one loop and one activation load for four rows.
void DotQ8_0x4(const void* w, int64_t row_bytes, const void* a, int64_t n, float* out) {
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const auto* wb = static_cast<const uint8_t*>(w);
  const BlockQ8_0* x[4];
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) x[k] = reinterpret_cast<const BlockQ8_0*>(wb + k * row_bytes);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t i = 0; i < n / 32; ++i) {
    const __m256i av = Load256(y[i].qs);
    const float dy = H(y[i].d);
    __m256 dk[4];
    SpreadScales(_mm_mul_ps(RowScales4(x, i), _mm_set1_ps(dy)), dk);
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i p = DotI8I8(Load256(x[k][i].qs), av);
      acc[k] = _mm256_fmadd_ps(dk[k], _mm256_cvtepi32_ps(p), acc[k]);
    }
  }
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) out[k] = HSum(acc[k]);
}

// Four Q8_0 rows against two activation rows (prefill): y[t * y_stride + k]
// for row k and token t. Each output's arithmetic is DotQ8_0's; a weight
// block is loaded and made absolute once for both tokens.
void DotQ8_0x4x2(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes,
                 int64_t n, float* y, int64_t y_stride) {
  const auto* a0 = static_cast<const BlockQ8_0*>(a);
  const auto* a1 = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a) + act_bytes);
  const auto* wb = static_cast<const uint8_t*>(w);
  const BlockQ8_0* x[4];
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) x[k] = reinterpret_cast<const BlockQ8_0*>(wb + k * row_bytes);
  __m256 acc0[4], acc1[4];
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) acc0[k] = acc1[k] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < n / 32; ++i) {
    const __m256i v0 = Load256(a0[i].qs), v1 = Load256(a1[i].qs);
    const __m128 dw = RowScales4(x, i);
    __m256 d0[4], d1[4];
    SpreadScales(_mm_mul_ps(dw, _mm_set1_ps(H(a0[i].d))), d0);
    SpreadScales(_mm_mul_ps(dw, _mm_set1_ps(H(a1[i].d))), d1);
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i wv = Load256(x[k][i].qs);
      const __m256i wa = _mm256_sign_epi8(wv, wv);
      const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(v0, wv)), ones);
      const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(v1, wv)), ones);
      acc0[k] = _mm256_fmadd_ps(d0[k], _mm256_cvtepi32_ps(p0), acc0[k]);
      acc1[k] = _mm256_fmadd_ps(d1[k], _mm256_cvtepi32_ps(p1), acc1[k]);
    }
  }
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    y[k] = HSum(acc0[k]);
    y[y_stride + k] = HSum(acc1[k]);
  }
}

// Sum over 32 elements of -(+-a) as 8 int32 lanes. `bits` holds the whole
// 16-byte bit field of a Q1_0 block in both halves; `spread` picks the 4
// bytes of this sub-block (one per 8 elements). (a ^ m) - m negates a where
// m = 0xFF (bit set), so the sign is folded into the block scale instead.
__m256i NegSignedSum(__m256i bits, __m256i spread, const int8_t* a) {
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i m =
      _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(bits, spread), select), select);
  const __m256i r = _mm256_sub_epi8(_mm256_xor_si256(Load256(a), m), m);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), r), _mm256_set1_epi16(1));
}

// Shuffle index giving element j of sub-block k the byte 4k + j/8.
__m256i SpreadMask(int k) {
  const int64_t b = 4 * k;
  auto rep = [](int64_t v) { return static_cast<int64_t>(0x0101010101010101ULL * v); };
  return _mm256_setr_epi64x(rep(b), rep(b + 1), rep(b + 2), rep(b + 3));
}

// A 128-element Q1_0 block spans four Q8_0 activation blocks, read from
// the contiguous copy of the activation. The four integer sums are reduced
// together (hadd) so one multiply-add with the vector of the four f32
// activation scales handles the whole block.
float DotQ1_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ1_0*>(w);
  const int8_t* av = ActQ8_0Values(a, n);
  const auto* ds = reinterpret_cast<const float*>(ActQ8_0Scales(a, n));
  const __m256i spread[4] = {SpreadMask(0), SpreadMask(1), SpreadMask(2), SpreadMask(3)};
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 128; ++i) {
    const int8_t* ab = av + 128 * i;
    const __m256i bits = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].qs)));
    const __m256i p0 = NegSignedSum(bits, spread[0], ab);
    const __m256i p1 = NegSignedSum(bits, spread[1], ab + 32);
    const __m256i p2 = NegSignedSum(bits, spread[2], ab + 64);
    const __m256i p3 = NegSignedSum(bits, spread[3], ab + 96);
    // Per 128-bit half: [sum p0, sum p1, sum p2, sum p3] of that half.
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    const __m128 d4 = _mm_mul_ps(_mm_loadu_ps(ds + 4 * i), _mm_set1_ps(-H(x[i].d)));
    acc = _mm256_fmadd_ps(_mm256_set_m128(d4, d4), _mm256_cvtepi32_ps(h), acc);
  }
  return HSum(acc);
}

// kRows Q1_0 rows against kTok activation rows (act + t * act_bytes):
// out[t * out_stride + k]. Each output is computed exactly as DotQ1_0 does;
// the sign masks of a weight block are built once for all tokens, the
// shuffle constants once per call.
template <int kRows, int kTok>
void Q1_0Tile(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
              float* out, int64_t out_stride) {
  const __m256i spread[4] = {SpreadMask(0), SpreadMask(1), SpreadMask(2), SpreadMask(3)};
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  const int8_t* av[kTok];
  const float* ds[kTok];
  #pragma GCC unroll 4
  for (int t = 0; t < kTok; ++t) {
    const auto* at = static_cast<const uint8_t*>(a) + t * act_bytes;
    av[t] = ActQ8_0Values(at, n);
    ds[t] = reinterpret_cast<const float*>(ActQ8_0Scales(at, n));
  }
  __m256 acc[kTok][kRows];
  #pragma GCC unroll 4
  for (int t = 0; t < kTok; ++t) {
    #pragma GCC unroll 4
    for (int k = 0; k < kRows; ++k) acc[t][k] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < n / 128; ++i) {
    #pragma GCC unroll 4
    for (int k = 0; k < kRows; ++k) {
      const auto* x = reinterpret_cast<const BlockQ1_0*>(static_cast<const uint8_t*>(w) +
                                                         k * row_bytes) + i;
      const __m256i bits =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x->qs)));
      __m256i m[4];
      #pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        m[j] = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(bits, spread[j]), select),
                                 select);
      }
      const float neg_d = -H(x->d);
      #pragma GCC unroll 4
      for (int t = 0; t < kTok; ++t) {
        const int8_t* ab = av[t] + 128 * i;
        __m256i p[4];
        #pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m256i r = _mm256_sub_epi8(_mm256_xor_si256(Load256(ab + 32 * j), m[j]), m[j]);
          p[j] = _mm256_maddubs_epi16(ones8, r);
        }
        // The same lanes as DotQ1_0's hadd tree (per half: the sums of
        // sub-blocks 0..3 over that half), reduced in int16 first: a sum of
        // 16 values |a| <= 127 fits.
        const __m256i h = _mm256_madd_epi16(
            _mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3])),
            ones16);
        const __m128 d4 = _mm_mul_ps(_mm_loadu_ps(ds[t] + 4 * i), _mm_set1_ps(neg_d));
        acc[t][k] = _mm256_fmadd_ps(_mm256_set_m128(d4, d4), _mm256_cvtepi32_ps(h), acc[t][k]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int t = 0; t < kTok; ++t) {
    #pragma GCC unroll 4
    for (int k = 0; k < kRows; ++k) out[t * out_stride + k] = HSum(acc[t][k]);
  }
}

void DotQ1_0x4(const void* w, int64_t row_bytes, const void* a, int64_t n, float* out) {
  Q1_0Tile<4, 1>(w, row_bytes, a, 0, n, out, 0);
}

void DotQ1_0x4x2(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
                 float* out, int64_t out_stride) {
  Q1_0Tile<4, 2>(w, row_bytes, a, act_bytes, n, out, out_stride);
}

// 32 nibbles (16 bytes, low nibbles = elements 0..15, high = 16..31) mapped
// through a 16-entry signed table.
__m256i NibblesThrough(const uint8_t* qs, __m256i table) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_shuffle_epi8(table, _mm256_and_si256(both, _mm256_set1_epi8(0x0F)));
}

__m256i Table16(const int8_t (&levels)[16]) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(levels));
  return _mm256_set_m128i(t, t);
}

// Q4_0, IQ4_NL and MXFP4 against Q8_0: a nibble looked up in a table of
// levels (|level| <= 127), one scale per 32.
template <typename Block, float (*kScale)(const Block&)>
float DotNibbleTable(const void* w, const void* a, int64_t n, const int8_t (&levels)[16]) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const __m256i table = Table16(levels);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 32; ++i) {
    const __m256i p = DotI8I8(NibblesThrough(x[i].qs, table), Load256(y[i].qs));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(kScale(x[i]) * H(y[i].d)), _mm256_cvtepi32_ps(p), acc);
  }
  return HSum(acc);
}

constexpr int8_t kQ4_0Levels[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

float HalfScale(const BlockQ4_0& b) { return H(b.d); }
float Iq4NlScale(const BlockIq4Nl& b) { return H(b.d); }
// 2^(e-128): the block scale halved for the doubled FP4 levels (e >= 2;
// e < 2 are subnormal scales, built from bits as in the dequantizer).
float Mxfp4Scale(const BlockMxfp4& b) {
  const uint32_t bits = b.e < 2 ? (0x00200000u << b.e) : (static_cast<uint32_t>(b.e) - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float DotQ4_0(const void* w, const void* a, int64_t n) {
  return DotNibbleTable<BlockQ4_0, HalfScale>(w, a, n, kQ4_0Levels);
}
float DotIq4Nl(const void* w, const void* a, int64_t n) {
  return DotNibbleTable<BlockIq4Nl, Iq4NlScale>(w, a, n, kIq4NlLevels);
}
float DotMxfp4(const void* w, const void* a, int64_t n) {
  return DotNibbleTable<BlockMxfp4, Mxfp4Scale>(w, a, n, kFp4Levels);
}

// The eight 6-bit scales and mins of a Q4_K / Q5_K block (see KScaleMin)
// as bytes 0..7 of two 64-bit words, without branches.
void UnpackKScales(const uint8_t* packed, uint64_t* scales, uint64_t* mins) {
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  const uint32_t low6 = 0x3F3F3F3F, low4 = 0x0F0F0F0F, low2 = 0x03030303;
  const uint32_t sc_hi = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);
  const uint32_t mn_hi = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);
  *scales = (u[0] & low6) | (static_cast<uint64_t>(sc_hi) << 32);
  *mins = (u[1] & low6) | (static_cast<uint64_t>(mn_hi) << 32);
}

// Shuffle masks that broadcast int16 lane s of a register to all lanes.
__m256i BroadcastLaneMask(int s) {
  return _mm256_set1_epi16(static_cast<int16_t>((2 * s) | ((2 * s + 1) << 8)));
}

// Q4_K / Q5_K: per super-block, 8 sub-blocks of 32 with 6-bit scale/min.
// The min term sum_s min[s] * (activation sum of sub-block s) comes from
// the Q8_K block sums in one multiply-add.
template <bool kFiveBit>
float DotQxK(const void* w, const void* a, int64_t n) {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  __m256i lane_masks[8];
  for (int s = 0; s < 8; ++s) lane_masks[s] = BroadcastLaneMask(s);
  __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint64_t sc8, mn8;
    UnpackKScales(x[i].scales, &sc8, &mn8);
    const __m128i mins16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn8)));
    // bsums[2s], bsums[2s+1] both pair with min[s].
    const __m256i mins_pairs = _mm256_set_m128i(_mm_unpackhi_epi16(mins16, mins16),
                                                _mm_unpacklo_epi16(mins16, mins16));
    const __m256i msum = _mm256_madd_epi16(Load256(y[i].bsums), mins_pairs);
    const __m128i sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8)));
    const __m256i scales = _mm256_set_m128i(sc16, sc16);
    __m256i hbits;
    if constexpr (kFiveBit) hbits = Load256(x[i].qh);
    __m256i isum = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      const __m256i q = Load256(x[i].qs + 32 * p);
      __m256i lo = _mm256_and_si256(q, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (kFiveBit) {
        const __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * p), one);
        const __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * p + 1), one);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(b0, 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(b1, 4));
      }
      const __m256i plo = _mm256_maddubs_epi16(lo, Load256(y[i].qs + 64 * p));
      const __m256i phi = _mm256_maddubs_epi16(hi, Load256(y[i].qs + 64 * p + 32));
      const __m256i slo = _mm256_shuffle_epi8(scales, lane_masks[2 * p]);
      const __m256i shi = _mm256_shuffle_epi8(scales, lane_masks[2 * p + 1]);
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(plo, slo));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(phi, shi));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(H(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
    acc_min = _mm256_fmadd_ps(_mm256_set1_ps(H(x[i].dmin) * y[i].d), _mm256_cvtepi32_ps(msum),
                              acc_min);
  }
  return HSum(acc) - HSum(acc_min);
}

// Q6_K: q + 32 is unsigned for maddubs; the 32 * a it adds is taken off
// once per block through the Q8_K block sums.
float DotQ6_K(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i three = _mm256_set1_epi8(3);
  // Quarter k uses scale 2k for its first 16 values, 2k+1 for the rest.
  __m256i pick[4];
  for (int k = 0; k < 4; ++k) {
    pick[k] = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>((4 * k + 2) | ((4 * k + 3) << 8))),
                               _mm_set1_epi16(static_cast<int16_t>((4 * k) | ((4 * k + 1) << 8))));
  }
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
    const __m256i sc_all = _mm256_cvtepi8_epi16(sc8);  // scale g in lane g
    // 32 * sum_g scale[g] * bsums[g]
    __m256i isum = _mm256_sub_epi32(
        _mm256_setzero_si256(),
        _mm256_slli_epi32(_mm256_madd_epi16(Load256(y[i].bsums), sc_all), 5));
    for (int h = 0; h < 2; ++h) {
      const __m128i sc_half = h == 0 ? _mm256_castsi256_si128(sc_all)
                                     : _mm256_extracti128_si256(sc_all, 1);
      const __m256i sc = _mm256_set_m128i(sc_half, sc_half);
      const __m256i qh = Load256(x[i].qh + 32 * h);
      const __m256i ql0 = Load256(x[i].ql + 64 * h);
      const __m256i ql1 = Load256(x[i].ql + 64 * h + 32);
      const __m256i lows[4] = {_mm256_and_si256(ql0, low4), _mm256_and_si256(ql1, low4),
                               _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                               _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4)};
      for (int k = 0; k < 4; ++k) {
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), three);
        const __m256i qu = _mm256_or_si256(lows[k], _mm256_slli_epi16(high, 4));
        const __m256i p = _mm256_maddubs_epi16(qu, Load256(y[i].qs + 128 * h + 32 * k));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc, pick[k])));
      }
    }
    const float d = H(x[i].d) * y[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
  }
  return HSum(acc);
}

// One Q4_K / Q5_K row against kTok activation rows (a + t * act_bytes):
// out[t * out_stride]. The weight nibbles, high bits and scales of a block
// are unpacked once for all tokens; each output is computed exactly as
// DotQxK computes it.
template <bool kFiveBit, int kTok>
void QxKRowTile(const void* w, const void* a, int64_t act_bytes, int64_t n, float* out,
                int64_t out_stride) {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
  const auto* x = static_cast<const Block*>(w);
  const BlockQ8_K* y[kTok];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) {
    y[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a) + t * act_bytes);
  }
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc[kTok], acc_min[kTok];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint64_t sc8, mn8;
    UnpackKScales(x[i].scales, &sc8, &mn8);
    const __m128i mins16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn8)));
    const __m256i mins_pairs = _mm256_set_m128i(_mm_unpackhi_epi16(mins16, mins16),
                                                _mm_unpacklo_epi16(mins16, mins16));
    const __m128i sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8)));
    const __m256i scales = _mm256_set_m128i(sc16, sc16);
    __m256i hbits;
    if constexpr (kFiveBit) hbits = Load256(x[i].qh);
    __m256i isum[kTok];
#pragma GCC unroll 2
    for (int t = 0; t < kTok; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m256i q = Load256(x[i].qs + 32 * p);
      __m256i lo = _mm256_and_si256(q, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (kFiveBit) {
        const __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * p), one);
        const __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * p + 1), one);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(b0, 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(b1, 4));
      }
      const __m256i slo = _mm256_shuffle_epi8(scales, BroadcastLaneMask(2 * p));
      const __m256i shi = _mm256_shuffle_epi8(scales, BroadcastLaneMask(2 * p + 1));
#pragma GCC unroll 2
      for (int t = 0; t < kTok; ++t) {
        const __m256i plo = _mm256_maddubs_epi16(lo, Load256(y[t][i].qs + 64 * p));
        const __m256i phi = _mm256_maddubs_epi16(hi, Load256(y[t][i].qs + 64 * p + 32));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(plo, slo));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(phi, shi));
      }
    }
    const float dw = H(x[i].d), dmin = H(x[i].dmin);
#pragma GCC unroll 2
    for (int t = 0; t < kTok; ++t) {
      const __m256i msum = _mm256_madd_epi16(Load256(y[t][i].bsums), mins_pairs);
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * y[t][i].d), _mm256_cvtepi32_ps(isum[t]),
                               acc[t]);
      acc_min[t] = _mm256_fmadd_ps(_mm256_set1_ps(dmin * y[t][i].d), _mm256_cvtepi32_ps(msum),
                                   acc_min[t]);
    }
  }
  for (int t = 0; t < kTok; ++t) out[t * out_stride] = HSum(acc[t]) - HSum(acc_min[t]);
}

// One Q6_K row against kTok activation rows: out[t * out_stride], each
// computed exactly as DotQ6_K computes it, the 6-bit values and scales of a
// block built once for all tokens.
template <int kTok>
void Q6KRowTile(const void* w, const void* a, int64_t act_bytes, int64_t n, float* out,
                int64_t out_stride) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* y[kTok];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) {
    y[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a) + t * act_bytes);
  }
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i three = _mm256_set1_epi8(3);
  __m256i pick[4];
  for (int k = 0; k < 4; ++k) {
    pick[k] = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>((4 * k + 2) | ((4 * k + 3) << 8))),
                               _mm_set1_epi16(static_cast<int16_t>((4 * k) | ((4 * k + 1) << 8))));
  }
  __m256 acc[kTok];
#pragma GCC unroll 2
  for (int t = 0; t < kTok; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
    const __m256i sc_all = _mm256_cvtepi8_epi16(sc8);
    __m256i isum[kTok];
#pragma GCC unroll 2
    for (int t = 0; t < kTok; ++t) {
      isum[t] = _mm256_sub_epi32(
          _mm256_setzero_si256(),
          _mm256_slli_epi32(_mm256_madd_epi16(Load256(y[t][i].bsums), sc_all), 5));
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m128i sc_half = h == 0 ? _mm256_castsi256_si128(sc_all)
                                     : _mm256_extracti128_si256(sc_all, 1);
      const __m256i sc = _mm256_set_m128i(sc_half, sc_half);
      const __m256i qh = Load256(x[i].qh + 32 * h);
      const __m256i ql0 = Load256(x[i].ql + 64 * h);
      const __m256i ql1 = Load256(x[i].ql + 64 * h + 32);
      const __m256i lows[4] = {_mm256_and_si256(ql0, low4), _mm256_and_si256(ql1, low4),
                               _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                               _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4)};
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), three);
        const __m256i qu = _mm256_or_si256(lows[k], _mm256_slli_epi16(high, 4));
        const __m256i s16 = _mm256_shuffle_epi8(sc, pick[k]);
#pragma GCC unroll 2
        for (int t = 0; t < kTok; ++t) {
          const __m256i p = _mm256_maddubs_epi16(qu, Load256(y[t][i].qs + 128 * h + 32 * k));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, s16));
        }
      }
    }
    const float dw = H(x[i].d);
#pragma GCC unroll 2
    for (int t = 0; t < kTok; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * y[t][i].d), _mm256_cvtepi32_ps(isum[t]),
                               acc[t]);
    }
  }
  for (int t = 0; t < kTok; ++t) out[t * out_stride] = HSum(acc[t]);
}

void DotQ6_Kx4x2(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
                 float* out, int64_t out_stride) {
  for (int k = 0; k < 4; ++k) {
    Q6KRowTile<2>(static_cast<const uint8_t*>(w) + k * row_bytes, a, act_bytes, n, out + k,
                  out_stride);
  }
}

// Four rows, one token: the one-row kernel per row (the work per block
// dominates; nothing worth sharing without a second token).
template <VecDotFn kDot>
void RowsOneByOne(const void* w, int64_t row_bytes, const void* a, int64_t n, float* out) {
  for (int k = 0; k < 4; ++k) out[k] = kDot(static_cast<const uint8_t*>(w) + k * row_bytes, a, n);
}

template <bool kFiveBit>
void DotQxKx4x2(const void* w, int64_t row_bytes, const void* a, int64_t act_bytes, int64_t n,
                float* out, int64_t out_stride) {
  for (int k = 0; k < 4; ++k) {
    QxKRowTile<kFiveBit, 2>(static_cast<const uint8_t*>(w) + k * row_bytes, a, act_bytes, n,
                            out + k, out_stride);
  }
}

}  // namespace

float DotF32Avx2(const float* a, const float* b, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k),
                               acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
  }
  float sum = HSum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

VecDot4Fn FindVecDot4Avx2(GgmlType wtype) {
  switch (wtype) {
    case GgmlType::kF32: return DotF32x4;
    case GgmlType::kQ8_0: return DotQ8_0x4;
    case GgmlType::kQ1_0: return DotQ1_0x4;
    case GgmlType::kQ4_K: return RowsOneByOne<DotQxK<false>>;
    case GgmlType::kQ5_K: return RowsOneByOne<DotQxK<true>>;
    case GgmlType::kQ6_K: return RowsOneByOne<DotQ6_K>;
    default: return nullptr;
  }
}

// ggml's AVX quantize_row_q8_0, bit for bit the scalar QuantizeBlock32 of
// quantize_act.cc: the maximum is order independent, x * (127 / amax) is one
// rounded product, _mm256_round_ps rounds half to even like nearbyint, and
// the saturating packs clamp like RoundToI8 (|x * id| <= 127 anyway).
void QuantizeRowQ8_0Avx2(const float* x, int64_t cols, void* out) {
  auto* b = static_cast<BlockQ8_0*>(out);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = 0; i < cols / 32; ++i, x += 32) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float max_scalar = _mm_cvtss_f32(m);
    const float d = max_scalar / 127.f;
    const float id = max_scalar != 0.f ? 127.f / max_scalar : 0.f;
    b[i].d = F32ToFp16(d);
    const __m256 mul = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], mul),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    const __m256i q01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i q23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q01, q23), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), bytes);
  }
}

VecDot8Fn FindVecDot8Avx2(GgmlType wtype) {
  return wtype == GgmlType::kF32 ? DotF32x8 : nullptr;
}

VecDot4x2Fn FindVecDot4x2Avx2(GgmlType wtype) {
  switch (wtype) {
    case GgmlType::kF32: return DotF32x4x2;
    case GgmlType::kQ8_0: return DotQ8_0x4x2;
    case GgmlType::kQ1_0: return DotQ1_0x4x2;
    case GgmlType::kQ4_K: return DotQxKx4x2<false>;
    case GgmlType::kQ5_K: return DotQxKx4x2<true>;
    case GgmlType::kQ6_K: return DotQ6_Kx4x2;
    default: return nullptr;
  }
}

// ggml's quantize_row_q8_K (the reference code, which x86 uses too), bit
// for bit ToQ8_K of quantize_act.cc: the largest magnitude is order
// independent, the first element reaching it gives the signed maximum,
// each value is one rounded product rounded half to even and clamped to
// 127, and d = 1 / iscale.
void QuantizeRowQ8_KAvx2(const float* x, int64_t cols, void* out) {
  auto* b = static_cast<BlockQ8_K*>(out);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 top = _mm256_set1_ps(127.f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = 0; i < cols / kQK; ++i, x += kQK) {
    __m256 amax8 = _mm256_setzero_ps();
    for (int j = 0; j < kQK; j += 8) {
      amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float amax = _mm_cvtss_f32(m);
    if (amax == 0.f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    int first = 0;
    while (std::fabs(x[first]) != amax) ++first;
    const float iscale = -127.f / x[first];
    const __m256 mul = _mm256_set1_ps(iscale);
    for (int j = 0; j < kQK; j += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 v = _mm256_round_ps(_mm256_mul_ps(mul, _mm256_loadu_ps(x + j + 8 * k)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[k] = _mm256_cvtps_epi32(_mm256_min_ps(v, top));
      }
      const __m256i bytes = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
          order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + j), bytes);
    }
    for (int g = 0; g < kQK / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b[i].qs[16 * g + j];
      b[i].bsums[g] = static_cast<int16_t>(sum);
    }
    b[i].d = 1.f / iscale;
  }
}

VecDotFn FindVecDotAvx2(GgmlType wtype) {
  switch (wtype) {
    case GgmlType::kF32: return DotF32;
    case GgmlType::kF16: return DotHalf<false>;
    case GgmlType::kBF16: return DotHalf<true>;
    case GgmlType::kQ8_0: return DotQ8_0;
    case GgmlType::kQ1_0: return DotQ1_0;
    case GgmlType::kQ4_0: return DotQ4_0;
    case GgmlType::kIQ4_NL: return DotIq4Nl;
    case GgmlType::kMXFP4: return DotMxfp4;
    case GgmlType::kQ4_K: return DotQxK<false>;
    case GgmlType::kQ5_K: return DotQxK<true>;
    case GgmlType::kQ6_K: return DotQ6_K;
    default: return nullptr;
  }
}

#else  // not x86-64: no kernels at this level

VecDotFn FindVecDotAvx2(GgmlType) { return nullptr; }
VecDot4Fn FindVecDot4Avx2(GgmlType) { return nullptr; }
VecDot4x2Fn FindVecDot4x2Avx2(GgmlType) { return nullptr; }
VecDot8Fn FindVecDot8Avx2(GgmlType) { return nullptr; }
void QuantizeRowQ8_0Avx2(const float*, int64_t, void*) {}
void QuantizeRowQ8_KAvx2(const float*, int64_t, void*) {}
float DotF32Avx2(const float* a, const float* b, int64_t n) { return DotF32Scalar(a, b, n); }

#endif  // defined(__x86_64__)

}  // namespace sluice::kernels::internal
