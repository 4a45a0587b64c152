// FastDiv against the plain division: every divisor up to 4,096 with the
// dividends around each multiple, large divisors, the powers of two and
// 2^31 - 1, random pairs over the whole range.
#include "kernels/cuda/fast_div.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::cuda {
namespace {

constexpr uint32_t kMaxN = 0x7FFFFFFFu;

void Check(uint32_t d, uint32_t n) {
  const FastDiv f = FastDiv::Of(d);
  ASSERT_EQ(f.Div(n), n / d) << n << " / " << d;
  ASSERT_EQ(f.Mod(n), n % d) << n << " % " << d;
}

TEST(FastDivTest, SmallDivisorsAroundTheirMultiples) {
  for (uint32_t d = 1; d <= 4096; ++d) {
    for (uint32_t n = 0; n < 3 * d + 2; ++n) Check(d, n);
    for (uint32_t k : {1000u, 65537u, kMaxN / d}) {
      const uint64_t q = static_cast<uint64_t>(k) * d;
      for (uint64_t n = q - 1; n <= q + 1; ++n) {
        if (n <= kMaxN) Check(d, static_cast<uint32_t>(n));
      }
    }
    Check(d, kMaxN);
  }
}

TEST(FastDivTest, PowersOfTwoAndTheLargestValues) {
  for (int l = 0; l < 31; ++l) {
    const uint32_t d = 1u << l;
    for (uint32_t n : {0u, 1u, d - 1, d, d + 1, kMaxN - 1, kMaxN}) Check(d, n);
    if (d > 2) {
      for (uint32_t n : {0u, d - 2, kMaxN}) Check(d - 1, n);
      for (uint32_t n : {0u, d, kMaxN}) Check(d + 1, n);
    }
  }
  for (uint32_t n : {0u, 1u, kMaxN - 1, kMaxN}) Check(kMaxN, n);
  EXPECT_EQ(FastDiv::Of(1).m, 0u);  // the identity
}

TEST(FastDivTest, RandomPairs) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> any(0, kMaxN), divisor(1, kMaxN);
  std::uniform_int_distribution<uint32_t> tiles(1, 100000);
  for (int i = 0; i < 2000000; ++i) Check(i % 2 ? divisor(rng) : tiles(rng), any(rng));
}

}  // namespace
}  // namespace sluice::cuda
