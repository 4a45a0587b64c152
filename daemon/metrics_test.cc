#include "daemon/metrics.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(HistogramTest, CumulativeBuckets) {
  Histogram h({0.1, 1});
  h.Observe(0.05);
  h.Observe(0.1);
  h.Observe(0.5);
  h.Observe(7);
  Histogram::Data d = h.Get();
  EXPECT_EQ(d.cumulative, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(d.count, 4u);
  EXPECT_DOUBLE_EQ(d.sum, 7.65);
}

TEST(ReadHostMemoryTest, ParsesMeminfo) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/meminfo";
  std::ofstream(path) << "MemTotal:       24684000 kB\nCached:          1000 kB\n"
                         "SwapCached:        7 kB\nSwapTotal:       4096 kB\n"
                         "SwapFree:        1024 kB\n";
  HostMemory m = ReadHostMemory(path);
  EXPECT_EQ(m.page_cache_bytes, 1000u * 1024);
  EXPECT_EQ(m.swap_used_bytes, 3072u * 1024);
}

TEST(MetricsTest, RendersEveryFamily) {
  Metrics metrics;
  metrics.AddTokens(5, 7);
  metrics.AddRestart("oom_kill");
  metrics.AddRequest("ok");
  metrics.time_to_first_token().Observe(0.02);
  MetricsSnapshot s;
  s.requests_running = 1;
  s.requests_waiting = 3;
  s.worker.set_up(true);
  s.worker.set_rss_anon_bytes(25769803776ull);
  s.oom_mode = "cgroup_v1";
  const std::string text = metrics.Render(s, HostMemory{4096, 8192});
  for (const char* line : {
           "sluice_requests_running 1\n", "sluice_requests_waiting 3\n",
           "sluice_prompt_tokens_total 5\n", "sluice_generated_tokens_total 7\n",
           "sluice_worker_restarts_total{reason=\"oom_kill\"} 1\n",
           "sluice_worker_restarts_total{reason=\"signal\"} 0\n",
           "sluice_worker_restarts_total{reason=\"protocol_error\"} 0\n",
           "sluice_requests_total{outcome=\"ok\"} 1\n",
           "sluice_time_to_first_token_seconds_bucket{le=\"0.025\"} 1\n",
           "sluice_time_to_first_token_seconds_bucket{le=\"0.01\"} 0\n",
           "sluice_time_to_first_token_seconds_count 1\n",
           "sluice_inter_token_latency_seconds_bucket{le=\"+Inf\"} 0\n",
           "sluice_worker_up 1\n", "sluice_worker_rss_anon_bytes 25769803776\n",
           "sluice_worker_rss_file_bytes 0\n", "sluice_worker_swap_bytes 0\n",
           "sluice_worker_major_faults_total 0\n", "sluice_host_swap_used_bytes 4096\n",
           "sluice_host_page_cache_bytes 8192\n", "sluice_expert_slots_capacity 0\n",
           "sluice_expert_slot_hits_total 0\n",
           "sluice_expert_slot_misses_total 0\n", "sluice_expert_slot_evictions_total 0\n",
           "sluice_expert_slot_exhausted_total 0\n", "sluice_expert_slot_forced_total 0\n",
           "sluice_expert_bytes_streamed_total 0\n",
           "sluice_oom_containment_mode{mode=\"cgroup_v1\"} 1\n",
           "sluice_oom_containment_mode{mode=\"none\"} 0\n",
           "# TYPE sluice_time_to_first_token_seconds histogram\n"}) {
    EXPECT_TRUE(Contains(text, line)) << "missing: " << line << "\nin:\n" << text;
  }
}

