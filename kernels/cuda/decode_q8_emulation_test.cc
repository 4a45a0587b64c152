// The 8-bit decode products (decode_q8.h) run on the CPU through
// host_emulation.h: the same source nvcc compiles, so a chunk's element
// layout, the sub-block scales and minimums, Q6_K's offset and the
// vector's 32-groups are checked on every machine. Against a
// double-precision reference from the CPU dequantizer: exact (to float
// rounding) on vectors that 8 bits represent exactly, and within the
// quantization bound on any vector.
#include "kernels/cuda/host_emulation.h"  // first: stands in for CUDA

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/decode_q8.h"
#include "loader/ggml_type.h"

namespace sluice::cuda::internal {
namespace {

constexpr int64_t kCols = 1024;
constexpr int kRows = 4;

struct QuantizedVector {
  std::vector<int8_t> q;
  std::vector<float> d, s16;
  int shift;
  Q8Vector view() const { return {q.data(), d.data(), s16.data(), shift}; }
  float step(int64_t i) const { return d[i >> shift]; }
};

// In groups of 32 (shift 5) or as Q8_K (256, shift 8).
QuantizedVector Quantize(const std::vector<float>& x, int shift) {
  const int64_t n = static_cast<int64_t>(x.size());
  QuantizedVector v{std::vector<int8_t>(n), std::vector<float>(n >> shift),
                    std::vector<float>(n / 16), shift};
  auto at = [&](int64_t e) { return x[e]; };
  for (int g = 0; g < (n >> shift); ++g) {
    if (shift == kQ8KShift) {
      QuantizeGroupQ8K(at, g, v.q.data(), v.d.data(), v.s16.data());
    } else {
      QuantizeGroupQ8(at, g, v.q.data(), v.d.data(), v.s16.data());
    }
  }
  return v;
}

// The row's product with the vector, chunk by chunk as the kernels add it.
template <class T>
double Q8Row(const uint8_t* row, int64_t cols, const Q8Vector& xv) {
  double sum = 0;
  for (int64_t c = 0; c < cols / T::kChunk; ++c) {
    typename T::Raw raw;
    T::Load(row, c, raw);
    typename Q8Dot<T>::X x;
    Q8Dot<T>::Load(xv, c, x);
    sum += Q8Dot<T>::Dot(raw, x);
  }
  return sum;
}

double Q8RowOf(GgmlType t, const uint8_t* row, int64_t cols, const Q8Vector& xv) {
  switch (t) {
    case GgmlType::kQ4_K: return Q8Row<KWeights<false>>(row, cols, xv);
    case GgmlType::kQ5_K: return Q8Row<KWeights<true>>(row, cols, xv);
    case GgmlType::kQ6_K: return Q8Row<Q6KWeights>(row, cols, xv);
    case GgmlType::kQ8_0: return Q8Row<Q8_0Weights>(row, cols, xv);
    default: ADD_FAILURE() << "no Q8Dot for " << kernels::TypeName(t); return 0;
  }
}

class DecodeQ8Test : public ::testing::TestWithParam<std::tuple<GgmlType, int>> {
 protected:
  GgmlType type() const { return std::get<0>(GetParam()); }
  int shift() const { return std::get<1>(GetParam()); }
  void SetUp() override {
    std::mt19937 rng(17);
    bytes_ = kernels::testing_util::RandomWeights(type(), kRows, kCols, rng);
    row_bytes_ = *kernels::RowBytes(type(), kCols);
    w_.resize(kRows * kCols);
    for (int r = 0; r < kRows; ++r) {
      ASSERT_TRUE(kernels::DequantizeRow(type(), bytes_.data() + r * row_bytes_, kCols,
                                         w_.data() + r * kCols)
                      .ok());
    }
  }
  // sum_i w[r][i] x[i] and sum_i |w[r][i] x[i]| in double.
  void Reference(int r, const std::vector<float>& x, double* dot, double* abs) const {
    *dot = *abs = 0;
    for (int64_t i = 0; i < kCols; ++i) {
      *dot += static_cast<double>(w_[r * kCols + i]) * x[i];
      *abs += std::fabs(static_cast<double>(w_[r * kCols + i]) * x[i]);
    }
  }
  std::vector<uint8_t> bytes_;
  int64_t row_bytes_ = 0;
  std::vector<float> w_;
};

// x = d_g * k with integers |k| <= 127, one of them -127 per group, d_g a
// power of two: either quantizer reproduces x exactly, so the 8-bit product
// must equal the float product up to rounding.
TEST_P(DecodeQ8Test, ExactOnVectorsThatEightBitsRepresent) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> k(-127, 127), e(-6, 3);
  std::vector<float> x(kCols);
  const int group = 1 << shift();
  for (int64_t g = 0; g < kCols / group; ++g) {
    const float d = std::ldexp(1.0f, e(rng));
    for (int i = 0; i < group; ++i) {
      x[group * g + i] = d * static_cast<float>(i == 7 ? -127 : k(rng));
    }
  }
  const QuantizedVector v = Quantize(x, shift());
  for (int64_t i = 0; i < kCols; ++i) {
    ASSERT_EQ(static_cast<float>(v.q[i]) * v.step(i), x[i]) << "element " << i;
  }
  for (int r = 0; r < kRows; ++r) {
    double dot, abs;
    Reference(r, x, &dot, &abs);
    const double got = Q8RowOf(type(), bytes_.data() + r * row_bytes_, kCols, v.view());
    EXPECT_NEAR(got, dot, 2e-6 * abs) << "row " << r;
  }
}

// Any vector: each element is off by at most half its group's step, so the
// product is off by at most sum_i |w_i| d_g / 2 plus, for the K-quants, the
// sub-block minimum's share (bounded here by 2 max|w| per element); a wrong
// element or scale layout misses by the product's own size.
TEST_P(DecodeQ8Test, WithinTheQuantizationBoundOnAnyVector) {
  std::mt19937 rng(9);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> x(kCols);
  for (float& v : x) v = n01(rng);
  const QuantizedVector v = Quantize(x, shift());
  for (int64_t i = 0; i < kCols; ++i) {
    const float step = std::fabs(v.step(i));
    ASSERT_LE(std::fabs(static_cast<float>(v.q[i]) * v.step(i) - x[i]), 0.5001f * step);
  }
  for (int r = 0; r < kRows; ++r) {
    double dot, abs, bound = 0, wmax = 0;
    Reference(r, x, &dot, &abs);
    for (int64_t i = 0; i < kCols; ++i) wmax = std::fmax(wmax, std::fabs(w_[r * kCols + i]));
    for (int64_t i = 0; i < kCols; ++i) bound += 2 * wmax * std::fabs(v.step(i)) / 2;
    const double got = Q8RowOf(type(), bytes_.data() + r * row_bytes_, kCols, v.view());
    EXPECT_NEAR(got, dot, bound) << "row " << r;
    // The typical error is far below that bound (random signs).
    EXPECT_LT(std::fabs(got - dot), (shift() == kQ8KShift ? 0.04 : 0.02) * abs) << "row " << r;
  }
}

// The Q8_K groups take the minimum terms from the quantized sums, so a
// chunk must see the right sums there too.
TEST(DecodeQ8KTest, SumsAreTheScaledSumsOfTheQuantizedValues) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> x(512);
  for (float& v : x) v = n01(rng);
  const QuantizedVector v = Quantize(x, kQ8KShift);
  for (int c = 0; c < 32; ++c) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += v.q[16 * c + i];
    EXPECT_EQ(v.s16[c], v.d[c / 16] * static_cast<float>(sum)) << "chunk " << c;
  }
  // The scale is minus the group's extreme over 127: the extreme maps to -127.
  for (int g = 0; g < 2; ++g) {
    int extreme = 0;
    for (int i = 0; i < 256; ++i) {
      if (std::fabs(x[256 * g + i]) > std::fabs(x[256 * g + extreme])) extreme = i;
    }
    EXPECT_EQ(v.q[256 * g + extreme], -127) << "group " << g;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, DecodeQ8Test,
    ::testing::Combine(::testing::Values(GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                                         GgmlType::kQ8_0),
                       ::testing::Values(5, kQ8KShift)),
    [](const auto& info) {
      return kernels::TypeName(std::get<0>(info.param)) +
             (std::get<1>(info.param) == kQ8KShift ? "_q8k" : "_g32");
    });

}  // namespace
}  // namespace sluice::cuda::internal
