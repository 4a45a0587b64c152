// Byte layouts of ggml quantization blocks (internal to kernels/cpu).
//
// Field order and sizes follow the GGUF/ggml on-disk format; every struct is
// byte-aligned so a block can sit at any address. docs/QUANT_FORMATS.md
// explains what each field means. fp16 fields are raw IEEE half bits.
#ifndef SLUICE_KERNELS_CPU_BLOCKS_H_
#define SLUICE_KERNELS_CPU_BLOCKS_H_

#include <cstdint>

namespace sluice::kernels::internal {

inline constexpr int kQK = 256;  // super-block of the K, IQ and TQ types

#pragma pack(push, 1)
struct BlockQ1_0 { uint16_t d; uint8_t qs[16]; };               // 128
struct BlockQ2_0 { uint16_t d; uint8_t qs[16]; };               // 64
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };               // 32
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };            // 32
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };  // 32
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ8_1 { uint16_t d, s; int8_t qs[32]; };
struct BlockMxfp4 { uint8_t e; uint8_t qs[16]; };               // 32
struct BlockNvfp4 { uint8_t d[4]; uint8_t qs[32]; };            // 64
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[256]; int16_t bsums[16]; };
struct BlockTq1_0 { uint8_t qs[48]; uint8_t qh[4]; uint16_t d; };
struct BlockTq2_0 { uint8_t qs[64]; uint16_t d; };
struct BlockIq2Xxs { uint16_t d; uint16_t qs[32]; };
struct BlockIq2Xs { uint16_t d; uint16_t qs[32]; uint8_t scales[8]; };
struct BlockIq2S { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t scales[8]; };
struct BlockIq3Xxs { uint16_t d; uint8_t qs[96]; };
struct BlockIq3S { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4]; };
struct BlockIq1S { uint16_t d; uint8_t qs[32]; uint16_t qh[8]; };
struct BlockIq1M { uint8_t qs[32]; uint8_t qh[16]; uint8_t scales[8]; };
struct BlockIq4Nl { uint16_t d; uint8_t qs[16]; };
struct BlockIq4Xs { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };
#pragma pack(pop)

static_assert(sizeof(BlockQ1_0) == 18 && sizeof(BlockQ2_0) == 18);
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockMxfp4) == 17 && sizeof(BlockNvfp4) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockTq1_0) == 54 && sizeof(BlockTq2_0) == 66);
static_assert(sizeof(BlockIq2Xxs) == 66 && sizeof(BlockIq2Xs) == 74);
static_assert(sizeof(BlockIq2S) == 82 && sizeof(BlockIq3Xxs) == 98);
static_assert(sizeof(BlockIq3S) == 110 && sizeof(BlockIq1S) == 50);
static_assert(sizeof(BlockIq1M) == 56 && sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockIq4Xs) == 136);

// Non-uniform 4-bit levels of IQ4_NL / IQ4_XS (format data).
inline constexpr int8_t kIq4NlLevels[16] = {-127, -104, -83, -65, -49, -35,
                                            -22,  -10,  1,   13,  25,  38,
                                            53,   69,   89,  113};
// FP4 E2M1 values times two (0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives),
// shared by MXFP4 and NVFP4; the block scales are halved to compensate.
inline constexpr int8_t kFp4Levels[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                          0, -1, -2, -3, -4, -6, -8, -12};

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block.
inline void KScaleMin(int j, const uint8_t* s, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

}  // namespace sluice::kernels::internal

#endif  // SLUICE_KERNELS_CPU_BLOCKS_H_
