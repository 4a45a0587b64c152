// Number formats mkmodel writes: IEEE half and Q8_0 blocks.
#include <cmath>
#include <cstring>

#include "model/testing/mkmodel.h"

namespace sluice::mkmodel {

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs >= 0x7F800000) {  // inf or NaN (NaN keeps a quiet payload bit)
    return sign | 0x7C00 | (abs > 0x7F800000 ? 0x200 : 0);
  }
  if (abs >= 0x477FF000) return sign | 0x7C00;  // rounds past 65504
  if (abs < 0x38800000) {                       // half subnormal or zero
    // Scale so the half subnormal unit (2^-24) becomes 1, then round to even.
    float a;
    std::memcpy(&a, &abs, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to even.
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rest = abs & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return sign | static_cast<uint16_t>(h);
}

void QuantizeQ8_0(const float* x, uint64_t n, std::vector<uint8_t>& out) {
  constexpr int kBlock = 32;
  for (uint64_t b = 0; b < n / kBlock; ++b) {
    const float* v = x + b * kBlock;
    float amax = 0;
    for (int i = 0; i < kBlock; ++i) amax = std::fmax(amax, std::fabs(v[i]));
    const float d = amax / 127.0f;
    const float inv = d != 0 ? 1.0f / d : 0.0f;
    const uint16_t dh = FloatToHalf(d);
    uint8_t block[2 + kBlock];
    std::memcpy(block, &dh, 2);
    for (int i = 0; i < kBlock; ++i) {
      block[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::round(v[i] * inv)));
    }
    out.insert(out.end(), block, block + sizeof(block));
  }
}

}  // namespace sluice::mkmodel
