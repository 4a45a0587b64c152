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
  EXPECT_EQ(*ParseByteSize("x", "1.5G"), 3ull << 29);
  EXPECT_EQ(*ParseByteSize("x", "0.5k"), 512u);
  EXPECT_EQ(*ParseByteSize("x", "2.5"), 3u);  // to the nearest byte
}

TEST(ParseByteSizeTest, RejectsGarbageNamingTheFlag) {
  auto r = ParseByteSize("--worker_memory_limit", "lots");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "--worker_memory_limit='lots': expected a byte count such as 536870912, 512M, 1.5G or "
            "8G");
  EXPECT_FALSE(ParseByteSize("x", "5Q").ok());
  EXPECT_FALSE(ParseByteSize("x", "").ok());
  EXPECT_FALSE(ParseByteSize("x", "-1").ok());
  EXPECT_FALSE(ParseByteSize("x", "99999999999T").ok());
  EXPECT_FALSE(ParseByteSize("x", "1e3G").ok());
  EXPECT_FALSE(ParseByteSize("x", "1.2.3M").ok());
  EXPECT_FALSE(ParseByteSize("x", "20000000.5T").ok());
}

}  // namespace
}  // namespace sluice::config
