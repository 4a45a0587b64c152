#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

// Records every range handed out and checks they tile [0, n) exactly.
std::vector<std::pair<int64_t, int64_t>> Ranges(ThreadPool& pool, int64_t n, int64_t grain) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.ParallelForGrain(n, grain, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    ranges.push_back({b, e});
  });
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

TEST(ThreadPoolTest, OneThreadRunsInlineAsOneRange) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.num_threads(), 1);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  int calls = 0;
  pool.ParallelFor(10, [&](int64_t b, int64_t e) {
    ran_on = std::this_thread::get_id();
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ran_on, caller);
}

TEST(ThreadPoolTest, ZeroOrNegativeThreadsMeansOne) {
  EXPECT_EQ(ThreadPool(0).num_threads(), 1);
  EXPECT_EQ(ThreadPool(-3).num_threads(), 1);
}

// A pool that polls longer (HostMisses': its loops come once a layer) hands
// out the same ranges, whether its workers are still polling for the next
// loop or have gone to sleep, and is destroyed while they poll.
TEST(ThreadPoolTest, ALongerPollGivesTheSameRangesAwakeOrAsleep) {
  ThreadPool pool(3, 16);
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 4}, {4, 7}, {7, 10}};
  EXPECT_EQ(Ranges(pool, 10, 1), want);  // right after start-up
  EXPECT_EQ(Ranges(pool, 10, 1), want);  // back to back: still polling
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // asleep by now
  EXPECT_EQ(Ranges(pool, 10, 1), want);
  EXPECT_EQ(ThreadPool(2, 0).num_threads(), 2);  // a scale below 1 is 1
}

TEST(ThreadPoolTest, RangesTileTheIndexSpaceEvenly) {
  ThreadPool pool(3);
  const auto r = Ranges(pool, 10, 1);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], std::make_pair(int64_t{0}, int64_t{4}));
  EXPECT_EQ(r[1], std::make_pair(int64_t{4}, int64_t{7}));
  EXPECT_EQ(r[2], std::make_pair(int64_t{7}, int64_t{10}));
}

TEST(ThreadPoolTest, GrainKeepsBoundariesOnMultiples) {
  ThreadPool pool(3);
  const auto r = Ranges(pool, 45, 4);  // 12 groups, the last one partial
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], std::make_pair(int64_t{0}, int64_t{16}));
  EXPECT_EQ(r[1], std::make_pair(int64_t{16}, int64_t{32}));
  EXPECT_EQ(r[2], std::make_pair(int64_t{32}, int64_t{45}));
}

TEST(ThreadPoolTest, FewerItemsThanThreadsSkipsEmptyRanges) {
  ThreadPool pool(3);
  const auto r = Ranges(pool, 2, 1);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], std::make_pair(int64_t{0}, int64_t{1}));
  EXPECT_EQ(r[1], std::make_pair(int64_t{1}, int64_t{2}));
  EXPECT_TRUE(Ranges(pool, 0, 1).empty());
}

TEST(ThreadPoolTest, UsesSeveralThreadsAndEveryItemOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  std::mutex mu;
  std::set<std::thread::id> threads;
  for (int round = 0; round < 50; ++round) {
    pool.ParallelFor(1000, [&](int64_t b, int64_t e) {
      {
        std::lock_guard<std::mutex> lock(mu);
        threads.insert(std::this_thread::get_id());
      }
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
  }
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(hits[i].load(), 50) << i;
  EXPECT_EQ(threads.size(), 3u);
}

TEST(ThreadPoolTest, WakeRousesSleepingWorkersWithoutWork) {
  ThreadPool one(1);
  one.Wake();
  EXPECT_EQ(one.wakeups(), 0);

  ThreadPool pool(3);
  std::atomic<int> calls{0};
  pool.ParallelFor(3, [&](int64_t, int64_t) { calls.fetch_add(1); });
  // Past the poll (a few milliseconds): both workers asleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int64_t before = pool.wakeups();
  pool.Wake();
  for (int i = 0; i < 200 && pool.wakeups() < before + 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(pool.wakeups(), before + 2);
  EXPECT_EQ(calls.load(), 3);  // no work ran
  // And loops after it still tile their range.
  const auto r = Ranges(pool, 9, 1);
  EXPECT_EQ(r, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 9}}));
}

TEST(ThreadPoolTest, ManyShortLoopsBackToBack) {
  // Decode-style use: thousands of tiny loops; every one must see exactly
  // its own items (a worker must never run a stale or skipped loop).
  ThreadPool pool(3);
  int64_t total = 0;
  for (int64_t round = 0; round < 20000; ++round) {
    std::atomic<int64_t> sum{0};
    const int64_t n = 1 + round % 7;
    pool.ParallelFor(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(round * 10 + i);
    });
    ASSERT_EQ(sum.load(), n * round * 10 + n * (n - 1) / 2) << "round " << round;
    total += n;
  }
  EXPECT_EQ(total, 79997);  // sum over rounds of 1 + round % 7
}

TEST(ThreadPoolTest, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::atomic<int> inner_calls{0};
  pool.ParallelFor(2, [&](int64_t, int64_t) {
    pool.ParallelFor(5, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b, 0);
      EXPECT_EQ(e, 5);
      inner_calls.fetch_add(1);
    });
  });
  EXPECT_EQ(inner_calls.load(), 2);
}

TEST(ThreadPoolTest, ConcurrentCallersAreSerialized) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  auto work = [&] {
    for (int i = 0; i < 100; ++i) {
      pool.ParallelFor(64, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 100 * 64);
}

}  // namespace
}  // namespace sluice
