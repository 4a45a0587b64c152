#include "kernels/cpu/test_util.h"

#include <cstring>

#include "kernels/cpu/dequant.h"

namespace sluice::kernels::testing_util {
namespace {

// Where each type keeps its fp16 scales (byte offsets in a block): random
// bytes there could be inf/NaN, so tests overwrite them with sane values.
std::vector<int> Fp16ScaleOffsets(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: return {0, 2};
    case GgmlType::kQ2_K: return {80, 82};
    case GgmlType::kQ3_K: return {108};
    case GgmlType::kQ6_K: return {208};
    case GgmlType::kTQ1_0: return {52};
    case GgmlType::kTQ2_0: return {64};
    case GgmlType::kQ2_0: return {0, 18};  // two 64-element blocks per table block
    case GgmlType::kMXFP4:
    case GgmlType::kNVFP4:
    case GgmlType::kIQ1_M: return {};
    default: return {0};
  }
}

}  // namespace

// Random but well-formed weights: `rows` rows of `cols` elements.
std::vector<uint8_t> RandomWeights(GgmlType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  const int64_t row_bytes = *RowBytes(t, cols);
  std::vector<uint8_t> w(rows * row_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f), val(-1.f, 1.f);
  if (t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16) {
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float v = val(rng);
      const uint16_t h = t == GgmlType::kF16 ? F32ToFp16(v) : F32ToBf16(v);
      if (t == GgmlType::kF32) {
        std::memcpy(&w[4 * i], &v, 4);
      } else {
        std::memcpy(&w[2 * i], &h, 2);
      }
    }
    return w;
  }
  for (uint8_t& b : w) b = static_cast<uint8_t>(byte(rng));
  const GgmlTypeTraits& tr = TraitsOf(t);
  for (int64_t off = 0; off < static_cast<int64_t>(w.size()); off += tr.bytes_per_block) {
    for (int o : Fp16ScaleOffsets(t)) {
      const uint16_t h = F32ToFp16(scale(rng));
      std::memcpy(&w[off + o], &h, 2);
    }
    if (t == GgmlType::kMXFP4) w[off] = static_cast<uint8_t>(118 + byte(rng) % 8);
    if (t == GgmlType::kIQ1_M) {
      // The fp16 scale lives in the top nibble of each of 4 uint16 at 48.
      const uint16_t h = F32ToFp16(scale(rng));
      for (int k = 0; k < 4; ++k) {
        uint8_t& hi = w[off + 48 + 2 * k + 1];
        hi = static_cast<uint8_t>((hi & 0x0F) | (((h >> (4 * k)) & 0xF) << 4));
      }
    }
  }
  return w;
}

}  // namespace sluice::kernels::testing_util
