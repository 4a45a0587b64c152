// sluice-worker-testing: the worker with fakes for some of its collaborators
// (worker/worker.h Collaborators), for tests only: it is testonly in Bazel and
// never installed. Tests run it through a wrapper script given to sluiced as
// --worker_binary:
//   sluice-worker-testing --socket_fd=N [--test_step_delay_ms=N] [--test_hog_memory]
//                         [--test_device_memory=BYTES] [--test_fake_expert_stats]
//                         [--test_start_delay_ms=N]
//
// --test_step_delay_ms sleeps N ms after each token, so that tests can act
// mid-stream.
// --test_hog_memory: a Generate whose prompt is exactly kHogMemoryPrompt
// (worker/worker_testing.h) allocates and touches memory until the kernel
// kills the worker (OOM tests).
// --test_device_memory: a CUDA worker's fit planner sees a device of BYTES
// (total and free) instead of asking one.
// --test_fake_expert_stats: the backend's expert cache figures are replaced
// by FakeExpertStats below (the CPU backend never streams), so the
// telemetry path is tested with exact values.
// --test_start_delay_ms sleeps before the worker reads its Hello: a slow
// model load, e.g. for a replacement that must not interrupt the serving one.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "proto/sluice/v1/sluice.pb.h"
#include "worker/worker.h"
#include "worker/worker_testing.h"

namespace {

// Allocates and touches memory until the kernel kills the process.
[[noreturn]] void HogMemory() {
  std::vector<char*> blocks;
  while (true) {
    constexpr size_t kBlock = 16u << 20;
    char* p = static_cast<char*>(malloc(kBlock));
    if (p == nullptr) continue;
    memset(p, 0x5a, kBlock);
    blocks.push_back(p);
  }
}

void HogMemoryOnItsPrompt(const sluice::v1::GenerateRequest& request) {
  if (request.input_case() != sluice::v1::GenerateRequest::kPrompt ||
      request.prompt() != sluice::worker::kHogMemoryPrompt) {
    return;
  }
  fprintf(stderr, "sluice-worker-testing: allocating memory until killed\n");
  HogMemory();
}

// Two layers; every forward pass looks up 4 experts per layer: layer 0 hits
// 3, layer 1 hits 1 (so 4 hits, 4 misses: 2 filled, 1 forced, 1 computed by
// the host CPU under the "cost" miss policy), evicts 2, prefetches 2 of
// which 1 is useful and 0 late; bytes of the filled and forced misses: 2
// slices from the host, 1 from the disk; the policy's estimates 45 GB/s
// (copies) and 27.5 GB/s (host products).
sluice::ExpertStreamStats FakeExpertStats(const sluice::Model&, uint64_t passes) {
  constexpr uint64_t kSlice = 1000;
  sluice::ExpertStreamStats s;
  s.streaming = true;
  s.policy = "lru";
  s.slots_capacity = 6;
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
  c.bytes_streamed = 4 * kSlice * passes;  // 2 filled misses + 2 prefetches
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
  sluice::worker::Collaborators collaborators;
  int step_delay_ms = 0;
  int start_delay_ms = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--socket_fd=", 0) == 0 && absl::SimpleAtoi(arg.substr(12), &fd)) continue;
    if (arg.rfind("--test_step_delay_ms=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(21), &step_delay_ms)) {
      continue;
    }
    if (arg.rfind("--test_start_delay_ms=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(22), &start_delay_ms)) {
      continue;
    }
    if (arg == "--test_hog_memory") {
      collaborators.before_generate = HogMemoryOnItsPrompt;
      continue;
    }
    uint64_t device_bytes = 0;
    if (arg.rfind("--test_device_memory=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(21), &device_bytes)) {
      const sluice::memory::DeviceMemory device{true, device_bytes, device_bytes};
      collaborators.device_memory = [device](int) { return device; };
      continue;
    }
    if (arg == "--test_fake_expert_stats") {
      collaborators.expert_stats = FakeExpertStats;
      continue;
    }
    fprintf(stderr, "sluice-worker-testing: unknown argument '%s'\n", argv[i]);
    return 2;
  }
  if (fd < 0) {
    fprintf(stderr, "sluice-worker-testing: --socket_fd=N is required\n");
    return 2;
  }
  if (step_delay_ms > 0) {
    collaborators.after_token = [step_delay_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms));
    };
  }
  if (start_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(start_delay_ms));
  return sluice::worker::RunWorker(fd, std::move(collaborators));
}
