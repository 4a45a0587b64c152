// The CUDA backend on the six golden models (needs a CUDA device; skips
// elsewhere, with the marker tests/run_all.sh counts): teacher-forced logits
// within the parity gates of tools/parity_lib.h, and the slot cache's copy
// policy bit-identical to the all-resident run at 25% of the experts and at
// one slot (fewer than a token needs: forced and exhausted paths). Every
// decode row of these runs goes through the fused decode program. Inside a
// batch of other sequences (one batch pass a step, the experts grouped over
// all rows) each prompt passes the same gates, all resident and streaming.
#include <cstdio>
#include <string>

#include "base/testing/goldens.h"
#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "model/cuda/decode_step.h"
#include "model/cuda/expert_stream.h"
#include "tools/cuda_parity_testing.h"
#include "tools/parity_lib.h"

namespace sluice::parity {
namespace {

constexpr const char* kModels[] = {"qwen3moe-micro-f32",  "qwen3moe-tiny-q8_0",
                                   "qwen3moe-tiny-mixed", "qwen35moe-micro-f32",
                                   "qwen35moe-tiny-q8_0", "qwen35moe-tiny-mixed"};

class CudaParityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaParityTest, PassesTheGoldenGates) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  Options options;
  options.backend = Backend::kCuda;
  auto report = RunParity(dir + "/" + GetParam() + ".gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::fputs(FormatReport({*report}).c_str(), stdout);
  ASSERT_EQ(report->prompts.size(), 3u);
  for (const PromptReport& p : report->prompts) {
    EXPECT_TRUE(p.passed) << p.name << ": max=" << p.max << " rms=" << p.rms
                          << " median=" << p.median << " top1=" << p.top1 << "/" << p.rows;
  }
}

TEST_P(CudaParityTest, CopyPolicyAtAQuarterIsBitIdentical) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  config::ExpertConfig experts;
  experts.arena_fraction = 0.25;
  ExpectIdentical(dir, GetParam(), experts);
}

// The same with each layer's copies issued expert by expert
// (SLUICE_CUDA_COPY_PER_EXPERT).
TEST_P(CudaParityTest, CopyPolicyAtAQuarterIssuedPerExpertIsBitIdentical) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  SetCopyPerExpertEnabled(true);
  config::ExpertConfig experts;
  experts.arena_fraction = 0.25;
  ExpectIdentical(dir, GetParam(), experts);
  SetCopyPerExpertEnabled(false);
}

TEST_P(CudaParityTest, CopyPolicyAtOneSlotIsBitIdentical) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  config::ExpertConfig experts;
  experts.slots = 1;
  ExpectIdentical(dir, GetParam(), experts);
}