TEST(MetricsTest, WorkerBatch) {
  Metrics metrics;
  MetricsSnapshot s;
  s.batch.set_max_sequences(8);
  s.batch.set_running_sequences(3);
  s.batch.set_waiting_sequences(2);
  s.batch.set_batch_size(3);
  s.batch.set_kv_blocks_used(40);
  s.batch.set_kv_blocks_total(2048);
  s.batch.set_preemptions_total(1);
  s.batch.set_steps_total(90);
  s.batch.set_experts_acquired_last_step(57);
  s.batch.set_experts_acquired_total(4100);
  s.batch.set_state_resident_bytes(123456);
  s.batch.set_prefill_cap_tokens(37);
  const std::string text = metrics.Render(s, HostMemory{});
  for (const char* line : {"sluice_worker_max_sequences 8\n",
                           "sluice_worker_sequences{state=\"running\"} 3\n",
                           "sluice_worker_sequences{state=\"waiting\"} 2\n",
                           "sluice_worker_batch_size 3\n",
                           "sluice_worker_kv_blocks{state=\"used\"} 40\n",
                           "sluice_worker_kv_blocks{state=\"free\"} 2008\n",
                           "sluice_worker_state_resident_bytes 123456\n",
                           "sluice_worker_prefill_cap_tokens 37\n",
                           "# TYPE sluice_worker_preemptions_total counter\n",
                           "sluice_worker_preemptions_total 1\n",
                           "sluice_worker_batch_steps_total 90\n",
                           "sluice_worker_step_experts_acquired 57\n",
                           "sluice_worker_experts_acquired_total 4100\n"}) {
    EXPECT_TRUE(Contains(text, line)) << "missing: " << line << "\nin:\n" << text;
  }
}

TEST(MetricsTest, DeviceMemoryByKind) {
  Metrics metrics;
  MetricsSnapshot s;
  std::string text = metrics.Render(s, HostMemory{});
  // A CPU worker (or none): every kind present, all 0.
  for (const char* line : {"# TYPE sluice_device_memory_bytes gauge\n",
                           "sluice_device_memory_bytes{kind=\"dense\"} 0\n",
                           "sluice_device_memory_bytes{kind=\"kv_state\"} 0\n",
                           "sluice_device_memory_bytes{kind=\"workspace\"} 0\n",
                           "sluice_device_memory_bytes{kind=\"expert_arena\"} 0\n"}) {
    EXPECT_TRUE(Contains(text, line)) << "missing: " << line << "\nin:\n" << text;
  }
  s.device_memory.set_dense_bytes(64424509440ull);
  s.device_memory.set_kv_state_bytes(1073741824);
  s.device_memory.set_workspace_bytes(268435456);
  s.device_memory.set_expert_arena_bytes(17179869184ull);
  text = metrics.Render(s, HostMemory{});
  for (const char* line : {"sluice_device_memory_bytes{kind=\"dense\"} 64424509440\n",
                           "sluice_device_memory_bytes{kind=\"kv_state\"} 1073741824\n",
                           "sluice_device_memory_bytes{kind=\"workspace\"} 268435456\n",
                           "sluice_device_memory_bytes{kind=\"expert_arena\"} 17179869184\n"}) {
    EXPECT_TRUE(Contains(text, line)) << "missing: " << line << "\nin:\n" << text;
  }
}

