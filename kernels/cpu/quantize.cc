#include "kernels/cpu/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"

namespace sluice::kernels {
namespace {

using internal::BlockQ1_0;
using internal::BlockQ4_K;
using internal::BlockQ5_K;
using internal::BlockQ6_K;
using internal::kQK;

// fp16 of v, and the float the dequantizer will read back from it.
float RoundHalf(float v, uint16_t* h) {
  *h = F32ToFp16(v);
  return Fp16ToF32(*h);
}

int Clamp(int v, int lo, int hi) { return std::min(hi, std::max(lo, v)); }

// Round half away from zero, inline (std::lround is a library call, and
// quantizing is most of mkmodel's time after generating). |v| < 2^30.
int Round(float v) { return static_cast<int>(v + (v >= 0 ? 0.5f : -0.5f)); }

// 6-bit sub-block scales and mins of a Q4_K / Q5_K block: the inverse of
// internal::KScaleMin (low 6 bits of bytes 0..7 for sub-blocks 0..3, nibbles
// of bytes 8..11 plus the top two bits of bytes 0..7 for sub-blocks 4..7).
void PackKScales(const uint8_t sc[8], const uint8_t m[8], uint8_t s[12]) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 4; ++j) {
    s[j] = sc[j] & 63;
    s[j + 4] = m[j] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    s[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
    s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
    s[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
  }
}

// One super-block of 8 sub-blocks of 32 as y = d*sc_j*q - dmin*m_j with
// q in [0, qmax]. Writes the fp16 scales, the packed 6-bit scales and q.
void QuantizeKAsym(const float* x, int qmax, uint16_t* d_out, uint16_t* dmin_out,
                   uint8_t scales[12], uint8_t q[kQK]) {
  float scale[8], min[8];  // per sub-block: step and (non-positive) minimum
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* v = x + 32 * j;
    float lo = 0, hi = v[0];  // the min is stored as a subtracted m >= 0
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, v[l]);
      hi = std::max(hi, v[l]);
    }
    scale[j] = (hi - lo) / static_cast<float>(qmax);
    min[j] = -lo;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, min[j]);
  }
  const float d = RoundHalf(max_scale / 63.0f, d_out);
  const float dmin = RoundHalf(max_min / 63.0f, dmin_out);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(d > 0 ? Clamp(Round(scale[j] / d), 0, 63) : 0);
    m[j] = static_cast<uint8_t>(dmin > 0 ? Clamp(Round(min[j] / dmin), 0, 63) : 0);
    // Decode with the stored (rounded) factors so q absorbs their error.
    const float d1 = d * static_cast<float>(sc[j]);
    const float m1 = dmin * static_cast<float>(m[j]);
    const float inv = d1 > 0 ? 1.0f / d1 : 0.0f;
    for (int l = 0; l < 32; ++l) {
      q[32 * j + l] = static_cast<uint8_t>(Clamp(Round((x[32 * j + l] + m1) * inv), 0, qmax));
    }
  }
  PackKScales(sc, m, scales);
}

void QuantizeQ4_K(const float* x, int64_t nb, void* dst) {
  auto* b = static_cast<BlockQ4_K*>(dst);
  uint8_t q[kQK];
  for (int64_t i = 0; i < nb; ++i, ++b, x += kQK) {
    QuantizeKAsym(x, 15, &b->d, &b->dmin, b->scales, q);
    // Pair p holds sub-block 2p in the low nibbles, 2p+1 in the high ones.
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        b->qs[32 * p + l] = static_cast<uint8_t>(q[64 * p + l] | (q[64 * p + 32 + l] << 4));
      }
    }
  }
}