// A quarter of the experts on the device and a pinned host tier of three
// layers' worth in front of the disk (O_DIRECT; the page cache where the
// filesystem refuses it), inclusive or exclusive: still the resident bits,
// with experts served from the tier and from the disk.
void ExpectIdenticalThroughTheHostTier(const std::string& dir, const std::string& name,
                                       config::TierMode tiers) {
  Options probe;
  probe.backend = Backend::kCuda;
  probe.experts.arena_fraction = 0.25;
  auto first = RunParity(dir + "/" + name + ".gguf", dir, probe);
  ASSERT_TRUE(first.ok()) << first.status();
  // A host slot is a device slot's slices each read as the 4096-aligned
  // span around it: at most 3 x 8192 bytes more.
  const uint64_t host_slot = first->experts.slot_bytes + 3 * 8192;
  config::ExpertConfig experts;
  experts.arena_fraction = 0.25;
  experts.host_tier_bytes = 3 * static_cast<uint64_t>(first->info.n_expert) * host_slot;
  experts.tiers = tiers;
  ModelReport report;
  std::printf("%s tiers:\n", config::TierModeName(tiers).c_str());
  ExpectIdentical(dir, name, experts, &report);
  const ExpertStreamStats& s = report.experts;
  ASSERT_TRUE(s.host_tier);
  EXPECT_EQ(s.exclusive_tiers, tiers == config::TierMode::kExclusive);
  const auto& by = s.counters.bytes_by_tier;
  std::printf("host tier: %llu bytes, lookups=%llu hits=%llu demoted=%llu promoted=%llu "
              "bytes host=%llu disk=%llu\n",
              static_cast<unsigned long long>(s.host_tier_bytes),
              static_cast<unsigned long long>(s.host_tier_counters.lookups),
              static_cast<unsigned long long>(s.host_tier_counters.hits),
              static_cast<unsigned long long>(s.host_tier_counters.offers_admitted),
              static_cast<unsigned long long>(s.host_tier_counters.removed),
              static_cast<unsigned long long>(by[static_cast<int>(memory::Tier::kHost)]),
              static_cast<unsigned long long>(by[static_cast<int>(memory::Tier::kDisk)]));
  EXPECT_GT(by[static_cast<int>(memory::Tier::kDisk)], 0u);
  EXPECT_GT(by[static_cast<int>(memory::Tier::kHost)], 0u);
  if (tiers == config::TierMode::kExclusive) {
    EXPECT_GT(s.host_tier_counters.offers_admitted, 0u);  // victims copied down
    EXPECT_GT(s.host_tier_counters.removed, 0u);          // and moved up again
  } else {
    EXPECT_EQ(s.host_tier_counters.offered, 0u);
  }
}

TEST_P(CudaParityTest, CopyPolicyThroughAnInclusiveHostTierIsBitIdentical) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  ExpectIdenticalThroughTheHostTier(dir, GetParam(), config::TierMode::kInclusive);
}

TEST_P(CudaParityTest, CopyPolicyThroughExclusiveTiersIsBitIdentical) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  ExpectIdenticalThroughTheHostTier(dir, GetParam(), config::TierMode::kExclusive);
}

// The host computing every miss it can reach at 25% (the host policy; its
// CPU kernels round differently, so not the resident bits): the golden
// gates, with the host's rows added by the down launch and after it in a
// launch of their own (SetHostRowsLateEnabled).
TEST_P(CudaParityTest, HostMissesAtAQuarterPassTheGates) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  const bool was = HostRowsLateEnabled();
  for (const bool late : {false, true}) {
    SetHostRowsLateEnabled(late);
    Options options;
    options.backend = Backend::kCuda;
    options.experts.arena_fraction = 0.25;
    options.experts.miss_policy = config::MissPolicy::kHost;
    auto report = RunParity(dir + "/" + GetParam() + ".gguf", dir, options);
    ASSERT_TRUE(report.ok()) << report.status();
    std::printf("host misses, rows added %s:\n", late ? "late" : "by the down launch");
    std::fputs(FormatReport({*report}).c_str(), stdout);
    EXPECT_GT(report->experts.counters.host_computed, 0u);
    ASSERT_EQ(report->prompts.size(), 3u);
    for (const PromptReport& p : report->prompts) {
      EXPECT_TRUE(p.passed) << p.name << " late=" << late << ": max=" << p.max
                            << " rms=" << p.rms << " top1=" << p.top1 << "/" << p.rows;
    }
  }
  SetHostRowsLateEnabled(was);
}

// --expert_skip on the device: ExpectSkipsOnlyOffMemory.
TEST_P(CudaParityTest, ColdExpertsAreSkippedOnlyOffMemory) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  ExpectSkipsOnlyOffMemory(dir, GetParam(), /*host_share=*/true);
}

