// Dequantizers for the float, legacy (32/64/128-element), K, TQ and FP4
// types. IQ types live in dequant_iq.cc.
//
// Bit-exactness notes: every expression keeps ggml's operation order and
// operand types (e.g. Q6_K computes (d * scale) * q, Q4_K d1 * q - m1), and
// this file is built with -ffp-contract=off so no multiply-add is fused:
// ggml-base, where to_float lives, is built without FMA.
#include "kernels/cpu/dequant.h"

#include <cmath>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant_internal.h"

namespace sluice::kernels {

float Fp16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in f32.
    const float mag = static_cast<float>(mant) * 0x1p-24f;
    std::memcpy(&bits, &mag, 4);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t F32ToFp16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return sign | 0x7E00;  // NaN
  if (mag >= 0x477FF000u) return sign | 0x7C00;  // rounds to >= 65536: inf
  if (mag < 0x38800000u) {
    // Below 2^-14: the result is a multiple of 2^-24; scaling by 2^24 is
    // exact and nearbyint rounds half to even (default rounding mode).
    float scaled;
    std::memcpy(&scaled, &mag, 4);
    scaled *= 0x1p24f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Normal: drop 13 mantissa bits with round-half-even; a carry moves into
  // the exponent as it should.
  const uint32_t rounded = (mag + 0xFFFu + ((mag >> 13) & 1u)) >> 13;
  return sign | static_cast<uint16_t>(rounded - (112u << 10));
}

float Bf16ToF32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>((bits >> 16) | 64);  // quiet NaN
  }
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

namespace internal {
namespace {

float H(uint16_t h) { return Fp16ToF32(h); }

template <typename Block>
const Block* As(const void* p) {
  return static_cast<const Block*>(p);
}

void DecodeF32(const void* src, int64_t n, float* dst) {
  std::memcpy(dst, src, n * sizeof(float));
}

// ToF32 widens one stored half (fp16 or bf16).
template <float (*ToF32)(uint16_t)>
void DecodeHalf(const void* src, int64_t n, float* dst) {
  const auto* h = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, h + 2 * i, 2);
    dst[i] = ToF32(v);
  }
}

void DecodeQ1_0(const void* src, int64_t nb, float* y) {
  for (const BlockQ1_0* b = As<BlockQ1_0>(src); nb-- > 0; ++b, y += 128) {
    const float d = H(b->d);
    for (int j = 0; j < 128; ++j) {
      y[j] = ((b->qs[j / 8] >> (j % 8)) & 1) ? d : -d;
    }
  }
}

void DecodeQ2_0(const void* src, int64_t nb, float* y) {
  for (const BlockQ2_0* b = As<BlockQ2_0>(src); nb-- > 0; ++b, y += 64) {
    const float d = H(b->d);
    for (int j = 0; j < 64; ++j) {
      const int q = (b->qs[j / 4] >> (2 * (j % 4))) & 3;
      y[j] = static_cast<float>(q - 1) * d;
    }
  }
}

void DecodeQ4_0(const void* src, int64_t nb, float* y) {
  for (const BlockQ4_0* b = As<BlockQ4_0>(src); nb-- > 0; ++b, y += 32) {
    const float d = H(b->d);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((b->qs[j] & 0x0F) - 8) * d;
      y[j + 16] = static_cast<float>((b->qs[j] >> 4) - 8) * d;
    }
  }
}

void DecodeQ4_1(const void* src, int64_t nb, float* y) {
  for (const BlockQ4_1* b = As<BlockQ4_1>(src); nb-- > 0; ++b, y += 32) {
    const float d = H(b->d);
    const float m = H(b->m);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(b->qs[j] & 0x0F) * d + m;
      y[j + 16] = static_cast<float>(b->qs[j] >> 4) * d + m;
    }
  }
}

// The fifth bit of element j of a Q5 block: bit j of the 32-bit qh.
int Q5High(const uint8_t* qh, int j) { return ((qh[j / 8] >> (j % 8)) & 1) << 4; }

void DecodeQ5_0(const void* src, int64_t nb, float* y) {
  for (const BlockQ5_0* b = As<BlockQ5_0>(src); nb-- > 0; ++b, y += 32) {
    const float d = H(b->d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = ((b->qs[j] & 0x0F) | Q5High(b->qh, j)) - 16;
      const int q1 = ((b->qs[j] >> 4) | Q5High(b->qh, j + 16)) - 16;
      y[j] = static_cast<float>(q0) * d;
      y[j + 16] = static_cast<float>(q1) * d;
    }
  }
}

