// WorkerEnvironment: what of the daemon's environment a worker gets.
#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "daemon/worker_process.h"
#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

bool Has(const std::vector<std::string>& env, const std::string& var) {
  return std::find(env.begin(), env.end(), var) != env.end();
}

TEST(WorkerEnvironmentTest, PassesTheKernelSwitchesAndNothingElse) {
  ASSERT_EQ(setenv("SLUICE_CUDA_SPLIT_KINDS", "1", 1), 0);
  ASSERT_EQ(setenv("SLUICE_CUDA_Q8", "0", 1), 0);
  ASSERT_EQ(setenv("CUDA_VISIBLE_DEVICES", "1", 1), 0);
  ASSERT_EQ(setenv("SLUICE_TEST_SECRET", "x", 1), 0);
  ASSERT_EQ(setenv("AWS_SECRET_ACCESS_KEY", "y", 1), 0);
  ASSERT_EQ(setenv("LD_PRELOAD", "/tmp/evil.so", 1), 0);
  const std::vector<std::string> env = WorkerEnvironment();
  EXPECT_EQ(env.front(), "PATH=/usr/local/bin:/usr/bin:/bin");
  EXPECT_TRUE(Has(env, "SLUICE_CUDA_SPLIT_KINDS=1"));
  EXPECT_TRUE(Has(env, "SLUICE_CUDA_Q8=0"));
  EXPECT_TRUE(Has(env, "CUDA_VISIBLE_DEVICES=1"));
  for (const std::string& var : env) {
    EXPECT_FALSE(var.rfind("SLUICE_TEST_", 0) == 0) << var;
    EXPECT_FALSE(var.rfind("AWS_", 0) == 0) << var;
    EXPECT_FALSE(var.rfind("LD_PRELOAD=", 0) == 0) << var;
  }
  unsetenv("SLUICE_CUDA_SPLIT_KINDS");
  EXPECT_FALSE(Has(WorkerEnvironment(), "SLUICE_CUDA_SPLIT_KINDS=1"));
}

}  // namespace
}  // namespace sluice::daemon
