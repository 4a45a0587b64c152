// Portable dot-product kernels. The quantized ones follow the structure of
// ggml's generic vec_dot: exact integer sums per (sub-)block, then one float
// multiply by the block scales and a float accumulation over blocks.
#include <cstring>
#include <type_traits>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matvec_internal.h"

namespace sluice::kernels::internal {
namespace {

float H(uint16_t h) { return Fp16ToF32(h); }

float DotF32(const void* w, const void* a, int64_t n) {
  return DotF32Scalar(static_cast<const float*>(w), static_cast<const float*>(a), n);
}

// The activation was rounded to fp16 / bf16 already (ActFormat kF16R /
// kBf16R), so every product here is exact in f32. ToF32 widens one stored
// half of the weight row.
template <float (*ToF32)(uint16_t)>
float DotHalf(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* af = static_cast<const float*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, wb + 2 * i, 2);
    sum += ToF32(h) * af[i];
  }
  return sum;
}

float DotQ8_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / 32; ++i) {
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += x[i].qs[j] * y[i].qs[j];
    sum += static_cast<float>(isum) * (H(x[i].d) * H(y[i].d));
  }
  return sum;
}

// A 128-element Q1_0 block spans four Q8_0 activation blocks.
float DotQ1_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ1_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / 128; ++i) {
    float block = 0.f;
    for (int k = 0; k < 4; ++k) {
      const BlockQ8_0& yb = y[4 * i + k];
      int isum = 0;
      for (int j = 0; j < 32; ++j) {
        const bool bit = (x[i].qs[4 * k + j / 8] >> (j % 8)) & 1;
        isum += bit ? yb.qs[j] : -yb.qs[j];
      }
      block += H(yb.d) * static_cast<float>(isum);
    }
    sum += H(x[i].d) * block;
  }
  return sum;
}

// Q4_1 / Q5_1: sum (d_w q_w + m_w) d_a q_a = d_w d_a sum(q_w q_a) + m_w s_a,
// with s_a = d_a * sum(q_a) as stored (fp16) in the Q8_1 block.
template <bool kFiveBit>
float DotQx_1(const void* w, const void* a, int64_t n) {
  using Block = std::conditional_t<kFiveBit, BlockQ5_1, BlockQ4_1>;
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / 32; ++i) {
    uint32_t qh = 0;
    if constexpr (kFiveBit) std::memcpy(&qh, x[i].qh, 4);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int v0 = (x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
      const int v1 = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      isum += v0 * y[i].qs[j] + v1 * y[i].qs[j + 16];
    }
    sum += (H(x[i].d) * H(y[i].d)) * static_cast<float>(isum) + H(x[i].m) * H(y[i].s);
  }
  return sum;
}

// Sum over the 8 sub-blocks of 32 of scale[s] * <q[s], a[s]>, and of
// min[s] * (activation sum of sub-block s), for Q4_K / Q5_K.
template <bool kFiveBit>
float DotQxK(const void* w, const void* a, int64_t n) {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0, msum = 0;
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      KScaleMin(s, x[i].scales, &sc, &m);
      const uint8_t* q = x[i].qs + 32 * (s / 2);
      const int8_t* q8 = y[i].qs + 32 * s;
      int sub = 0;
      for (int l = 0; l < 32; ++l) {
        int v = s % 2 ? (q[l] >> 4) : (q[l] & 0xF);
        if constexpr (kFiveBit) v += ((x[i].qh[l] >> s) & 1) << 4;
        sub += v * q8[l];
      }
      isum += sc * sub;
      msum += m * (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
    }
    sum += H(x[i].d) * y[i].d * static_cast<float>(isum);
    sum -= H(x[i].dmin) * y[i].d * static_cast<float>(msum);
  }
  return sum;
}

float DotQ6_K(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const uint8_t* qh = x[i].qh + 32 * h;
      for (int k = 0; k < 4; ++k) {
        const int8_t* q8 = y[i].qs + 128 * h + 32 * k;
        for (int g = 0; g < 2; ++g) {
          int sub = 0;
          for (int l = 16 * g; l < 16 * g + 16; ++l) {
            const uint8_t lo = ql[l + 32 * (k & 1)];
            const int low = k < 2 ? (lo & 0xF) : (lo >> 4);
            const int q = (low | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
            sub += q * q8[l];
          }
          isum += x[i].scales[8 * h + 2 * k + g] * sub;
        }
      }
    }
    sum += H(x[i].d) * y[i].d * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace

float DotF32Scalar(const float* a, const float* b, int64_t n) {
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

VecDotFn FindVecDotScalar(GgmlType wtype) {
  switch (wtype) {
    case GgmlType::kF32: return DotF32;
    case GgmlType::kF16: return DotHalf<Fp16ToF32>;
    case GgmlType::kBF16: return DotHalf<Bf16ToF32>;
    case GgmlType::kQ8_0: return DotQ8_0;
    case GgmlType::kQ1_0: return DotQ1_0;
    case GgmlType::kQ4_1: return DotQx_1<false>;
    case GgmlType::kQ5_1: return DotQx_1<true>;
    case GgmlType::kQ4_K: return DotQxK<false>;
    case GgmlType::kQ5_K: return DotQxK<true>;
    case GgmlType::kQ6_K: return DotQ6_K;
    default: return nullptr;
  }
}

}  // namespace sluice::kernels::internal
