#include "daemon/load_tracker.h"

#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1764633600);

TEST(LoadTrackerTest, NothingLoadingHasNoSnapshotAndNoLines) {
  LoadTracker t;
  EXPECT_FALSE(t.Snapshot(kT0).has_value());
  EXPECT_EQ(t.Update("dense", 1, 2, kT0), "");
  EXPECT_EQ(t.End(kT0), "");
}

TEST(LoadTrackerTest, PhasesBytesRateAndTimeLeft) {
  LoadTracker t;
  t.Begin("m", "/models/m.gguf", kT0);
  EXPECT_EQ(t.Snapshot(kT0)->phase(), "validating");
  EXPECT_EQ(t.Update("mapping", 100, 100, kT0 + absl::Seconds(1)),
            "loading model 'm': mapping 0.0 MiB of 0.0 MiB (100%); 1.0 s since the load began");
  // Dense: 2 GiB of 8 GiB in 2 s of this phase -> 1 GiB/s, 6 s left.
  const std::string first = t.Update("dense", 0, 8ull << 30, kT0 + absl::Seconds(2));
  EXPECT_EQ(first,
            "loading model 'm': dense 0.0 MiB of 8.00 GiB (0%); 2.0 s since the load began");
  EXPECT_EQ(t.Update("dense", 1ull << 30, 8ull << 30, kT0 + absl::Seconds(3)), "")
      << "between a phase's ends, a line every 5 s";
  t.Update("dense", 2ull << 30, 8ull << 30, kT0 + absl::Seconds(4));
  const v1::LoadProgress p = *t.Snapshot(kT0 + absl::Seconds(4));
  EXPECT_EQ(p.model_id(), "m");
  EXPECT_EQ(p.path(), "/models/m.gguf");
  EXPECT_EQ(p.phase(), "dense");
  EXPECT_EQ(p.done_bytes(), 2ull << 30);
  EXPECT_EQ(p.total_bytes(), 8ull << 30);
  EXPECT_DOUBLE_EQ(p.bytes_per_second(), double(1ull << 30));
  EXPECT_DOUBLE_EQ(p.seconds_left(), 6);
  EXPECT_DOUBLE_EQ(p.elapsed_seconds(), 4);
  EXPECT_EQ(t.Update("dense", 3ull << 30, 8ull << 30, kT0 + absl::Seconds(7)),
            "loading model 'm': dense 3.00 GiB of 8.00 GiB (38%), 0.64 GB/s, 8 s left; "
            "7.0 s since the load began");
  EXPECT_EQ(t.End(kT0 + absl::Milliseconds(9500)), "load of model 'm' ended after 9.5s");
  EXPECT_FALSE(t.Snapshot(kT0 + absl::Seconds(10)).has_value());
}

TEST(LoadTrackerTest, UnknownRateAndABeginForTheSameLoadKeepsItsClock) {
  LoadTracker t;
  t.Begin("m", "/p", kT0);
  t.Update("building", 0, 0, kT0 + absl::Seconds(1));
  EXPECT_EQ(t.Snapshot(kT0 + absl::Seconds(2))->seconds_left(), -1);
  EXPECT_EQ(t.Snapshot(kT0 + absl::Seconds(2))->bytes_per_second(), 0);
  t.Begin("m", "/p", kT0 + absl::Seconds(2));  // a spawn inside LoadModel
  EXPECT_EQ(t.Snapshot(kT0 + absl::Seconds(3))->phase(), "building");
  EXPECT_DOUBLE_EQ(t.Snapshot(kT0 + absl::Seconds(3))->elapsed_seconds(), 3);
  t.Begin("n", "/q", kT0 + absl::Seconds(4));  // another load: a new clock
  EXPECT_EQ(t.Snapshot(kT0 + absl::Seconds(4))->phase(), "validating");
  EXPECT_DOUBLE_EQ(t.Snapshot(kT0 + absl::Seconds(5))->elapsed_seconds(), 1);
}

}  // namespace
}  // namespace sluice::daemon