// Each golden prompt inside batches of 5 other sequences (prefill chunks,
// decodes and whole-row logits beside its prefill and each decode token):
// its rows pass the gates against the goldens and against the prompt alone
// (which decodes through the fused program, so not bit for bit), and each
// MoE layer of each pass acquired the union of its rows' experts.
void ExpectBatchedPasses(const std::string& dir, const std::string& name,
                         const config::ExpertConfig& experts, bool kv_on_demand = false) {
  Options options;
  options.backend = Backend::kCuda;
  options.batch_with = 5;
  options.experts = experts;
  options.kv_on_demand = kv_on_demand;
  auto report = RunParity(dir + "/" + name + ".gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::fputs(FormatReport({*report}).c_str(), stdout);
  ASSERT_EQ(report->prompts.size(), 3u);
  ASSERT_EQ(report->batched.size(), 3u);
  const ModelInfo& m = report->info;
  for (size_t i = 0; i < 3; ++i) {
    const PromptReport& p = report->prompts[i];
    EXPECT_TRUE(p.passed) << p.name << ": max=" << p.max << " rms=" << p.rms
                          << " top1=" << p.top1 << "/" << p.rows;
    EXPECT_EQ(p.rows, p.n_prompt + 32) << p.name;
    const BatchedPrompt& b = report->batched[i];
    std::printf("%s batched vs alone: max=%g rms=%g top1=%d/%d experts=%lld [%d, %d]\n",
                p.name.c_str(), b.vs_alone.max, b.vs_alone.rms, b.vs_alone.top1,
                b.vs_alone.rows, static_cast<long long>(b.experts_acquired),
                b.min_layer_experts, b.max_layer_experts);
    EXPECT_TRUE(b.vs_alone.passed) << b.vs_alone.name << ": max=" << b.vs_alone.max;
    EXPECT_EQ(b.vs_alone.rows, p.rows);
    EXPECT_EQ(b.passes, 33);
    EXPECT_GE(b.min_layer_experts, m.n_expert_used);
    EXPECT_LE(b.max_layer_experts, m.n_expert);
    // More than one row a layer routes somewhere: some pass's union is
    // wider than one token's k.
    EXPECT_GT(b.max_layer_experts, m.n_expert_used);
    EXPECT_GE(b.experts_acquired, 33 * m.n_layer * b.min_layer_experts);
    EXPECT_LE(b.experts_acquired, 33 * m.n_layer * b.max_layer_experts);
  }
  EXPECT_TRUE(report->passed);
  if (experts.arena_fraction > 0) {
    EXPECT_TRUE(report->experts.streaming);
    EXPECT_GT(report->experts.counters.misses, 0u);
  }
}

TEST_P(CudaParityTest, PromptInsideABatchPassesTheGates) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  ExpectBatchedPasses(dir, GetParam(), {});
}

TEST_P(CudaParityTest, PromptInsideABatchAtAQuarterPassesTheGates) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  config::ExpertConfig experts;
  experts.arena_fraction = 0.25;
  ExpectBatchedPasses(dir, GetParam(), experts);
}

// KV in device pages mapped as each sequence grows (a worker with
// --kv_cache_tokens): the same kernels on the same addresses, so the
// logits are those of the whole allocation bit for bit, alone (through the
// fused decode program) and inside a batch.
TEST_P(CudaParityTest, KvOnDemandIsBitIdentical) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  Options options;
  options.backend = Backend::kCuda;
  options.compare = Backend::kCuda;
  options.kv_on_demand = true;
  auto report = RunParity(dir + "/" + GetParam() + ".gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->comparisons.size(), 3u);
  for (const PromptReport& c : report->comparisons) {
    std::printf("%s kv on demand vs whole: rows=%d max=%g\n", c.name.c_str(), c.rows, c.max);
    EXPECT_EQ(c.max, 0.0) << c.name;
  }
}

TEST_P(CudaParityTest, PromptInsideABatchWithKvOnDemandPassesTheGates) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  ExpectBatchedPasses(dir, GetParam(), {}, /*kv_on_demand=*/true);
}

INSTANTIATE_TEST_SUITE_P(Goldens, CudaParityTest, ::testing::ValuesIn(kModels),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace sluice::parity
