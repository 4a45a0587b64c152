// End-to-end: the expert slot cache's settings and telemetry through the
// daemon, without a GPU. The CPU backend never streams, so the test-only
// worker stands in for the backend's figures (--test_fake_expert_stats:
// per forward pass 8 lookups, 4 hits, 4 misses of which 1 forced and 1
// computed by the host CPU (1000 bytes; miss policy cost, estimates 45 and
// 27.5 GB/s), 2 evictions, 2 prefetches of which 1 useful, 2000 bytes from
// the host and 1000 from the disk; layer 0 hits 3 of 4, layer 1 1 of 4) and
// the device a CUDA worker's fit planner sees (--test_device_memory).
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// Three tokens = three forward passes (prefill, two decodes).
TEST(E2eExpertsTest, RequestStatsMetricsAndSluicectl) {
  const std::string dir = MakeTempDir("e2e-experts");
  auto model = WriteMicroModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  DaemonOptions options;
  options.model_path = *model;
  options.worker_test_flags = {"--test_fake_expert_stats"};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  Daemon& daemon = **d;

  v1::GenerateRequest request = GreedyRequest("Hello", 3);
  request.set_expert_token_stats(true);
  Generation g = RunGenerate(daemon.stub(), request);
  ASSERT_TRUE(g.status.ok()) << g.status.error_message();
  ASSERT_EQ(g.token_ids.size(), 3u);
  ASSERT_TRUE(g.final.has_experts());
  const v1::ExpertRequestStats& e = g.final.experts();
  EXPECT_EQ(e.lookups(), 24u);
  EXPECT_EQ(e.hits(), 12u);
  EXPECT_EQ(e.misses(), 12u);
  EXPECT_EQ(e.forced(), 3u);
  EXPECT_EQ(e.host_computed(), 3u);
  EXPECT_EQ(e.bytes_host_computed(), 3000u);
  EXPECT_EQ(e.evictions(), 6u);
  EXPECT_DOUBLE_EQ(e.hit_rate(), 0.5);
  EXPECT_EQ(e.bytes_host(), 6000u);
  EXPECT_EQ(e.bytes_disk(), 3000u);
  EXPECT_EQ(e.prefetches_issued(), 6u);
  EXPECT_EQ(e.prefetches_useful(), 3u);
  EXPECT_DOUBLE_EQ(e.prefetch_accuracy(), 0.5);
  ASSERT_EQ(e.layer_hit_rate_size(), 2);
  EXPECT_DOUBLE_EQ(e.layer_hit_rate(0), 0.75);
  EXPECT_DOUBLE_EQ(e.layer_hit_rate(1), 0.25);
  ASSERT_EQ(e.tokens_size(), 3);
  for (const v1::ExpertTokenStats& t : e.tokens()) {
    EXPECT_EQ(t.hits(), 4u);
    EXPECT_EQ(t.misses(), 4u);
  }

  const std::string metrics = daemon.HttpGet("/metrics");
  for (const char* line :
       {"sluice_expert_streaming 1\n", "sluice_expert_slots_capacity 6\n",
        "sluice_expert_arena_bytes 6000\n", "sluice_expert_host_tier_bytes 0\n",
        "sluice_expert_slot_lookups_total 24\n", "sluice_expert_slot_hits_total 12\n",
        "sluice_expert_slot_misses_total 12\n", "sluice_expert_slot_evictions_total 6\n",
        "sluice_expert_slot_exhausted_total 0\n", "sluice_expert_slot_forced_total 3\n",
        "sluice_expert_slot_prefetches_issued_total 6\n",
        "sluice_expert_slot_prefetches_useful_total 3\n",
        "sluice_expert_slot_prefetches_late_total 0\n",
        "sluice_expert_slot_host_computed_total 3\n",
        "sluice_expert_bytes_host_computed_total 3000\n",
        "sluice_expert_miss_policy{policy=\"copy\"} 0\n",
        "sluice_expert_miss_policy{policy=\"cost\"} 1\n",
        "sluice_expert_copy_bytes_per_second_estimate 45000000000\n",
        "sluice_expert_host_bytes_per_second_estimate 27500000000\n",
        "sluice_expert_bytes_total{tier=\"host\"} 6000\n",
        "sluice_expert_bytes_total{tier=\"disk\"} 3000\n",
        "sluice_expert_slot_layer_hit_ratio{layer=\"0\"} 0.75\n",
        "sluice_expert_slot_layer_hit_ratio{layer=\"1\"} 0.25\n"}) {
    EXPECT_TRUE(Contains(metrics, line)) << "missing: " << line << "\nin:\n" << metrics;
  }

  // The second request's figures are its own (differences), not totals.
  CommandResult r = RunCommand({RunfilePath("clients/sluicectl"), "--addr=" + daemon.address(),
                                "--timeout=60", "generate", "Hello", "--max_tokens=3",
                                "--ignore_eos", "--stats=token"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err,
                       "[experts] lookups=24 hits=12 misses=12 hit_rate=0.500 forced=3 "
                       "host_computed=3 evictions=6 exhausted=0 bytes_host=6000 "
                       "bytes_disk=3000 prefetches=6 "
                       "useful=3 late=0 prefetch_accuracy=0.500\n"
                       "[experts] layer hit rate: 0=0.750 1=0.250\n"
                       "[experts] token 0: hits=4 misses=4\n"
                       "[experts] token 1: hits=4 misses=4\n"
                       "[experts] token 2: hits=4 misses=4\n"))
      << r.err;
  r = RunCommand({RunfilePath("clients/sluicectl"), "--addr=" + daemon.address(), "--timeout=60",
                  "generate", "Hello", "--max_tokens=2", "--ignore_eos", "--stats"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err, "[experts] lookups=16 hits=8 misses=8 hit_rate=0.500"))
      << r.err;
  EXPECT_FALSE(Contains(r.err, "[experts] token")) << r.err;
  EXPECT_EQ(daemon.Stop(), 0) << daemon.Log();
}

