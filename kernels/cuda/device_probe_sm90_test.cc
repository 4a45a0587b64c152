// Runs only where a CUDA device is present; elsewhere it skips with a message.
// Recorded runs on the H200 machine are in docs/STATUS.md.
#include "kernels/cuda/device_probe.h"

#include "base/testing/skip.h"
#include "gtest/gtest.h"

namespace sluice::cuda {
namespace {

TEST(DeviceProbeSm90Test, ProbesEveryDeviceAndRunsTheSelfTestKernel) {
  auto devices = ProbeDevices();
  if (!devices.ok()) {
    EXPECT_EQ(devices.status().code(), absl::StatusCode::kUnavailable);
    SLUICE_SKIP("no CUDA device here: " + devices.status().ToString());
  }
  ASSERT_FALSE(devices->empty());
  for (const DeviceInfo& d : *devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.cc_major, 8) << "the binary carries sm_90a code and compute_80 PTX";
    EXPECT_GT(d.total_bytes, 0u);
    EXPECT_LE(d.free_bytes, d.total_bytes);
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_NE(FormatDeviceInfo(d).find("name=" + d.name + "\n"), std::string::npos);
    EXPECT_TRUE(RunSelfTest(d.index).ok());
  }
}

TEST(DeviceProbeSm90Test, AliasNeedsPageableAccessAndIntegratedMemory) {
  DeviceInfo discrete;  // H200: pageable 0, integrated 0
  EXPECT_FALSE(discrete.CanAliasHostMemory());
  DeviceInfo gb10;
  gb10.pageable_memory_access = 1;
  gb10.integrated = 1;
  EXPECT_TRUE(gb10.CanAliasHostMemory());
  DeviceInfo hmm_discrete;  // pageable access through HMM, separate memory
  hmm_discrete.pageable_memory_access = 1;
  EXPECT_FALSE(hmm_discrete.CanAliasHostMemory());
}

}  // namespace
}  // namespace sluice::cuda
