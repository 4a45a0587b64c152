// Per-type block decoders behind DequantizeRow (internal to kernels/cpu).
//
// Each decodes `nb` consecutive blocks of its type from `src` into
// dst[0 .. nb * elements_per_block), with the exact float operations of
// ggml's to_float (so results match bit for bit). No argument checking.
#ifndef SLUICE_KERNELS_CPU_DEQUANT_INTERNAL_H_
#define SLUICE_KERNELS_CPU_DEQUANT_INTERNAL_H_

#include <cstdint>

namespace sluice::kernels::internal {

using BlockDecoder = void (*)(const void* src, int64_t nb, float* dst);

void DecodeIq2Xxs(const void* src, int64_t nb, float* dst);
void DecodeIq2Xs(const void* src, int64_t nb, float* dst);
void DecodeIq2S(const void* src, int64_t nb, float* dst);
void DecodeIq3Xxs(const void* src, int64_t nb, float* dst);
void DecodeIq3S(const void* src, int64_t nb, float* dst);
void DecodeIq1S(const void* src, int64_t nb, float* dst);
void DecodeIq1M(const void* src, int64_t nb, float* dst);
void DecodeIq4Nl(const void* src, int64_t nb, float* dst);
void DecodeIq4Xs(const void* src, int64_t nb, float* dst);

}  // namespace sluice::kernels::internal

#endif  // SLUICE_KERNELS_CPU_DEQUANT_INTERNAL_H_
