#include "kernels/cpu/quantize.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"

namespace sluice::kernels {
namespace {

// Gaussian rows with a per-row scale spread over two decades, like weights
// of differently scaled tensors.
std::vector<float> GaussianRows(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = std::pow(10.0f, -2.0f + 2.0f * static_cast<float>(r) / rows);
    for (int64_t c = 0; c < cols; ++c) x[r * cols + c] = scale * normal(rng);
  }
  return x;
}

// Quantizes and dequantizes each row; returns the worst per-row relative
// RMS error |deq - x|_2 / |x|_2.
double WorstRowRelRms(GgmlType type, const std::vector<float>& x, int64_t cols) {
  const int64_t rows = static_cast<int64_t>(x.size()) / cols;
  const int64_t row_bytes = *RowBytes(type, cols);
  std::vector<uint8_t> q(row_bytes);
  std::vector<float> y(cols);
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * cols;
    EXPECT_TRUE(QuantizeRow(type, row, cols, q.data()).ok());
    EXPECT_TRUE(DequantizeRow(type, q.data(), cols, y.data()).ok());
    double err = 0, norm = 0;
    for (int64_t c = 0; c < cols; ++c) {
      err += (y[c] - row[c]) * (y[c] - row[c]);
      norm += row[c] * row[c];
    }
    worst = std::max(worst, std::sqrt(err / norm));
  }
  return worst;
}

struct Bound {
  GgmlType type;
  double max_rel_rms;
};

class QuantizeRoundTripTest : public ::testing::TestWithParam<Bound> {};

TEST_P(QuantizeRoundTripTest, GaussianRowsDecodeClose) {
  const Bound b = GetParam();
  const std::vector<float> x = GaussianRows(64, 1024, 7);
  const double worst = WorstRowRelRms(b.type, x, 1024);
  std::printf("%s: worst row relative RMS error %.4f (bound %.3f)\n",
              TypeName(b.type).c_str(), worst, b.max_rel_rms);
  EXPECT_LT(worst, b.max_rel_rms);
}

// Q1_0 keeps only signs: for Gaussian data the best possible relative RMS
// error is sqrt(1 - 2/pi) = 0.603; anything near it is right.
INSTANTIATE_TEST_SUITE_P(Types, QuantizeRoundTripTest,
                         ::testing::Values(Bound{GgmlType::kQ4_K, 0.1},
                                           Bound{GgmlType::kQ5_K, 0.05},
                                           Bound{GgmlType::kQ6_K, 0.03},
                                           Bound{GgmlType::kQ1_0, 0.65}),
                         [](const auto& info) { return TypeName(info.param.type); });

TEST(QuantizeTest, Q1_0IsSignTimesMeanAbs) {
  std::vector<float> x(128);
  double sum = 0;
  for (int i = 0; i < 128; ++i) {
    x[i] = (i % 3 == 0 ? -1.0f : 1.0f) * (0.5f + static_cast<float>(i) / 64);
    sum += std::fabs(x[i]);
  }
  x[5] = 0.0f;  // zero takes the + sign
  sum -= std::fabs(0.5f + 5.0f / 64);
  uint8_t q[18];
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ1_0, x.data(), 128, q).ok());
  uint16_t d;
  std::memcpy(&d, q, 2);
  EXPECT_EQ(d, F32ToFp16(static_cast<float>(sum / 128)));
  std::vector<float> y(128);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ1_0, q, 128, y.data()).ok());
  const float dd = Fp16ToF32(d);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(y[i], x[i] >= 0 ? dd : -dd) << i;
}

TEST(QuantizeTest, ExactValuesSurviveQ6_K) {
  // Integers in [-31, 31] times 2^-4 in each 16-element sub-block with
  // amax 31/16: step 1/16 is representable, so the round trip is exact.
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>((i * 7) % 63 - 31) / 16;
  for (int j = 0; j < 16; ++j) x[16 * j] = 31.0f / 16;
  std::vector<uint8_t> q(210);
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ6_K, x.data(), 256, q.data()).ok());
  std::vector<float> y(256);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ6_K, q.data(), 256, y.data()).ok());
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(y[i], x[i], 1e-3) << i;
}

TEST(QuantizeTest, ZerosStayZero) {
  std::vector<float> x(256, 0.0f), y(256, 1.0f);
  std::vector<uint8_t> q(210);
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    ASSERT_TRUE(QuantizeRow(t, x.data(), 256, q.data()).ok());
    ASSERT_TRUE(DequantizeRow(t, q.data(), 256, y.data()).ok());
    for (float v : y) ASSERT_EQ(v, 0.0f) << TypeName(t);
  }
}

TEST(QuantizeTest, RejectsBadArguments) {
  float x[256] = {};
  uint8_t q[256];
  absl::Status s = QuantizeRow(GgmlType::kQ4_K, x, 100, q);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "q4_k: n=100 is not a multiple of the block size 256");
  s = QuantizeRow(GgmlType::kIQ2_XXS, x, 256, q);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "iq2_xxs: quantization not supported");
}

}  // namespace
}  // namespace sluice::kernels
