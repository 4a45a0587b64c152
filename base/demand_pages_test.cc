#include "base/demand_pages.h"

#include <unistd.h>

#include <cstdint>
#include <utility>

#include "gtest/gtest.h"

namespace sluice {
namespace {

const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));

TEST(DemandPagesTest, OnlyTouchedPagesAreResident) {
  // 1 GiB of capacity: address space, not memory.
  DemandPages<float> a(size_t{1} << 28);
  EXPECT_EQ(a.size(), size_t{1} << 28);
  EXPECT_EQ(a.resident_bytes(), 0u);
  a[0] = 1;
  a[(size_t{1} << 28) - 1] = 2;
  EXPECT_EQ(a.resident_bytes(), 2 * kPage);
  const size_t per_page = kPage / sizeof(float);
  for (size_t i = 0; i < 10 * per_page; ++i) a[i] = 3;
  EXPECT_EQ(a.resident_bytes(), 11 * kPage);
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_EQ(a[(size_t{1} << 28) - 1], 2.0f);
  EXPECT_EQ(a[size_t{1} << 20], 0.0f);  // never written
}

TEST(DemandPagesTest, ReleaseZeroesAndGivesPagesBack) {
  DemandPages<float> a(4096);
  for (float& x : a) x = 7;
  EXPECT_EQ(a.resident_bytes(), 4096 * sizeof(float));
  a.Release();
  EXPECT_EQ(a.resident_bytes(), 0u);
  for (size_t i = 0; i < a.size(); i += 97) EXPECT_EQ(a[i], 0.0f) << i;
}

TEST(DemandPagesTest, MovesAndEmpty) {
  DemandPages<int32_t> a(100);
  a[5] = 42;
  DemandPages<int32_t> b = std::move(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.resident_bytes(), 0u);
  ASSERT_EQ(b.size(), 100u);
  EXPECT_EQ(b[5], 42);
  DemandPages<int32_t> c;
  c = std::move(b);
  EXPECT_EQ(c[5], 42);
  EXPECT_EQ(c.end() - c.begin(), 100);
}

}  // namespace
}  // namespace sluice