void QuantizeQ5_K(const float* x, int64_t nb, void* dst) {
  auto* b = static_cast<BlockQ5_K*>(dst);
  uint8_t q[kQK];
  for (int64_t i = 0; i < nb; ++i, ++b, x += kQK) {
    QuantizeKAsym(x, 31, &b->d, &b->dmin, b->scales, q);
    std::memset(b->qh, 0, sizeof(b->qh));
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * p + l], hi = q[64 * p + 32 + l];
        b->qs[32 * p + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        // Bit 4 of sub-block j's element l is bit j of qh[l].
        b->qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * p)) | ((hi >> 4) << (2 * p + 1)));
      }
    }
  }
}

// 16 sub-blocks of 16, y = d * sc_j * (q - 32) with q - 32 in [-32, 31]; the
// symmetric range [-31, 31] is used so no sign is favoured.
void QuantizeQ6_K(const float* x, int64_t nb, void* dst) {
  auto* b = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, ++b, x += kQK) {
    float scale[16], max_scale = 0;
    for (int j = 0; j < 16; ++j) {
      float amax = 0;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * j + l]));
      scale[j] = amax / 31.0f;
      max_scale = std::max(max_scale, scale[j]);
    }
    const float d = RoundHalf(max_scale / 127.0f, &b->d);
    uint8_t q[kQK];
    for (int j = 0; j < 16; ++j) {
      const int sc = d > 0 ? Clamp(Round(scale[j] / d), 0, 127) : 0;
      b->scales[j] = static_cast<int8_t>(sc);
      const float step = d * static_cast<float>(sc);
      const float inv = step > 0 ? 1.0f / step : 0.0f;
      for (int l = 0; l < 16; ++l) {
        q[16 * j + l] = static_cast<uint8_t>(Clamp(Round(x[16 * j + l] * inv), -32, 31) + 32);
      }
    }
    // Element 128h + 32k + l: 4 low bits in ql[64h + l + 32(k&1)] (low
    // nibble for k < 2), 2 high bits at 2k of qh[32h + l].
    std::memset(b->ql, 0, sizeof(b->ql));
    std::memset(b->qh, 0, sizeof(b->qh));
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) {
          const int v = q[128 * h + 32 * k + l];
          uint8_t& lo = b->ql[64 * h + l + 32 * (k & 1)];
          lo |= static_cast<uint8_t>(k < 2 ? (v & 0xF) : ((v & 0xF) << 4));
          b->qh[32 * h + l] |= static_cast<uint8_t>((v >> 4) << (2 * k));
        }
      }
    }
  }
}

void QuantizeQ1_0(const float* x, int64_t nb, void* dst) {
  auto* b = static_cast<BlockQ1_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, ++b, x += 128) {
    double sum = 0;
    for (int l = 0; l < 128; ++l) sum += std::fabs(x[l]);
    b->d = F32ToFp16(static_cast<float>(sum / 128));
    std::memset(b->qs, 0, sizeof(b->qs));
    for (int l = 0; l < 128; ++l) {
      if (x[l] >= 0) b->qs[l / 8] |= static_cast<uint8_t>(1u << (l % 8));
    }
  }
}

}  // namespace

bool IsQuantizable(GgmlType type) {
  return type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K ||
         type == GgmlType::kQ1_0;
}

absl::Status QuantizeRow(GgmlType type, const float* x, int64_t n, void* dst) {
  if (!IsQuantizable(type)) {
    return absl::UnimplementedError(absl::StrCat(TypeName(type), ": quantization not supported"));
  }
  const int64_t block = TraitsOf(type).block_size;
  if (n < 0 || n % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        TypeName(type), ": n=", n, " is not a multiple of the block size ", block));
  }
  switch (type) {
    case GgmlType::kQ4_K: QuantizeQ4_K(x, n / block, dst); break;
    case GgmlType::kQ5_K: QuantizeQ5_K(x, n / block, dst); break;
    case GgmlType::kQ6_K: QuantizeQ6_K(x, n / block, dst); break;
    default: QuantizeQ1_0(x, n / block, dst); break;
  }
  return absl::OkStatus();
}

}  // namespace sluice::kernels
