// Test and benchmark helpers for kernels/cpu (testonly).
#ifndef SLUICE_KERNELS_CPU_TEST_UTIL_H_
#define SLUICE_KERNELS_CPU_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <vector>

#include "format/ggml_type.h"

namespace sluice::kernels::testing_util {

// `rows` rows of `cols` elements of type `t` with random quant bits and
// sane block scales (about 0.002..0.02; F32/F16/BF16 values in [-1, 1]),
// so every decoded value is finite. Precondition: cols is a multiple of
// the type's block size and `t` is dequantizable.
std::vector<uint8_t> RandomWeights(GgmlType t, int64_t rows, int64_t cols, std::mt19937& rng);

}  // namespace sluice::kernels::testing_util

#endif  // SLUICE_KERNELS_CPU_TEST_UTIL_H_
