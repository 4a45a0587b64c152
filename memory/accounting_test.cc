#include "memory/accounting.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::memory {
namespace {

TEST(DeviceMemoryAccountingTest, LabelsAreThePrometheusKindValues) {
  std::vector<std::string_view> labels;
  for (DeviceMemoryKind k : kAllDeviceMemoryKinds) labels.push_back(DeviceMemoryKindLabel(k));
  EXPECT_EQ(labels, (std::vector<std::string_view>{"dense", "kv_state", "workspace",
                                                   "expert_arena"}));
}

TEST(DeviceMemoryAccountingTest, SetAddReleaseByKind) {
  DeviceMemoryAccounting a;
  a.Set(DeviceMemoryKind::kDense, 1000);
  a.Add(DeviceMemoryKind::kKvState, 300);
  a.Add(DeviceMemoryKind::kKvState, 200);
  a.Add(DeviceMemoryKind::kWorkspace, 64);
  a.Release(DeviceMemoryKind::kWorkspace, 14);
  DeviceMemoryBytes b = a.Read();
  EXPECT_EQ(b.of(DeviceMemoryKind::kDense), 1000u);
  EXPECT_EQ(b.of(DeviceMemoryKind::kKvState), 500u);
  EXPECT_EQ(b.of(DeviceMemoryKind::kWorkspace), 50u);
  EXPECT_EQ(b.of(DeviceMemoryKind::kExpertArena), 0u);
  EXPECT_EQ(b.total(), 1550u);
  // Releasing more than was added stops at zero instead of wrapping.
  a.Release(DeviceMemoryKind::kWorkspace, 51);
  EXPECT_EQ(a.Get(DeviceMemoryKind::kWorkspace), 0u);
}

TEST(DeviceMemoryAccountingTest, ConcurrentAddsAreNotLost) {
  DeviceMemoryAccounting a;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a] {
      for (int i = 0; i < 10000; ++i) a.Add(DeviceMemoryKind::kExpertArena, 3);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(a.Get(DeviceMemoryKind::kExpertArena), 120000u);
}

}  // namespace
}  // namespace sluice::memory
