#include "base/env_switch.h"

#include <stdlib.h>

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(EnvSwitchTest, ReadsTheEnvironmentOnceAndTakesASet) {
  ASSERT_EQ(setenv("SLUICE_TEST_SWITCH_ON", "1", 1), 0);
  ASSERT_EQ(setenv("SLUICE_TEST_SWITCH_OFF", "0", 1), 0);
  ASSERT_EQ(setenv("SLUICE_TEST_SWITCH_ODD", "yes", 1), 0);
  unsetenv("SLUICE_TEST_SWITCH_UNSET");
  EnvSwitch on("SLUICE_TEST_SWITCH_ON", false), off("SLUICE_TEST_SWITCH_OFF", true);
  EnvSwitch odd("SLUICE_TEST_SWITCH_ODD", true), unset("SLUICE_TEST_SWITCH_UNSET", false);
  EXPECT_TRUE(on.on());
  EXPECT_FALSE(off.on());
  EXPECT_TRUE(odd.on());  // neither 1 nor 0: the fallback
  EXPECT_FALSE(unset.on());
  ASSERT_EQ(setenv("SLUICE_TEST_SWITCH_ON", "0", 1), 0);
  EXPECT_TRUE(on.on());  // read once
  on.Set(false);
  EXPECT_FALSE(on.on());
  unset.Set(true);
  EXPECT_TRUE(unset.on());
}

}  // namespace
}  // namespace sluice
