// Activation conversion before quantized dot products, reproducing the
// rounding of ggml's x86 CPU backend so the same activations are seen:
//   Q8_0 / Q8_1 (AVX path): d = amax / 127 stored as fp16, but the values
//     are scaled by 127 / amax (not 1 / fp16(d)) and rounded half to even;
//     Q8_1 also stores s = fp16(d * sum(q)) with the unrounded d.
//   Q8_K (reference path, used on x86 too): scale -127 / max where max is
//     the signed value of largest magnitude (first one wins), values
//     rounded half to even and clamped to 127, d = 1 / scale in f32,
//     bsums = sums of 16 consecutive values.
// Built with -ffp-contract=off.
#include <cmath>
#include <cstring>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matvec_internal.h"

namespace sluice::kernels::internal {
namespace {

int8_t RoundToI8(float v) {
  float r = std::nearbyint(v);
  r = r > 127.f ? 127.f : (r < -128.f ? -128.f : r);
  return static_cast<int8_t>(r);
}

// Quantizes 32 values; returns the sum of the quantized values. `d_out` is
// the unrounded scale.
int QuantizeBlock32(const float* x, int8_t* q, uint16_t* d_fp16, float* d_out) {
  float amax = 0.f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  const float id = amax != 0.f ? 127.f / amax : 0.f;
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    q[j] = RoundToI8(x[j] * id);
    sum += q[j];
  }
  *d_fp16 = F32ToFp16(d);
  *d_out = d;
  return sum;
}

void ToQ8_0(const float* x, int64_t cols, void* out) {
  const int64_t nb = cols / 32;
  auto* b = static_cast<BlockQ8_0*>(out);
  if (DetectIsa() != Isa::kScalar) {
    QuantizeRowQ8_0Avx2(x, cols, out);
  } else {
    for (int64_t i = 0; i < nb; ++i) {
      float d;
      QuantizeBlock32(x + 32 * i, b[i].qs, &b[i].d, &d);
    }
  }
  // The wide-vector copy: values contiguous, scales as f32 (see
  // ActQ8_0Values / ActQ8_0Scales).
  auto* values = reinterpret_cast<int8_t*>(b + nb);
  auto* scales = reinterpret_cast<uint8_t*>(values + cols);
  for (int64_t i = 0; i < nb; ++i) {
    std::memcpy(values + 32 * i, b[i].qs, 32);
    const float d = Fp16ToF32(b[i].d);
    std::memcpy(scales + 4 * i, &d, 4);
  }
}

void ToQ8_1(const float* x, int64_t cols, void* out) {
  auto* b = static_cast<BlockQ8_1*>(out);
  for (int64_t i = 0; i < cols / 32; ++i) {
    float d;
    const int sum = QuantizeBlock32(x + 32 * i, b[i].qs, &b[i].d, &d);
    b[i].s = F32ToFp16(d * static_cast<float>(sum));
  }
}

void ToQ8_K(const float* x, int64_t cols, void* out) {
  if (DetectIsa() != Isa::kScalar) {
    QuantizeRowQ8_KAvx2(x, cols, out);
    return;
  }
  auto* b = static_cast<BlockQ8_K*>(out);
  for (int64_t i = 0; i < cols / kQK; ++i, x += kQK) {
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < kQK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK; ++j) {
      const float v = std::nearbyint(iscale * x[j]);
      b[i].qs[j] = static_cast<int8_t>(v > 127.f ? 127.f : v);
    }
    for (int g = 0; g < kQK / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b[i].qs[16 * g + j];
      b[i].bsums[g] = static_cast<int16_t>(sum);
    }
    b[i].d = 1.f / iscale;
  }
}

}  // namespace

int ActBlock(ActFormat format) {
  switch (format) {
    case ActFormat::kQ8_0:
    case ActFormat::kQ8_1: return 32;
    case ActFormat::kQ8_K: return kQK;
    default: return 1;
  }
}

int64_t ActRowBytes(ActFormat format, int64_t cols) {
  switch (format) {
    case ActFormat::kQ8_0:
      return cols / 32 * static_cast<int64_t>(sizeof(BlockQ8_0) + 32 + sizeof(float));
    case ActFormat::kQ8_1: return cols / 32 * static_cast<int64_t>(sizeof(BlockQ8_1));
    case ActFormat::kQ8_K: return cols / kQK * static_cast<int64_t>(sizeof(BlockQ8_K));
    default: return cols * static_cast<int64_t>(sizeof(float));
  }
}

void ConvertActivation(ActFormat format, const float* x, int64_t cols, void* out) {
  float* f = static_cast<float*>(out);
  switch (format) {
    case ActFormat::kF32:
      std::memcpy(out, x, cols * sizeof(float));
      return;
    case ActFormat::kF16R:
      for (int64_t i = 0; i < cols; ++i) f[i] = Fp16ToF32(F32ToFp16(x[i]));
      return;
    case ActFormat::kBf16R:
      for (int64_t i = 0; i < cols; ++i) f[i] = Bf16ToF32(F32ToBf16(x[i]));
      return;
    case ActFormat::kQ8_0: ToQ8_0(x, cols, out); return;
    case ActFormat::kQ8_1: ToQ8_1(x, cols, out); return;
    case ActFormat::kQ8_K: ToQ8_K(x, cols, out); return;
  }
}

ActFormat ActFormatFor(GgmlType wtype) {
  switch (wtype) {
    case GgmlType::kF32: return ActFormat::kF32;
    case GgmlType::kF16: return ActFormat::kF16R;
    case GgmlType::kBF16: return ActFormat::kBf16R;
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1: return ActFormat::kQ8_1;
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ1_0:
    case GgmlType::kQ2_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kMXFP4:
    case GgmlType::kNVFP4: return ActFormat::kQ8_0;
    default: return ActFormat::kQ8_K;
  }
}

}  // namespace sluice::kernels::internal
