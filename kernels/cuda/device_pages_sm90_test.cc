// Runs only where a CUDA device is present; elsewhere it skips with a message.
// Recorded runs on the GPU machine are in docs/STATUS.md.
#include "kernels/cuda/device_pages.h"

#include <cstdint>
#include <vector>

#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"

namespace sluice::cuda {
namespace {

std::shared_ptr<DevicePagePool> PoolOrSkip() {
  absl::Status s = SetDevice(0);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    return nullptr;
  }
  auto pool = DevicePagePool::Create();
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *pool : nullptr;
}

std::vector<uint32_t> ReadBack(const DeviceRange& r, uint64_t bytes) {
  std::vector<uint32_t> out(bytes / 4);
  EXPECT_TRUE(CopyToHost(out.data(), r.data(), bytes, nullptr).ok());
  EXPECT_TRUE(Synchronize(nullptr).ok());
  return out;
}

// A 1 GiB reservation backed by pages as it is committed; what is written
// reads back, a page that another range wrote comes back zeroed, and pages
// go back to the pool for reuse instead of new device memory.
TEST(DevicePagesSm90Test, CommitsMapsZeroedPagesAndReleaseReusesThem) {
  std::shared_ptr<DevicePagePool> pool = PoolOrSkip();
  if (pool == nullptr) SLUICE_SKIP("no CUDA device here");
  const uint64_t page = pool->page_bytes();
  ASSERT_GT(page, 0u);
  ASSERT_EQ(page % 4096, 0u);
  auto a = DeviceRange::Reserve(pool, uint64_t{1} << 30);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->committed(), 0u);
  EXPECT_EQ(a->reserved(), uint64_t{1} << 30);
  ASSERT_TRUE(a->Commit(page + 1, nullptr).ok());
  EXPECT_EQ(a->committed(), 2 * page);
  EXPECT_EQ(pool->pages(), 2);
  std::vector<uint32_t> pattern(2 * page / 4);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint32_t>(i * 2654435761u);
  ASSERT_TRUE(CopyToDevice(a->data(), pattern.data(), 2 * page, nullptr).ok());
  EXPECT_EQ(ReadBack(*a, 2 * page), pattern);
  ASSERT_TRUE(a->Commit(page, nullptr).ok());  // less than held: nothing changes
  EXPECT_EQ(a->committed(), 2 * page);

  ASSERT_TRUE(Synchronize(nullptr).ok());
  a->Release();
  EXPECT_EQ(a->committed(), 0u);
  EXPECT_EQ(pool->free_pages(), 2);
  auto b = DeviceRange::Reserve(pool, 3 * page);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(b->Commit(3 * page, nullptr).ok());
  EXPECT_EQ(pool->pages(), 3);  // two reused, one new
  EXPECT_EQ(pool->free_pages(), 0);
  const std::vector<uint32_t> zeros(3 * page / 4, 0);
  EXPECT_EQ(ReadBack(*b, 3 * page), zeros);
  // The first range maps again (its addresses unchanged) and reads zero.
  void* const before = a->data();
  ASSERT_TRUE(a->Commit(1, nullptr).ok());
  EXPECT_EQ(a->data(), before);
  EXPECT_EQ(ReadBack(*a, page), std::vector<uint32_t>(page / 4, 0));
  EXPECT_EQ(pool->pages(), 4);
  // Commits stop at the reservation.
  ASSERT_TRUE(b->Commit(100 * page, nullptr).ok());
  EXPECT_EQ(b->committed(), 3 * page);
}

TEST(DevicePagesSm90Test, ARangeGivesItsPagesBackWhenDestroyed) {
  std::shared_ptr<DevicePagePool> pool = PoolOrSkip();
  if (pool == nullptr) SLUICE_SKIP("no CUDA device here");
  {
    auto r = DeviceRange::Reserve(pool, 4 * pool->page_bytes());
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->Commit(4 * pool->page_bytes(), nullptr).ok());
    DeviceRange moved = std::move(*r);
    EXPECT_EQ(moved.committed(), 4 * pool->page_bytes());
    EXPECT_EQ(r->committed(), 0u);
    ASSERT_TRUE(Synchronize(nullptr).ok());
  }
  EXPECT_EQ(pool->pages(), 4);
  EXPECT_EQ(pool->free_pages(), 4);
}

}  // namespace
}  // namespace sluice::cuda