TEST(MetricsTest, ExpertSlotCache) {
  Metrics metrics;
  MetricsSnapshot s;
  std::string text = metrics.Render(s, HostMemory{});
  // Nothing streams: the series exist at 0, no per-layer series.
  for (const char* line : {"sluice_expert_streaming 0\n", "sluice_expert_slot_lookups_total 0\n",
                           "sluice_expert_bytes_total{tier=\"disk\"} 0\n",
                           "sluice_expert_slot_host_computed_total 0\n",
                           "sluice_expert_bytes_host_computed_total 0\n",
                           "sluice_expert_skipped_total 0\n",
                           "sluice_expert_miss_policy{policy=\"copy\"} 0\n"
                           "sluice_expert_miss_policy{policy=\"host\"} 0\n"
                           "sluice_expert_miss_policy{policy=\"cost\"} 0\n",
                           "sluice_expert_copy_bytes_per_second_estimate 0\n",
                           "sluice_expert_host_bytes_per_second_estimate 0\n"}) {
    EXPECT_TRUE(Contains(text, line)) << "missing: " << line << "\nin:\n" << text;
  }
  EXPECT_FALSE(Contains(text, "sluice_expert_slot_layer_hit_ratio"));
  v1::SlotCacheStats& c = s.slot_cache;
  c.set_streaming(true);
  c.set_slots_capacity(12);
  c.set_arena_bytes(12000);
  c.set_host_tier_bytes(5000);
  c.set_lookups(80);
  c.set_hits(50);
  c.set_misses(30);
  c.set_evictions(20);
  c.set_exhausted(2);
  c.set_forced(10);
  c.set_host_computed(7);
  c.set_bytes_host_computed(7000);
  c.set_skipped(11);
  c.set_tiers("exclusive");
  c.set_host_tier_lookups(9);
  c.set_host_tier_hits(6);
  c.set_host_tier_demoted(5);
  c.set_host_tier_promoted(4);
  c.set_miss_policy("cost");
  c.set_copy_bytes_per_second(4.5e10);
  c.set_host_bytes_per_second(2.75e10);
  c.set_prefetches_issued(40);
  c.set_prefetches_useful(10);
  c.set_prefetches_late(3);
  c.set_bytes_host(3000);
  c.set_bytes_disk(1000);
  c.add_layer_hit_ratio(1);
  c.add_layer_hit_ratio(0.25);
  text = metrics.Render(s, HostMemory{});
  for (const char* line :
       {"# TYPE sluice_expert_streaming gauge\nsluice_expert_streaming 1\n",
        "sluice_expert_slots_capacity 12\n", "sluice_expert_arena_bytes 12000\n",
        "sluice_expert_host_tier_bytes 5000\n", "sluice_expert_slot_lookups_total 80\n",
        "sluice_expert_slot_hits_total 50\n", "sluice_expert_slot_misses_total 30\n",
        "sluice_expert_slot_evictions_total 20\n", "sluice_expert_slot_exhausted_total 2\n",
        "sluice_expert_slot_forced_total 10\n",
        "# TYPE sluice_expert_slot_host_computed_total counter\n"
        "sluice_expert_slot_host_computed_total 7\n",
        "# TYPE sluice_expert_bytes_host_computed_total counter\n"
        "sluice_expert_bytes_host_computed_total 7000\n",
        "# TYPE sluice_expert_skipped_total counter\n"
        "sluice_expert_skipped_total 11\n",
        "# TYPE sluice_expert_host_tier_lookups_total counter\n"
        "sluice_expert_host_tier_lookups_total 9\n",
        "sluice_expert_host_tier_hits_total 6\n",
        "# TYPE sluice_expert_host_tier_demoted_total counter\n"
        "sluice_expert_host_tier_demoted_total 5\n",
        "sluice_expert_host_tier_promoted_total 4\n",
        "# TYPE sluice_expert_miss_policy gauge\n"
        "sluice_expert_miss_policy{policy=\"copy\"} 0\n"
        "sluice_expert_miss_policy{policy=\"host\"} 0\n"
        "sluice_expert_miss_policy{policy=\"cost\"} 1\n",
        "# TYPE sluice_expert_copy_bytes_per_second_estimate gauge\n"
        "sluice_expert_copy_bytes_per_second_estimate 45000000000\n",
        "# TYPE sluice_expert_host_bytes_per_second_estimate gauge\n"
        "sluice_expert_host_bytes_per_second_estimate 27500000000\n",
        "# TYPE sluice_expert_slot_prefetches_issued_total counter\n"
        "sluice_expert_slot_prefetches_issued_total 40\n",
        "sluice_expert_slot_prefetches_useful_total 10\n",
        "sluice_expert_slot_prefetches_late_total 3\n",
        "sluice_expert_bytes_total{tier=\"host\"} 3000\n",
        "sluice_expert_bytes_total{tier=\"disk\"} 1000\n",
        "sluice_expert_slot_layer_hit_ratio{layer=\"0\"} 1\n",
        "sluice_expert_slot_layer_hit_ratio{layer=\"1\"} 0.25\n"}) {
    EXPECT_TRUE(Contains(text, line)) << "missing: " << line << "\nin:\n" << text;
  }
}

}  // namespace
}  // namespace sluice::daemon
