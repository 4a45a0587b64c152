#include "format/ggml_type.h"

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(GgmlTypeTest, NewestTypesHaveTheirIdsAndBlockLayouts) {
  auto q1 = LookupGgmlType(41);
  ASSERT_TRUE(q1.has_value());
  EXPECT_EQ(q1->name, "q1_0");
  EXPECT_EQ(q1->block_size, 128u);
  EXPECT_EQ(q1->bytes_per_block, 18u);
  auto q2 = LookupGgmlType(42);
  ASSERT_TRUE(q2.has_value());
  EXPECT_EQ(q2->name, "q2_0");
  EXPECT_EQ(q2->block_size, 64u);
  EXPECT_EQ(q2->bytes_per_block, 18u);
  EXPECT_EQ(LookupGgmlType(39)->name, "mxfp4");
  EXPECT_EQ(LookupGgmlType(40)->name, "nvfp4");
  EXPECT_EQ(LookupGgmlType(40)->block_size, 64u);
}

TEST(GgmlTypeTest, RetiredAndUnknownIdsAreRejected) {
  EXPECT_FALSE(LookupGgmlType(4).has_value());   // Q4_2, retired
  EXPECT_FALSE(LookupGgmlType(31).has_value());  // Q4_0_4_4, retired
  EXPECT_FALSE(LookupGgmlType(43).has_value());
  EXPECT_FALSE(LookupGgmlType(0xFFFFFFFFu).has_value());
}

TEST(GgmlTypeTest, NamesRoundTripAndIdsAreSorted) {
  int n = 0;
  const GgmlTypeTraits* all = AllGgmlTypes(&n);
  ASSERT_EQ(n, 35);
  for (int i = 0; i < n; ++i) {
    auto by_name = LookupGgmlTypeByName(all[i].name);
    ASSERT_TRUE(by_name.has_value()) << all[i].name;
    EXPECT_EQ(by_name->type, all[i].type);
    if (i > 0) {
      EXPECT_LT(static_cast<uint32_t>(all[i - 1].type), static_cast<uint32_t>(all[i].type));
    }
  }
  EXPECT_EQ(LookupGgmlTypeByName("Q4_K")->bytes_per_block, 144u);
}

TEST(GgmlTypeTest, TypeSetsFromNames) {
  std::string unknown;
  const auto bit = [](GgmlType t) { return uint64_t{1} << static_cast<uint32_t>(t); };
  EXPECT_EQ(GgmlTypeSet("q4_k, Q6_K,,q1_0 ", &unknown),
            bit(GgmlType::kQ4_K) | bit(GgmlType::kQ6_K) | bit(GgmlType::kQ1_0));
  EXPECT_EQ(GgmlTypeSet("", &unknown), uint64_t{0});
  EXPECT_EQ(GgmlTypeSet(" , ", &unknown), uint64_t{0});
  EXPECT_FALSE(GgmlTypeSet("q4_k,q9_k,q5_k", &unknown).has_value());
  EXPECT_EQ(unknown, "q9_k");
  EXPECT_FALSE(GgmlTypeSet("q4_k,q4_2", nullptr).has_value());  // retired: no name
}

}  // namespace
}  // namespace sluice
