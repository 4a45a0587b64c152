#include "kernels/cpu/half_acc.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::kernels {
namespace {

float ViaHalf(float x) { return static_cast<float>(static_cast<_Float16>(x)); }

bool SameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// Values across the half range: normals, subnormals, ties, the overflow
// edge, signs.
std::vector<float> Samples() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f,
                          6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 1.00048828125f,
                          1.000732421875f, -3.5f, 1e-10f, 1e30f};
  uint32_t state = 12345;
  for (int i = 0; i < 4000; ++i) {
    state = state * 1664525u + 1013904223u;
    uint32_t u = state;
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isfinite(f)) v.push_back(f);
  }
  return v;
}

TEST(HalfAccTest, RoundingIsAHalfConversion) {
  std::vector<float> x = Samples(), scalar = x;
  RoundToHalf(x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(SameBits(x[i], ViaHalf(scalar[i]))) << scalar[i];
    ASSERT_TRUE(SameBits(internal::RoundToHalfScalar(scalar[i]), ViaHalf(scalar[i])))
        << scalar[i];
  }
}

TEST(HalfAccTest, UpdatesRoundEachResultAndReportOverflow) {
  std::vector<float> acc(37), x(37);
  for (int i = 0; i < 37; ++i) {
    acc[i] = ViaHalf(0.37f * (i - 18));
    x[i] = 0.11f * (i % 7) - 0.3f;
  }
  std::vector<float> want = acc;
  for (int i = 0; i < 37; ++i) {
    const float prod = x[i] * 0.625f;
    want[i] = ViaHalf(want[i] + prod);
  }
  ASSERT_TRUE(MadHalfAcc(acc.data(), x.data(), 37, 0.625f));
  for (int i = 0; i < 37; ++i) EXPECT_TRUE(SameBits(acc[i], want[i])) << i;
  for (int i = 0; i < 37; ++i) want[i] = ViaHalf(want[i] * 0.3f);
  ASSERT_TRUE(ScaleHalfAcc(acc.data(), 37, 0.3f));
  for (int i = 0; i < 37; ++i) EXPECT_TRUE(SameBits(acc[i], want[i])) << i;
  // One result past the half range: nothing is rounded, false.
  acc[35] = 60000.0f;
  std::vector<float> big = acc;
  ASSERT_FALSE(ScaleHalfAcc(acc.data(), 37, 1.5f));
  for (int i = 0; i < 37; ++i) EXPECT_EQ(acc[i], big[i] * 1.5f) << i;
}

}  // namespace
}  // namespace sluice::kernels
