#include "config/device_flag.h"

#include "gtest/gtest.h"

namespace sluice::config {
namespace {

TEST(DeviceFlagTest, AnOrdinalInRangeElseNamesTheFlag) {
  EXPECT_EQ(DeviceFlagText(), "0");
  EXPECT_FALSE(DeviceFlagGiven());
  EXPECT_EQ(*ParseDeviceOrdinal("0"), 0);
  EXPECT_EQ(*ParseDeviceOrdinal("255"), 255);
  EXPECT_EQ(ParseDeviceOrdinal("256").status().message(),
            "--device='256': expected a CUDA device ordinal in 0..255");
  EXPECT_EQ(ParseDeviceOrdinal("cuda").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseDeviceOrdinal("-1").ok());
}

}  // namespace
}  // namespace sluice::config
