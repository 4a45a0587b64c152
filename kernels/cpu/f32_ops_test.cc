#include "kernels/cpu/f32_ops.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::kernels {
namespace {

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// Bit equality, so -0 and +0 differ and NaNs compare.
bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST(F32OpsTest, DispatchedVersionsGiveThePortableBits) {
  std::mt19937 rng(5);
  for (int64_t n : {0, 3, 8, 13, 32, 64, 67}) {
    SCOPED_TRACE(n);
    const std::vector<float> a = Random(n, rng), b = Random(n, rng), q = Random(n, rng);
    EXPECT_TRUE(SameBits(DotLanes(a.data(), b.data(), n),
                         internal::DotLanesScalar(a.data(), b.data(), n)));
    std::vector<float> y1 = Random(n, rng), y2 = y1;
    AxpyF32(0.37f, a.data(), y1.data(), n);
    internal::AxpyF32Scalar(0.37f, a.data(), y2.data(), n);
    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), n * sizeof(float)), 0);
    EXPECT_TRUE(SameBits(ScaleDotLanes(0.9f, y1.data(), b.data(), n),
                         internal::ScaleDotLanesScalar(0.9f, y2.data(), b.data(), n)));
    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), n * sizeof(float)), 0);
    EXPECT_TRUE(SameBits(AxpyDotLanes(-1.3f, a.data(), y1.data(), q.data(), n),
                         internal::AxpyDotLanesScalar(-1.3f, a.data(), y2.data(), q.data(), n)));
    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), n * sizeof(float)), 0);
  }
}

TEST(F32OpsTest, RowVersionsEqualTheOneRowOpsRowAfterRow) {
  std::mt19937 rng(8);
  const int64_t n = 19, n_rows = 5, stride = 24;
  const std::vector<float> a = Random(n, rng), rows = Random(n_rows * stride, rng),
                           w = Random(n_rows, rng);
  std::vector<float> dots(n_rows);
  DotRowsLanes(a.data(), rows.data(), stride, n_rows, n, dots.data());
  std::vector<float> want = Random(n, rng), got = want;
  AxpyRowsF32(w.data(), rows.data(), stride, n_rows, n, got.data());
  for (int64_t j = 0; j < n_rows; ++j) {
    EXPECT_TRUE(SameBits(dots[j], internal::DotLanesScalar(a.data(), rows.data() + j * stride, n)))
        << j;
    internal::AxpyF32Scalar(w[j], rows.data() + j * stride, want.data(), n);
  }
  EXPECT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0);
}

TEST(F32OpsTest, DeltaRuleStepIsScaleDotThenAxpyDotPerRow) {
  std::mt19937 rng(9);
  const int64_t n = 12;
  const std::vector<float> q = Random(n, rng), k = Random(n, rng), v = Random(n, rng);
  std::vector<float> s1 = Random(n * n, rng), s2 = s1, o1(n), o2(n);
  DeltaRuleStep(s1.data(), n, q.data(), k.data(), v.data(), 0.8f, 0.3f, o1.data());
  for (int64_t i = 0; i < n; ++i) {
    float* row = s2.data() + i * n;
    const float delta = (v[i] - internal::ScaleDotLanesScalar(0.8f, row, k.data(), n)) * 0.3f;
    o2[i] = internal::AxpyDotLanesScalar(delta, k.data(), row, q.data(), n);
  }
  EXPECT_EQ(std::memcmp(o1.data(), o2.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(s1.data(), s2.data(), n * n * sizeof(float)), 0);
}

TEST(F32OpsTest, LaneOrderIsTheDocumentedOne) {
  // Partial sums chosen so that another combination order rounds
  // differently: 1e8 + 1 - 1e8 depends on the grouping.
  std::vector<float> a(9, 0.f), b(9, 1.f);
  a[0] = 1e8f;
  a[4] = -1e8f;
  a[1] = 1.f;
  a[8] = 0.5f;  // the serial tail
  // ((1e8 + -1e8) + (1 + 0)) + ((0 + 0) + (0 + 0)) + 0.5 = 1.5.
  EXPECT_EQ(DotLanes(a.data(), b.data(), 9), 1.5f);
  EXPECT_EQ(internal::DotLanesScalar(a.data(), b.data(), 9), 1.5f);
  const float x[3] = {1.f, 2.f, 3.f}, w[3] = {4.f, 5.f, 6.f};
  EXPECT_EQ(DotLanes(x, w, 3), 32.f);
  EXPECT_EQ(DotLanes(x, w, 0), 0.f);
}

}  // namespace
}  // namespace sluice::kernels