void DecodeQ5_1(const void* src, int64_t nb, float* y) {
  for (const BlockQ5_1* b = As<BlockQ5_1>(src); nb-- > 0; ++b, y += 32) {
    const float d = H(b->d);
    const float m = H(b->m);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (b->qs[j] & 0x0F) | Q5High(b->qh, j);
      const int q1 = (b->qs[j] >> 4) | Q5High(b->qh, j + 16);
      y[j] = static_cast<float>(q0) * d + m;
      y[j + 16] = static_cast<float>(q1) * d + m;
    }
  }
}

void DecodeQ8_0(const void* src, int64_t nb, float* y) {
  for (const BlockQ8_0* b = As<BlockQ8_0>(src); nb-- > 0; ++b, y += 32) {
    const float d = H(b->d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b->qs[j]) * d;
  }
}

void DecodeQ8_1(const void* src, int64_t nb, float* y) {
  for (const BlockQ8_1* b = As<BlockQ8_1>(src); nb-- > 0; ++b, y += 32) {
    const float d = H(b->d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b->qs[j]) * d;
  }
}

void DecodeQ8_K(const void* src, int64_t nb, float* y) {
  for (const BlockQ8_K* b = As<BlockQ8_K>(src); nb-- > 0; ++b, y += kQK) {
    for (int j = 0; j < kQK; ++j) y[j] = b->d * static_cast<float>(b->qs[j]);
  }
}

// E8M0 exponent e as 2^(e-128): half the block scale, because kFp4Levels
// are doubled. e = 0 and 1 give subnormals.
float E8m0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e) - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void DecodeMxfp4(const void* src, int64_t nb, float* y) {
  for (const BlockMxfp4* b = As<BlockMxfp4>(src); nb-- > 0; ++b, y += 32) {
    const float d = E8m0Half(b->e);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(kFp4Levels[b->qs[j] & 0x0F]) * d;
      y[j + 16] = static_cast<float>(kFp4Levels[b->qs[j] >> 4]) * d;
    }
  }
}

// Unsigned E4M3 (bias 7, no sign; the top bit is ignored), halved for the
// doubled FP4 levels. 0 and 0x7F (NaN) decode as 0.
float Ue4m3Half(uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const int exp = (x >> 3) & 0xF;
  const int man = x & 0x7;
  const float raw = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                             : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return raw * 0.5f;
}

void DecodeNvfp4(const void* src, int64_t nb, float* y) {
  for (const BlockNvfp4* b = As<BlockNvfp4>(src); nb-- > 0; ++b) {
    for (int s = 0; s < 4; ++s, y += 16) {
      const float d = Ue4m3Half(b->d[s]);
      const uint8_t* q = b->qs + 8 * s;
      for (int j = 0; j < 8; ++j) {
        y[j] = static_cast<float>(kFp4Levels[q[j] & 0x0F]) * d;
        y[j + 8] = static_cast<float>(kFp4Levels[q[j] >> 4]) * d;
      }
    }
  }
}

void DecodeQ2_K(const void* src, int64_t nb, float* y) {
  for (const BlockQ2_K* b = As<BlockQ2_K>(src); nb-- > 0; ++b) {
    const float d = H(b->d);
    const float dmin = H(b->dmin);
    // Element 128*h + 32*s + 16*g + l: bits 2s..2s+1 of qs[32h + 16g + l],
    // scale byte 8h + 2s + g (low nibble scale, high nibble min).
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 4; ++s) {
        for (int g = 0; g < 2; ++g) {
          const uint8_t sc = b->scales[8 * h + 2 * s + g];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          const uint8_t* q = b->qs + 32 * h + 16 * g;
          for (int l = 0; l < 16; ++l) {
            *y++ = dl * static_cast<float>((q[l] >> (2 * s)) & 3) - ml;
          }
        }
      }
    }
  }
}

