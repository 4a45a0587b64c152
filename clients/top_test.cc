#include "clients/top.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sluice::ctl {
namespace {

// A histogram in exposition format with the given cumulative bucket counts.
std::string Histogram(const std::string& name, int le_10ms, int le_100ms, int total) {
  return absl::StrCat("# TYPE ", name, " histogram\n",                    //
                      name, "_bucket{le=\"0.01\"} ", le_10ms, "\n",       //
                      name, "_bucket{le=\"0.1\"} ", le_100ms, "\n",       //
                      name, "_bucket{le=\"+Inf\"} ", total, "\n",         //
                      name, "_sum 1.5\n", name, "_count ", total, "\n");
}

TopSample Sample(double t, int ttft[3], int itl[3], uint64_t lookups, uint64_t hits,
                 uint64_t host_bytes, uint64_t disk_bytes, uint64_t streamed) {
  v1::GetMetricsResponse m;
  m.set_requests_running(2);
  m.set_requests_waiting(5);
  m.set_prompt_tokens_total(static_cast<uint64_t>(100 * t));
  m.mutable_worker()->set_up(true);
  m.mutable_worker()->set_pid(4242);
  m.mutable_worker()->set_rss_anon_bytes(3ull << 30);
  v1::SlotCacheStats* c = m.mutable_slot_cache();
  c->set_streaming(true);
  c->set_slots_capacity(64);
  c->set_slots_used(60);
  c->set_policy("lru");
  c->set_miss_policy("cost");
  c->set_lookups(lookups);
  c->set_hits(hits);
  c->set_bytes_host(host_bytes);
  c->set_bytes_disk(disk_bytes);
  c->set_bytes_streamed(streamed);
  c->add_layer_hit_ratio(0.5);
  c->add_layer_hit_ratio(0.875);
  m.set_prometheus_text(
      Histogram("sluice_time_to_first_token_seconds", ttft[0], ttft[1], ttft[2]) +
      Histogram("sluice_inter_token_latency_seconds", itl[0], itl[1], itl[2]) +
      "sluice_device_memory_bytes{kind=\"dense\"} 2147483648\n"
      "sluice_device_memory_bytes{kind=\"expert_arena\"} 1073741824\n");
  return MakeTopSample(absl::FromUnixSeconds(1764633600) + absl::Seconds(t), m);
}

TEST(TopTest, ParsesExpositionLinesAndSkipsComments) {
  const auto s = ParsePrometheusText("# HELP x y\nx 3\ny{a=\"b c\"} 1.5\nbad\n");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.at("x"), 3);
  EXPECT_EQ(s.at("y{a=\"b c\"}"), 1.5);
}

TEST(TopTest, QuantilesComeFromTheIntervalsBucketDeltas) {
  int a_ttft[3] = {10, 10, 10}, a_itl[3] = {0, 0, 0};
  // In the interval: 2 first tokens under 10 ms, 6 more under 100 ms, 2 above.
  int b_ttft[3] = {12, 18, 20}, b_itl[3] = {0, 0, 0};
  const TopSample a = Sample(0, a_ttft, a_itl, 0, 0, 0, 0, 0);
  const TopSample b = Sample(2, b_ttft, b_itl, 0, 0, 0, 0, 0);
  const std::string n = "sluice_time_to_first_token_seconds";
  EXPECT_DOUBLE_EQ(IntervalQuantile(a, b, n, 0.2), 0.01);
  EXPECT_DOUBLE_EQ(IntervalQuantile(a, b, n, 0.5), 0.1);
  EXPECT_TRUE(std::isinf(IntervalQuantile(a, b, n, 0.99)));
  EXPECT_EQ(IntervalQuantile(a, a, n, 0.5), -1) << "nothing observed";
}

TEST(TopTest, FrameShowsRatesOverTheIntervalAndGaugesNow) {
  int a_ttft[3] = {1, 1, 1}, a_itl[3] = {10, 10, 10};
  int b_ttft[3] = {3, 3, 3}, b_itl[3] = {90, 108, 108};  // 2 + 98 tokens in 2 s
  const TopSample a = Sample(0, a_ttft, a_itl, 1000, 900, 0, 0, 0);
  // 400 lookups, 300 hits; misses: 3 GB from host, 1 GB from disk; 4 GB moved.
  const TopSample b = Sample(2, b_ttft, b_itl, 1400, 1200, 3000000000, 1000000000, 4000000000);
  const std::string frame = RenderTopFrame(&a, b, "10.0.0.1:50051");
  EXPECT_TRUE(absl::StrContains(frame, "sluiced 10.0.0.1:50051   worker up (pid 4242)")) << frame;
  EXPECT_TRUE(absl::StrContains(frame, "requests   running 2   waiting 5")) << frame;
  EXPECT_TRUE(absl::StrContains(frame, "tokens/s   streamed 50.0   prompt 100.0")) << frame;
  EXPECT_TRUE(absl::StrContains(frame, "TTFT       p50 10 ms  p99 10 ms  (n=2)")) << frame;
  EXPECT_TRUE(absl::StrContains(frame, "ITL        p50 10 ms  p99 100 ms  (n=98)")) << frame;
  EXPECT_TRUE(absl::StrContains(frame, "slots 60/64  policy lru  miss policy cost")) << frame;
  EXPECT_TRUE(absl::StrContains(
      frame, "hits     device 75.0% of 400 lookups;  misses from host 75.0%, from disk 25.0%"))
      << frame;
  EXPECT_TRUE(absl::StrContains(
      frame, "moved    to device 2.00 GB/s  from host 1.50 GB/s  from disk 0.50 GB/s"))
      << frame;
  EXPECT_TRUE(absl::StrContains(frame, " 0: 50%  1: 88% ")) << frame;
  EXPECT_TRUE(absl::StrContains(frame, "device dense 2.0 GiB, arena 1.0 GiB")) << frame;
  EXPECT_TRUE(absl::StrContains(frame, "worker rss anon 3.0 GiB")) << frame;
}

TEST(TopTest, FirstFrameHasNoRatesAndARestartedCounterShowsNone) {
  int t[3] = {1, 1, 1}, i[3] = {5, 5, 5};
  const TopSample a = Sample(0, t, i, 1000, 900, 0, 0, 0);
  std::string frame = RenderTopFrame(nullptr, a, "h:1");
  EXPECT_TRUE(absl::StrContains(frame, "tokens/s   streamed -   prompt -")) << frame;
  EXPECT_TRUE(absl::StrContains(frame, "TTFT       -\n")) << frame;
  int t0[3] = {0, 0, 0}, i0[3] = {0, 0, 0};
  const TopSample restarted = Sample(1, t0, i0, 10, 5, 0, 0, 0);
  frame = RenderTopFrame(&a, restarted, "h:1");
  EXPECT_TRUE(absl::StrContains(frame, "tokens/s   streamed -")) << frame;
}

}  // namespace
}  // namespace sluice::ctl
