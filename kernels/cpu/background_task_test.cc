#include "kernels/cpu/background_task.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::kernels {
namespace {

TEST(BackgroundTaskTest, RunsEachJobOnItsOwnThreadAndWaitSeesItsResult) {
  BackgroundTask task;
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<int> seen;
  for (int i = 0; i < 100; ++i) {
    std::thread::id ran_on;
    int value = -1;
    task.Start([&, i] {
      ran_on = std::this_thread::get_id();
      value = i * i;
    });
    task.Wait();
    EXPECT_NE(ran_on, caller);
    seen.push_back(value);
  }
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i * i);
}

TEST(BackgroundTaskTest, OverlapsWithTheCaller) {
  // The job waits for the caller to signal: it can only finish if it runs
  // while the caller goes on after Start.
  BackgroundTask task;
  std::atomic<bool> go{false};
  bool finished = false;
  task.Start([&] {
    while (!go.load()) std::this_thread::yield();
    finished = true;
  });
  go.store(true);
  task.Wait();
  EXPECT_TRUE(finished);
}

TEST(BackgroundTaskTest, WaitWithoutAJobReturnsAndJobsAfterASleepStillRun) {
  BackgroundTask task;
  task.Wait();
  // Long enough for the thread to stop polling and sleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  int value = 0;
  task.Start([&] { value = 7; });
  task.Wait();
  EXPECT_EQ(value, 7);
}

TEST(BackgroundTaskTest, DestructionWaitsForTheRunningJob) {
  std::atomic<int> done{0};
  {
    BackgroundTask task;
    task.Start([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done.store(1);
    });
  }
  EXPECT_EQ(done.load(), 1);
}

}  // namespace
}  // namespace sluice::kernels
