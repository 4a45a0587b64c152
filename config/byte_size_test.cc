#include "config/byte_size.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice::config {
namespace {

TEST(ParseByteSizeTest, AcceptsSuffixes) {
  EXPECT_EQ(*ParseByteSize("x", "123"), 123u);
  EXPECT_EQ(*ParseByteSize("x", "64K"), 64u << 10);
  EXPECT_EQ(*ParseByteSize("x", "512M"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("x", "8GiB"), 8ull << 30);
  EXPECT_EQ(*ParseByteSize("x", "64G"), 64ull << 30);
  EXPECT_EQ(*ParseByteSize("x", "1t"), 1ull << 40);
}

TEST(ParseByteSizeTest, RejectsGarbageNamingTheFlag) {
  auto r = ParseByteSize("--worker_memory_limit", "lots");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "--worker_memory_limit='lots': expected a byte count such as 536870912, 512M or 8G");
  EXPECT_FALSE(ParseByteSize("x", "5Q").ok());
  EXPECT_FALSE(ParseByteSize("x", "").ok());
  EXPECT_FALSE(ParseByteSize("x", "-1").ok());
  EXPECT_FALSE(ParseByteSize("x", "99999999999T").ok());
}

}  // namespace
}  // namespace sluice::config
