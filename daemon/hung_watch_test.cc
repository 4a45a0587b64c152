#include "daemon/hung_watch.h"

#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

absl::Time T(int64_t s) { return absl::FromUnixSeconds(1000000 + s); }

TEST(HungWatchTest, SilenceForTheTimeoutIsHung) {
  HungWatch w(absl::Seconds(10));
  w.Start(T(0));
  EXPECT_EQ(w.NextCheck(false), T(10));
  EXPECT_EQ(w.Why(T(9), {}), "");
  w.Heard(T(5));  // a heartbeat
  EXPECT_EQ(w.Why(T(14), {}), "");
  EXPECT_EQ(w.NextCheck(false), T(15));
  EXPECT_EQ(w.Why(T(15), {}), "no message or heartbeat for 10s");
  w.MarkHung();
  EXPECT_TRUE(w.hung());
  EXPECT_EQ(w.Why(T(100), {}), "") << "asked once";
  EXPECT_EQ(w.NextCheck(true), absl::InfiniteFuture());
  w.Start(T(200));
  EXPECT_FALSE(w.hung());
}

TEST(HungWatchTest, RequestsInFlightWithoutProgressAreHung) {
  HungWatch w(absl::Seconds(10));
  w.Start(T(0));
  w.Progress(T(2));
  // Heartbeats keep coming, but no request moves.
  w.Heard(T(11));
  EXPECT_EQ(w.NextCheck(true), T(12));
  EXPECT_EQ(w.Why(T(12), {}), "") << "nothing in flight: idle is fine";
  EXPECT_EQ(w.Why(T(12), {7}), "no progress on request 7 for 10s");
  EXPECT_EQ(w.Why(T(13), {3, 4}), "no progress on requests 3, 4 for 11s");
  // An event of any request in flight is progress.
  w.Progress(T(12));
  EXPECT_EQ(w.Why(T(13), {3, 4}), "");
}

}  // namespace
}  // namespace sluice::daemon
