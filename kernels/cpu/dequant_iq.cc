// Dequantizers for the codebook ("i-quant") types IQ1_S, IQ1_M, IQ2_XXS,
// IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S and the non-uniform IQ4_NL / IQ4_XS.
// Built with -ffp-contract=off; products keep ggml's order, e.g.
// (db * grid) * sign and dl * (grid + delta).
#include <cstring>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/dequant_internal.h"
#include "kernels/cpu/iq_grids.h"

namespace sluice::kernels::internal {
namespace {

template <typename Block>
const Block* As(const void* p) {
  return static_cast<const Block*>(p);
}

// Writes 8 elements db * grid[j], negated where bit j of `signs` is set.
// ggml multiplies by -1.f; flipping the sign bit is the same (exact) and
// avoids an unpredictable branch per element.
void EmitSigned8(float db, const uint8_t* grid, uint8_t signs, float* y) {
  for (int j = 0; j < 8; ++j) {
    const float v = db * static_cast<float>(grid[j]);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits ^= static_cast<uint32_t>((signs >> j) & 1) << 31;
    std::memcpy(&y[j], &bits, 4);
  }
}

uint32_t Load32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// IQ1 sub-block shift: +-1/8 added to every grid value before scaling.
constexpr float kIq1Delta = 0.125f;

}  // namespace

void DecodeIq2Xxs(const void* src, int64_t nb, float* y) {
  const IqGridTables& g = IqGrids();
  for (const BlockIq2Xxs* b = As<BlockIq2Xxs>(src); nb-- > 0; ++b) {
    const float d = Fp16ToF32(b->d);
    const auto* qs = reinterpret_cast<const uint8_t*>(b->qs);
    // Per 32 elements: 4 grid bytes, then 4 x 7 sign bits and a 4-bit scale.
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* idx = qs + 8 * ib;
      const uint32_t meta = Load32(idx + 4);
      const float db = d * (0.5f + static_cast<float>(meta >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) {
        EmitSigned8(db, g.iq2xxs[idx[l]], g.signs[(meta >> (7 * l)) & 127], y);
      }
    }
  }
}

void DecodeIq2Xs(const void* src, int64_t nb, float* y) {
  const IqGridTables& g = IqGrids();
  for (const BlockIq2Xs* b = As<BlockIq2Xs>(src); nb-- > 0; ++b) {
    const float d = Fp16ToF32(b->d);
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {
          d * (0.5f + static_cast<float>(b->scales[ib] & 0xF)) * 0.25f,
          d * (0.5f + static_cast<float>(b->scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        uint16_t code;
        std::memcpy(&code, reinterpret_cast<const uint8_t*>(b->qs) + 2 * (4 * ib + l), 2);
        EmitSigned8(db[l / 2], g.iq2xs[code & 511], g.signs[code >> 9], y);
      }
    }
  }
}

void DecodeIq2S(const void* src, int64_t nb, float* y) {
  const IqGridTables& g = IqGrids();
  for (const BlockIq2S* b = As<BlockIq2S>(src); nb-- > 0; ++b) {
    const float d = Fp16ToF32(b->d);
    const uint8_t* qs = b->qs;
    const uint8_t* signs = b->qs + 32;
    for (int ib = 0; ib < 8; ++ib, qs += 4, signs += 4) {
      const float db[2] = {
          d * (0.5f + static_cast<float>(b->scales[ib] & 0xF)) * 0.25f,
          d * (0.5f + static_cast<float>(b->scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const int index = qs[l] | (((b->qh[ib] >> (2 * l)) & 3) << 8);
        EmitSigned8(db[l / 2], g.iq2s[index], signs[l], y);
      }
    }
  }
}

void DecodeIq3Xxs(const void* src, int64_t nb, float* y) {
  const IqGridTables& g = IqGrids();
  for (const BlockIq3Xxs* b = As<BlockIq3Xxs>(src); nb-- > 0; ++b) {
    const float d = Fp16ToF32(b->d);
    const uint8_t* qs = b->qs;
    const uint8_t* meta_bytes = b->qs + 64;
    for (int ib = 0; ib < 8; ++ib, qs += 8) {
      const uint32_t meta = Load32(meta_bytes + 4 * ib);
      const float db = d * (0.5f + static_cast<float>(meta >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8) {
        uint8_t grid[8];
        std::memcpy(grid, g.iq3xxs[qs[2 * l]], 4);
        std::memcpy(grid + 4, g.iq3xxs[qs[2 * l + 1]], 4);
        EmitSigned8(db, grid, g.signs[(meta >> (7 * l)) & 127], y);
      }
    }
  }
}

void DecodeIq3S(const void* src, int64_t nb, float* y) {
  const IqGridTables& g = IqGrids();
  for (const BlockIq3S* b = As<BlockIq3S>(src); nb-- > 0; ++b) {
    const float d = Fp16ToF32(b->d);
    const uint8_t* qs = b->qs;
    const uint8_t* signs = b->signs;
    for (int ib = 0; ib < 8; ++ib, qs += 8, signs += 4) {
      const uint8_t sc = b->scales[ib / 2];
      const int scale = ib % 2 ? (sc >> 4) : (sc & 0xF);
      const float db = d * static_cast<float>(1 + 2 * scale);
      const uint8_t qh = b->qh[ib];
      for (int l = 0; l < 4; ++l, y += 8) {
        // Bits 2l and 2l+1 of qh are the 9th index bits of the two halves.
        uint8_t grid[8];
        std::memcpy(grid, g.iq3s[qs[2 * l] | (((qh >> (2 * l)) & 1) << 8)], 4);
        std::memcpy(grid + 4, g.iq3s[qs[2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8)], 4);
        EmitSigned8(db, grid, signs[l], y);
      }
    }
  }
}

void DecodeIq1S(const void* src, int64_t nb, float* y) {
  const IqGridTables& g = IqGrids();
  for (const BlockIq1S* b = As<BlockIq1S>(src); nb-- > 0; ++b) {
    const float d = Fp16ToF32(b->d);
    for (int ib = 0; ib < 8; ++ib) {
      uint16_t qh;
      std::memcpy(&qh, reinterpret_cast<const uint8_t*>(b->qh) + 2 * ib, 2);
      const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
      const float delta = qh & 0x8000 ? -kIq1Delta : kIq1Delta;
      for (int l = 0; l < 4; ++l, y += 8) {
        const int8_t* grid = g.iq1s[b->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
        for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<float>(grid[j]) + delta);
      }
    }
  }
}

void DecodeIq1M(const void* src, int64_t nb, float* y) {
  const IqGridTables& g = IqGrids();
  for (const BlockIq1M* b = As<BlockIq1M>(src); nb-- > 0; ++b) {
    uint16_t sc[4];
    std::memcpy(sc, b->scales, 8);
    // The fp16 super-block scale is spread over the top nibbles of sc[].
    const uint16_t dbits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                 ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
    const float d = Fp16ToF32(dbits);
    const uint8_t* qs = b->qs;
    const uint8_t* qh = b->qh;
    for (int ib = 0; ib < 8; ++ib, qs += 4, qh += 2) {
      const int shift = 6 * (ib % 2);
      const float dl[2] = {d * static_cast<float>(2 * ((sc[ib / 2] >> shift) & 7) + 1),
                           d * static_cast<float>(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1)};
      for (int l = 0; l < 4; ++l, y += 8) {
        // Group l's high index bits and delta sign: nibble (l % 2) of qh[l/2].
        const int nib = (qh[l / 2] >> (4 * (l % 2))) & 0xF;
        const int8_t* grid = g.iq1s[qs[l] | ((nib & 7) << 8)];
        const float delta = nib & 8 ? -kIq1Delta : kIq1Delta;
        for (int j = 0; j < 8; ++j) {
          y[j] = dl[l / 2] * (static_cast<float>(grid[j]) + delta);
        }
      }
    }
  }
}

void DecodeIq4Nl(const void* src, int64_t nb, float* y) {
  for (const BlockIq4Nl* b = As<BlockIq4Nl>(src); nb-- > 0; ++b, y += 32) {
    const float d = Fp16ToF32(b->d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4NlLevels[b->qs[j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kIq4NlLevels[b->qs[j] >> 4]);
    }
  }
}

void DecodeIq4Xs(const void* src, int64_t nb, float* y) {
  for (const BlockIq4Xs* b = As<BlockIq4Xs>(src); nb-- > 0; ++b) {
    const float d = Fp16ToF32(b->d);
    const uint8_t* qs = b->qs;
    for (int ib = 0; ib < 8; ++ib, qs += 16, y += 32) {
      const int ls = ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                     (((b->scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4NlLevels[qs[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIq4NlLevels[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace sluice::kernels::internal