// Scale j (0..15) of a Q3_K block: 4 low bits from bytes 0..7, 2 high bits
// from bytes 8..11; stored with an offset of 32.
int Q3KScale(const uint8_t* s, int j) {
  const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

void DecodeQ3_K(const void* src, int64_t nb, float* y) {
  for (const BlockQ3_K* b = As<BlockQ3_K>(src); nb-- > 0; ++b) {
    const float d = H(b->d);
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 4; ++s) {
        const uint8_t mask = static_cast<uint8_t>(1u << (4 * h + s));
        for (int g = 0; g < 2; ++g) {
          const float dl = d * static_cast<float>(Q3KScale(b->scales, 8 * h + 2 * s + g));
          const uint8_t* q = b->qs + 32 * h + 16 * g;
          const uint8_t* hm = b->hmask + 16 * g;
          for (int l = 0; l < 16; ++l) {
            const int v = ((q[l] >> (2 * s)) & 3) - ((hm[l] & mask) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

void DecodeQ4_K(const void* src, int64_t nb, float* y) {
  for (const BlockQ4_K* b = As<BlockQ4_K>(src); nb-- > 0; ++b) {
    const float d = H(b->d);
    const float dmin = H(b->dmin);
    for (int p = 0; p < 4; ++p) {
      const uint8_t* q = b->qs + 32 * p;
      for (int half = 0; half < 2; ++half) {
        uint8_t sc, m;
        KScaleMin(2 * p + half, b->scales, &sc, &m);
        const float d1 = d * static_cast<float>(sc);
        const float m1 = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) {
          const int v = half ? (q[l] >> 4) : (q[l] & 0xF);
          *y++ = d1 * static_cast<float>(v) - m1;
        }
      }
    }
  }
}

void DecodeQ5_K(const void* src, int64_t nb, float* y) {
  for (const BlockQ5_K* b = As<BlockQ5_K>(src); nb-- > 0; ++b) {
    const float d = H(b->d);
    const float dmin = H(b->dmin);
    for (int p = 0; p < 4; ++p) {
      const uint8_t* q = b->qs + 32 * p;
      for (int half = 0; half < 2; ++half) {
        const int sub = 2 * p + half;
        uint8_t sc, m;
        KScaleMin(sub, b->scales, &sc, &m);
        const float d1 = d * static_cast<float>(sc);
        const float m1 = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) {
          const int low = half ? (q[l] >> 4) : (q[l] & 0xF);
          const int v = low + (((b->qh[l] >> sub) & 1) << 4);
          *y++ = d1 * static_cast<float>(v) - m1;
        }
      }
    }
  }
}

void DecodeQ6_K(const void* src, int64_t nb, float* y) {
  for (const BlockQ6_K* b = As<BlockQ6_K>(src); nb-- > 0; ++b) {
    const float d = H(b->d);
    for (int h = 0; h < 2; ++h, y += 128) {
      const uint8_t* ql = b->ql + 64 * h;
      const uint8_t* qh = b->qh + 32 * h;
      const int8_t* sc = b->scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        // Quarter k of the 128: low nibble of ql[l] / ql[l+32] for k = 0/1,
        // high nibble for k = 2/3; two bits 2k..2k+1 of qh[l] on top.
        for (int k = 0; k < 4; ++k) {
          const uint8_t lo = ql[l + 32 * (k & 1)];
          const int low = k < 2 ? (lo & 0xF) : (lo >> 4);
          const int q = (low | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
          y[l + 32 * k] = d * static_cast<float>(sc[is + 2 * k]) * static_cast<float>(q);
        }
      }
    }
  }
}

// Base-3 digit n (most significant first) of a byte that stores
// round(v * 256 / 243) for a 5-trit (or 4-trit) number v.
float TernaryDigit(uint8_t packed, int n, float d) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t q = static_cast<uint8_t>(packed * kPow3[n]);
  const int digit = (static_cast<uint16_t>(q) * 3) >> 8;
  return static_cast<float>(digit - 1) * d;
}

void DecodeTq1_0(const void* src, int64_t nb, float* y) {
  for (const BlockTq1_0* b = As<BlockTq1_0>(src); nb-- > 0; ++b) {
    const float d = H(b->d);
    // qs[0..32) hold 5 digits for 160 elements, qs[32..48) 5 digits for
    // 80 more, qh 4 digits for the last 16.
    for (int n = 0; n < 5; ++n) {
      for (int m = 0; m < 32; ++m) *y++ = TernaryDigit(b->qs[m], n, d);
    }
    for (int n = 0; n < 5; ++n) {
      for (int m = 0; m < 16; ++m) *y++ = TernaryDigit(b->qs[32 + m], n, d);
    }
    for (int n = 0; n < 4; ++n) {
      for (int m = 0; m < 4; ++m) *y++ = TernaryDigit(b->qh[m], n, d);
    }
  }
}

void DecodeTq2_0(const void* src, int64_t nb, float* y) {
  for (const BlockTq2_0* b = As<BlockTq2_0>(src); nb-- > 0; ++b) {
    const float d = H(b->d);
    for (int j = 0; j < 64; j += 32) {
      for (int s = 0; s < 4; ++s) {
        for (int m = 0; m < 32; ++m) {
          const int q = (b->qs[j + m] >> (2 * s)) & 3;
          *y++ = static_cast<float>(q - 1) * d;
        }
      }
    }
  }
}

struct Decoder {
  BlockDecoder fn;
  int block;  // elements per call unit (may be smaller than the type's block)
};

// The decoder of `type`, or {nullptr, 0} when it has none.
Decoder DecoderFor(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return {DecodeF32, 1};
    case GgmlType::kF16: return {DecodeHalf<Fp16ToF32>, 1};
    case GgmlType::kBF16: return {DecodeHalf<Bf16ToF32>, 1};
    case GgmlType::kQ1_0: return {DecodeQ1_0, 128};
    case GgmlType::kQ2_0: return {DecodeQ2_0, 64};
    case GgmlType::kQ4_0: return {DecodeQ4_0, 32};
    case GgmlType::kQ4_1: return {DecodeQ4_1, 32};
    case GgmlType::kQ5_0: return {DecodeQ5_0, 32};
    case GgmlType::kQ5_1: return {DecodeQ5_1, 32};
    case GgmlType::kQ8_0: return {DecodeQ8_0, 32};
    case GgmlType::kQ8_1: return {DecodeQ8_1, 32};
    case GgmlType::kMXFP4: return {DecodeMxfp4, 32};
    case GgmlType::kNVFP4: return {DecodeNvfp4, 64};
    case GgmlType::kQ2_K: return {DecodeQ2_K, kQK};
    case GgmlType::kQ3_K: return {DecodeQ3_K, kQK};
    case GgmlType::kQ4_K: return {DecodeQ4_K, kQK};
    case GgmlType::kQ5_K: return {DecodeQ5_K, kQK};
    case GgmlType::kQ6_K: return {DecodeQ6_K, kQK};
    case GgmlType::kQ8_K: return {DecodeQ8_K, kQK};
    case GgmlType::kTQ1_0: return {DecodeTq1_0, kQK};
    case GgmlType::kTQ2_0: return {DecodeTq2_0, kQK};
    case GgmlType::kIQ2_XXS: return {DecodeIq2Xxs, kQK};
    case GgmlType::kIQ2_XS: return {DecodeIq2Xs, kQK};
    case GgmlType::kIQ2_S: return {DecodeIq2S, kQK};
    case GgmlType::kIQ3_XXS: return {DecodeIq3Xxs, kQK};
    case GgmlType::kIQ3_S: return {DecodeIq3S, kQK};
    case GgmlType::kIQ1_S: return {DecodeIq1S, kQK};
    case GgmlType::kIQ1_M: return {DecodeIq1M, kQK};
    case GgmlType::kIQ4_NL: return {DecodeIq4Nl, 32};
    case GgmlType::kIQ4_XS: return {DecodeIq4Xs, kQK};
    default: return {nullptr, 0};
  }
}

}  // namespace
}  // namespace internal

bool IsDequantizable(GgmlType type) {
  return internal::DecoderFor(type).fn != nullptr;
}

std::string TypeName(GgmlType type) {
  const std::string_view name = TraitsOf(type).name;
  return std::string(name.data(), name.size());
}

absl::StatusOr<int64_t> RowBytes(GgmlType type, int64_t n) {
  const GgmlTypeTraits& t = TraitsOf(type);
  if (n < 0 || n % t.block_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(TypeName(type), ": n=", n, " is not a multiple of the block size ",
                     t.block_size));
  }
  return n / t.block_size * t.bytes_per_block;
}

absl::Status DequantizeRow(GgmlType type, const void* src, int64_t n, float* dst) {
  const internal::Decoder decoder = internal::DecoderFor(type);
  if (decoder.fn == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat(TypeName(type), ": dequantization not supported"));
  }
  absl::StatusOr<int64_t> bytes = RowBytes(type, n);
  if (!bytes.ok()) return bytes.status();
  if (n > 0) decoder.fn(src, n / decoder.block, dst);
  return absl::OkStatus();
}

}  // namespace sluice::kernels
