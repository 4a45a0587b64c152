// sluice-worker-testing: the worker with its test hooks, for tests only (it
// is testonly in Bazel and never installed). Tests run it through a wrapper
// script given to sluiced as --worker_binary:
//   sluice-worker-testing --socket_fd=N [--test_step_delay_ms=N] [--test_hog_memory]
//                         [--test_device_memory=BYTES] [--test_fake_expert_stats]
//                         [--test_start_delay_ms=N]
//
// --test_device_memory: a CUDA worker's fit planner sees a device of BYTES
// (total and free) instead of asking one.
// --test_fake_expert_stats: the backend's expert cache figures are replaced
// by FakeExpertStats below (the CPU backend never streams), so the
// telemetry path is tested with exact values.
// --test_start_delay_ms sleeps before the worker reads its Hello: a slow
// model load, e.g. for a replacement that must not interrupt the serving one.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "worker/worker.h"

namespace {

// Two layers; every forward pass looks up 4 experts per layer: layer 0 hits
// 3, layer 1 hits 1 (so 4 hits, 4 misses: 2 filled, 1 forced, 1 computed by
// the host CPU under the "cost" miss policy), evicts 2, prefetches 2 of
// which 1 is useful and 0 late; bytes of the filled and forced misses: 2
// slices from the host, 1 from the disk; the policy's estimates 45 GB/s
// (copies) and 27.5 GB/s (host products).
sluice::ExpertStreamStats FakeExpertStats(uint64_t passes) {
  constexpr uint64_t kSlice = 1000;
  sluice::ExpertStreamStats s;
  s.streaming = true;
  s.policy = "lru";
  s.slots = 6;
  s.experts = 16;
  s.slot_bytes = kSlice;
  s.arena_bytes = 6 * kSlice;
  s.host_tier_bytes = 0;
  s.miss_policy = "cost";
  s.copy_bytes_per_s = 4.5e10;
  s.host_bytes_per_s = 2.75e10;
  sluice::memory::SlotCacheCounters& c = s.counters;
  c.lookups = 8 * passes;
  c.hits = 4 * passes;
  c.misses = 4 * passes;
  c.forced = passes;
  c.host_computed = passes;
  c.evictions = 2 * passes;
  c.prefetches_issued = 2 * passes;
  c.prefetches_useful = passes;
  c.bytes_filled = 4 * kSlice * passes;  // 2 filled misses + 2 prefetches
  c.bytes_forced = kSlice * passes;
  c.bytes_host_computed = kSlice * passes;
  c.bytes_by_tier = {2 * kSlice * passes, kSlice * passes};
  c.layer_lookups = {4 * passes, 4 * passes};
  c.layer_hits = {3 * passes, passes};
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int fd = -1;
  sluice::worker::TestHooks hooks;
  int start_delay_ms = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--socket_fd=", 0) == 0 && absl::SimpleAtoi(arg.substr(12), &fd)) continue;
    if (arg.rfind("--test_step_delay_ms=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(21), &hooks.step_delay_ms)) {
      continue;
    }
    if (arg.rfind("--test_start_delay_ms=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(22), &start_delay_ms)) {
      continue;
    }
    if (arg == "--test_hog_memory") {
      hooks.hog_memory = true;
      continue;
    }
    uint64_t device_bytes = 0;
    if (arg.rfind("--test_device_memory=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(21), &device_bytes)) {
      hooks.device_memory = sluice::memory::DeviceMemory{true, device_bytes, device_bytes};
      continue;
    }
    if (arg == "--test_fake_expert_stats") {
      hooks.expert_stats = FakeExpertStats;
      continue;
    }
    fprintf(stderr, "sluice-worker-testing: unknown argument '%s'\n", argv[i]);
    return 2;
  }
  if (fd < 0) {
    fprintf(stderr, "sluice-worker-testing: --socket_fd=N is required\n");
    return 2;
  }
  if (start_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(start_delay_ms));
  return sluice::worker::RunWorker(fd, hooks);
}
