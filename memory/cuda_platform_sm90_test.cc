// Runs only where a CUDA device is present; elsewhere it skips with a message.
#include "memory/cuda_platform.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "memory/dense_residency.h"

namespace sluice::memory {
namespace {

TEST(CudaPlatformSm90Test, PlacesDenseTensorsAndReadsThemBack) {
  auto platform = CudaPlatform::Create(0);
  if (!platform.ok()) {
    EXPECT_EQ(platform.status().code(), absl::StatusCode::kUnavailable);
    GTEST_SKIP() << "no CUDA device here: " << platform.status();
  }
  auto facts = (*platform)->Probe();
  ASSERT_TRUE(facts.ok()) << facts.status();
  EXPECT_GT(facts->total_bytes, 0u);
  EXPECT_LE(facts->free_bytes, facts->total_bytes);

  constexpr uint64_t kBytes = 3 << 20;
  auto* host = static_cast<uint8_t*>(std::aligned_alloc(kDeviceAlignment, kBytes));
  for (uint64_t i = 0; i < kBytes; ++i) host[i] = static_cast<uint8_t>(i * 13 + 1);
  {
    auto r = DenseResidency::Place(**platform, {{"a", host, 1 << 20, nullptr},
                                                {"b", host + (1 << 20) + 8, 1 << 20, nullptr}});
    ASSERT_TRUE(r.ok()) << r.status();
    for (const DensePlacement& p : (*r)->placements()) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p.device) % kDeviceAlignment, 0u) << p.name;
      if (p.kind == PlacementKind::kAliased) continue;  // a unified part
      std::vector<uint8_t> back(p.bytes);
      ASSERT_TRUE(cuda::CopyToHost(back.data(), p.device, p.bytes, nullptr).ok());
      ASSERT_TRUE(cuda::Synchronize(nullptr).ok());
      EXPECT_EQ(std::memcmp(back.data(), p.host, p.bytes), 0) << p.name;
    }
    if (!facts->CanAliasHostMemory()) {
      EXPECT_EQ((*r)->counters().bytes_copied, 2u << 20);
      EXPECT_EQ((*r)->counters().device_bytes_owned, 2u << 20);
    }
  }
  std::free(host);
}

TEST(CudaPlatformSm90Test, MissingDeviceIsUnavailableNamingIt) {
  auto platform = CudaPlatform::Create(4096);
  ASSERT_FALSE(platform.ok());
  EXPECT_EQ(platform.status().code(), absl::StatusCode::kUnavailable) << platform.status();
}

}  // namespace
}  // namespace sluice::memory