// A CUDA worker asked for more expert slots than its device holds: the fit
// planner refuses before any engine is built, the model is FAILED with the
// planner's numbers and what fits, and the daemon keeps serving (a CPU load
// afterwards works). 524 MiB: the margin (512 MiB) and micro's dense
// weights, state and workspace leave room for 16 of its 32 experts.
TEST(E2eExpertsTest, UnsafeArenaIsRefusedWithThePlannersMessage) {
  const std::string dir = MakeTempDir("e2e-experts-refuse");
  auto model = WriteMicroModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  DaemonOptions options;
  options.model_path = *model;
  // One sequence's KV: the device size is chosen so that 32 slots do not fit
  // beside it but some do.
  options.flags = {"--backend=cuda", "--expert_slots=32", "--expert_policy=lfu",
                   "--max_sequences=1"};
  options.worker_test_flags = {absl::StrCat("--test_device_memory=", 524ull << 20)};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  Daemon& daemon = **d;
  grpc::ClientContext ctx;
  v1::ListModelsResponse models;
  ASSERT_TRUE(daemon.stub().ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
  ASSERT_EQ(models.models_size(), 1);
  const v1::ModelInfo& info = models.models(0);
  EXPECT_EQ(info.state(), v1::MODEL_STATE_FAILED);
  EXPECT_TRUE(Contains(info.last_error(),
                       "cuda worker on device 0: device memory oversubscribed: the plan needs "))
      << info.last_error();
  EXPECT_TRUE(Contains(info.last_error(), "[32 slots x 96.0 KiB]")) << info.last_error();
  EXPECT_TRUE(Contains(info.last_error(), "but the device has 524.0 MiB free of 524.0 MiB; "
                                          "at most "))
      << info.last_error();
  EXPECT_TRUE(Contains(info.last_error(), " expert slots fit (--expert_slots=")) << info.last_error();

  grpc::ClientContext load_ctx;
  v1::LoadModelRequest load;
  load.set_path(*model);
  load.set_worker_kind(v1::WORKER_KIND_CPU);
  v1::LoadModelResponse loaded;
  grpc::Status s = daemon.stub().LoadModel(&load_ctx, load, &loaded);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(loaded.model().state(), v1::MODEL_STATE_READY);
  EXPECT_EQ(daemon.Health(), "SERVING");
  EXPECT_EQ(daemon.Stop(), 0) << daemon.Log();
}

// Bad settings stop sluiced at start with the flag named.
TEST(E2eExpertsTest, BadFlagsAreRejectedAtStart) {
  CommandResult r = RunCommand({RunfilePath("daemon/sluiced"), "--expert_arena_fraction=2",
                                "--grpc_address=127.0.0.1:0", "--metrics_address=none"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, "--expert_arena_fraction=2: must be in (0, 1]")) << r.err;
  r = RunCommand({RunfilePath("daemon/sluiced"), "--host_tier_bytes=lots",
                  "--grpc_address=127.0.0.1:0", "--metrics_address=none"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, "--host_tier_bytes")) << r.err;
  r = RunCommand({RunfilePath("daemon/sluiced"), "--expert_miss_policy=fastest",
                  "--grpc_address=127.0.0.1:0", "--metrics_address=none"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, "--expert_miss_policy='fastest': expected copy, host or cost"))
      << r.err;
  r = RunCommand({RunfilePath("daemon/sluiced"), "--expert_host_threads=-2",
                  "--grpc_address=127.0.0.1:0", "--metrics_address=none"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, "--expert_host_threads=-2: must be in 0..1024")) << r.err;
}

// --expert_miss_policy and --expert_host_threads travel in the Hello to a
// CUDA worker: with an arena (4 of micro's 32 experts stream) the worker
// keeps the policy and logs it after its fit plan; with every expert
// resident nothing misses and it runs copy. Whether the engine then builds
// (a GPU here, a CUDA build) or not is beside the point.
TEST(E2eExpertsTest, MissPolicyFlagsReachTheWorker) {
  const std::string dir = MakeTempDir("e2e-experts-miss");
  auto model = WriteMicroModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  DaemonOptions options;
  options.model_path = *model;
  options.flags = {"--backend=cuda", "--expert_slots=4", "--expert_miss_policy=cost",
                   "--expert_host_threads=3"};
  options.worker_test_flags = {absl::StrCat("--test_device_memory=", 8ull << 30)};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(Contains((*d)->Log(), "sluice-worker: expert miss policy: cost, host threads: 3\n"))
      << (*d)->Log();
  EXPECT_EQ((*d)->Stop(), 0) << (*d)->Log();

  options.flags = {"--backend=cuda", "--expert_miss_policy=host"};
  d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(Contains((*d)->Log(), "sluice-worker: expert miss policy: copy (every expert "
                                    "resident: no misses; host has nothing to split)\n"))
      << (*d)->Log();
  EXPECT_EQ((*d)->Stop(), 0) << (*d)->Log();
}

}  // namespace
}  // namespace sluice::testing
