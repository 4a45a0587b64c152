// deepseek2 on the CUDA backend against llama.cpp (needs a CUDA device and
// ../shared/goldens-deepseek2, found as //tools:parity_deepseek2_test finds
// it: SLUICE_GOLDENS_DEEPSEEK2, else beside SLUICE_GOLDENS; skips elsewhere
// with the marker tests/run_all.sh counts): the F32 gate on every prompt
// (max <= 0.005 of std, top-1 on every row), the slot cache's copy policy
// bit-identical to the all-resident run at 25% of the routed experts and at
// one slot, and each prompt inside a batch of other sequences within the
// gate. Every row goes through the batch pass (batch_pass.h): the fused
// decode program does not handle latent attention, so decode steps are
// one-token batch passes, replayed from a captured graph where every
// expert is resident (DecodeReplaysTheCapturedPass, not yet run on a GPU).
// Also the older fused attn_kv_b layout (its K_b unfused at load) against
// the CPU and against the split layout's file of the same weights (the
// others ran on the H100 on 2026-12-06).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/testing/goldens.h"
#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/quant_matmul.h"
#include "loader/model_files.h"
#include "model/cuda/batch_pass.h"
#include "model/engine.h"
#include "model/testing/mkmodel.h"
#include "tools/cuda_parity_testing.h"
#include "tools/parity_lib.h"

namespace sluice::parity {
namespace {

constexpr char kModel[] = "deepseek2-micro-f32";
// The golden's blocks with routed experts (block 0 is a dense FFN).
constexpr int kMoeBlocks = 3;

TEST(CudaParityDeepseek2Test, PassesTheF32GateOnEveryPrompt) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  Options options;
  options.backend = Backend::kCuda;
  auto report = RunParity(dir + "/" + kModel + ".gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::fputs(FormatReport({*report}).c_str(), stdout);
  EXPECT_TRUE(report->all_f32);
  ASSERT_EQ(report->prompts.size(), 3u);
  for (const PromptReport& p : report->prompts) {
    std::printf("measured %s on cuda: max |dlogit|/std = %.6f (gate %.3f), rms %.6f, "
                "top-1 %d/%d\n",
                p.name.c_str(), p.max, Gates{}.f32_max, p.rms, p.top1, p.rows);
    EXPECT_TRUE(p.passed) << p.name;
    EXPECT_LE(p.max, Gates{}.f32_max) << p.name;
    EXPECT_EQ(p.top1, p.rows) << p.name;
  }
}

// The streaming arm bit for bit against the resident one; the dense lead
// block has no routed experts: none looked up there.
void ExpectIdentical(const std::string& dir, const config::ExpertConfig& experts) {
  ModelReport report;
  parity::ExpectIdentical(dir, kModel, experts, &report);
  const auto& lookups = report.experts.counters.layer_lookups;
  ASSERT_EQ(lookups.size(), 4u);
  EXPECT_EQ(lookups[0], 0u);
  for (int il = 1; il < 4; ++il) EXPECT_GT(lookups[il], 0u) << il;
}

TEST(CudaParityDeepseek2Test, CopyPolicyAtAQuarterIsBitIdentical) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  config::ExpertConfig experts;
  experts.arena_fraction = 0.25;
  ExpectIdentical(dir, experts);
}

TEST(CudaParityDeepseek2Test, CopyPolicyAtOneSlotIsBitIdentical) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  config::ExpertConfig experts;
  experts.slots = 1;
  ExpectIdentical(dir, experts);
}

// The experts in slots multiplied while the missed ones are copied
// (SetOverlapMissesEnabled; off by default): still bit for bit the resident
// arm, at 25% and at one slot (passed on the H100, runs 12 and 13).
TEST(CudaParityDeepseek2Test, OverlappedMissesAreBitIdentical) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  const bool was = OverlapMissesEnabled();
  SetOverlapMissesEnabled(true);
  config::ExpertConfig quarter;
  quarter.arena_fraction = 0.25;
  ExpectIdentical(dir, quarter);
  config::ExpertConfig one_slot;
  one_slot.slots = 1;
  ExpectIdentical(dir, one_slot);
  SetOverlapMissesEnabled(was);
}

// The next block's experts predicted from this block's input and
// prefetched in one-token passes (as the decode program does for qwen):
// still the resident bits at 25%, with prefetches issued and some of them
// useful (passed on the H100, runs 15 and 16).
TEST(CudaParityDeepseek2Test, PrefetchedExpertsAreBitIdentical) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  config::ExpertConfig quarter;
  quarter.arena_fraction = 0.25;
  quarter.prefetch = true;
  ModelReport report;
  parity::ExpectIdentical(dir, kModel, quarter, &report);
  const memory::SlotCacheCounters& n = report.experts.counters;
  std::printf("prefetches issued %llu, useful %llu, late %llu\n",
              static_cast<unsigned long long>(n.prefetches_issued),
              static_cast<unsigned long long>(n.prefetches_useful),
              static_cast<unsigned long long>(n.prefetches_late));
  EXPECT_GT(n.prefetches_issued, 0u);
  EXPECT_GT(n.prefetches_useful, 0u);
}

// --expert_skip through the one-token pass (deepseek2's decode):
// ExpectSkipsOnlyOffMemory.
TEST(CudaParityDeepseek2Test, ColdExpertsAreSkippedOnlyOffMemory) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  ExpectSkipsOnlyOffMemory(dir, kModel, /*host_share=*/false);
}

// Each prompt inside batches of 5 other sequences (several sequences'
// latent caches in one launch): its rows within the gate against the
// goldens and against the prompt alone, and each pass's MoE blocks
// acquiring the union of their rows' experts.
TEST(CudaParityDeepseek2Test, PromptInsideABatchPassesTheGate) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  Options options;
  options.backend = Backend::kCuda;
  options.batch_with = 5;
  auto report = RunParity(dir + "/" + kModel + ".gguf", dir, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::fputs(FormatReport({*report}).c_str(), stdout);
  ASSERT_EQ(report->batched.size(), 3u);
  const ModelInfo& m = report->info;
  for (size_t i = 0; i < 3; ++i) {
    const PromptReport& p = report->prompts[i];
    EXPECT_TRUE(p.passed) << p.name << ": max=" << p.max << " top1=" << p.top1 << "/" << p.rows;
    const BatchedPrompt& b = report->batched[i];
    std::printf("%s batched vs alone: max=%g top1=%d/%d experts=%lld [%d, %d]\n", p.name.c_str(),
                b.vs_alone.max, b.vs_alone.top1, b.vs_alone.rows,
                static_cast<long long>(b.experts_acquired), b.min_layer_experts,
                b.max_layer_experts);
    EXPECT_TRUE(b.vs_alone.passed) << b.vs_alone.name;
    EXPECT_GE(b.min_layer_experts, m.n_expert_used);
    EXPECT_GT(b.max_layer_experts, m.n_expert_used);
    EXPECT_GE(b.experts_acquired, 33 * kMoeBlocks * b.min_layer_experts);
    EXPECT_LE(b.experts_acquired, 33 * kMoeBlocks * b.max_layer_experts);
  }
}

// Every row's logits of `tokens` as one prompt on `backend`.
std::vector<float> PromptLogits(const std::string& path, Backend backend,
                                const std::vector<int32_t>& tokens) {
  auto files = ModelFiles::Open(path);
  EXPECT_TRUE(files.ok()) << files.status();
  if (!files.ok()) return {};
  EngineOptions o;
  o.backend = backend;
  o.threads = 1;
  auto model = LoadModel(**files, o);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  auto state = (*model)->CreateState(64);
  EXPECT_TRUE(state.ok());
  std::vector<float> logits;
  EXPECT_TRUE((*model)->Forward(tokens, **state, LogitRows::kAll, &logits).ok());
  return logits;
}

// max |a - b| over the standard deviation of a, and the rows whose arg-max
// agree.
void Compare(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab,
             double* max_over_std, int* top1) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 0u);
  double mean = 0, var = 0, max = 0;
  for (float x : a) mean += x;
  mean /= static_cast<double>(a.size());
  for (float x : a) var += (x - mean) * (x - mean);
  for (size_t i = 0; i < a.size(); ++i) max = std::max(max, std::fabs(double{a[i]} - b[i]));
  *max_over_std = max / std::sqrt(var / static_cast<double>(a.size()));
  *top1 = 0;
  for (size_t r = 0; r * vocab < a.size(); ++r) {
    const auto ra = a.begin() + r * vocab, rb = b.begin() + r * vocab;
    *top1 += std::max_element(ra, ra + vocab) - ra == std::max_element(rb, rb + vocab) - rb;
  }
}

// The older fused attn_kv_b (mkmodel draws it from the split layout's
// weights, f32): on CUDA its K_b is unfused at load (model/mla.h
// UnfusedKb), and its logits pass the F32 gate against the CPU's (which
// applies the fused K_b transposed) and against the split file on CUDA.
TEST(CudaParityDeepseek2Test, FusedLayoutMatchesTheCpuAndTheSplitFile) {
  SLUICE_REQUIRE_DEVICE();
  const std::string dir = ::testing::TempDir();
  std::vector<std::string> paths;
  for (const uint32_t fused : {0u, 1u}) {
    mkmodel::Options o;
    o.arch = mkmodel::Arch::kDeepseek2;
    o.shape = *mkmodel::NamedShape(o.arch, "micro");
    o.shape.mla_fused = fused;
    o.seed = 11;
    paths.push_back(dir + "/ds2_layout" + std::to_string(fused) + ".gguf");
    ASSERT_TRUE(mkmodel::WriteModel(o, paths.back()).ok());
  }
  const std::vector<int32_t> tokens = {1, 17, 130, 5, 99, 4, 100, 12, 64, 3, 150, 7};
  const std::vector<float> split_cuda = PromptLogits(paths[0], Backend::kCuda, tokens);
  const std::vector<float> fused_cuda = PromptLogits(paths[1], Backend::kCuda, tokens);
  const std::vector<float> fused_cpu = PromptLogits(paths[1], Backend::kCpu, tokens);
  const int64_t vocab = static_cast<int64_t>(fused_cpu.size() / tokens.size());
  const int rows = static_cast<int>(tokens.size());
  double vs_cpu = 0, vs_split = 0;
  int top1_cpu = 0, top1_split = 0;
  Compare(fused_cpu, fused_cuda, vocab, &vs_cpu, &top1_cpu);
  Compare(split_cuda, fused_cuda, vocab, &vs_split, &top1_split);
  std::printf("fused attn_kv_b on cuda: vs cpu max/std %.6f top-1 %d/%d; vs the split file "
              "max/std %.6f top-1 %d/%d\n",
              vs_cpu, top1_cpu, rows, vs_split, top1_split, rows);
  EXPECT_LE(vs_cpu, Gates{}.f32_max);
  EXPECT_EQ(top1_cpu, rows);
  EXPECT_LE(vs_split, Gates{}.f32_max);
  EXPECT_EQ(top1_split, rows);
}

// A prompt and 12 greedy steps on the CUDA backend: every step's logits,
// and the model's statistics after them.
struct GreedyRun {
  std::vector<float> logits;
  BackendStats stats;
};
GreedyRun RunGreedy(const std::string& path, bool profile) {
  GreedyRun run;
  const std::vector<int32_t> prompt = {1, 17, 130, 5, 99, 4};
  auto files = ModelFiles::Open(path);
  EXPECT_TRUE(files.ok()) << files.status();
  if (!files.ok()) return run;
  EngineOptions o;
  o.backend = Backend::kCuda;
  o.profile = profile;
  auto model = LoadModel(**files, o);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return run;
  auto state = (*model)->CreateState(64);
  EXPECT_TRUE(state.ok());
  if (!state.ok()) return run;
  std::vector<float> logits;
  EXPECT_TRUE((*model)->Forward(prompt, **state, LogitRows::kLast, &logits).ok());
  run.logits = logits;
  for (int step = 0; step < 12 && !logits.empty(); ++step) {
    const int32_t next = static_cast<int32_t>(
        std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_TRUE((*model)->Forward({&next, 1}, **state, LogitRows::kLast, &logits).ok());
    run.logits.insert(run.logits.end(), logits.begin(), logits.end());
  }
  run.stats = (*model)->Stats();
  return run;
}

int Differ(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  int differ = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    differ += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  }
  return differ;
}

// Resident decode steps replay the one-token pass captured at the first
// (CudaModel::OnePassByGraph): a prompt and 12 greedy steps give the same
// logits bit for bit as eager passes (a profiled model captures nothing),
// and the model reports the graph and its launches.
TEST(CudaParityDeepseek2Test, DecodeReplaysTheCapturedPass) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  std::vector<GreedyRun> arms;
  for (const bool profile : {false, true}) {
    arms.push_back(RunGreedy(dir + "/" + kModel + ".gguf", profile));
    const BackendStats& stats = arms.back().stats;
    EXPECT_EQ(stats.decode_graph, !profile);
    if (!profile) {
      EXPECT_GT(stats.launches_per_decode, 20);
    }
    std::printf("deepseek2 decode, profile=%d: decode_graph=%d launches_per_decode=%lld\n",
                profile ? 1 : 0, stats.decode_graph ? 1 : 0,
                static_cast<long long>(stats.launches_per_decode));
  }
  EXPECT_EQ(Differ(arms[0].logits, arms[1].logits), 0);
}

// The norms' outputs rounded to 8 bits in the norms' own launches
// (SetFuseRoundingEnabled; off by default: no faster on Kimi, run 14): the
// same logits bit for bit, in no more launches a step. The golden's F32
// weights read no 8-bit rows, so here nothing is fused (run 15: 88 and 88
// launches); the fused launches' bytes are emulated
// (//kernels/cuda:quant_matmul_emulation_test) and Kimi-K2's step went
// from 146 to 127 launches with it (run 14).
TEST(CudaParityDeepseek2Test, FusedRoundingIsBitIdentical) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  const bool was = cuda::FuseRoundingEnabled();
  cuda::SetFuseRoundingEnabled(false);
  const GreedyRun apart = RunGreedy(dir + "/" + kModel + ".gguf", false);
  cuda::SetFuseRoundingEnabled(true);
  const GreedyRun fused = RunGreedy(dir + "/" + kModel + ".gguf", false);
  cuda::SetFuseRoundingEnabled(was);
  std::printf("launches a decode step: %lld apart, %lld fused\n",
              static_cast<long long>(apart.stats.launches_per_decode),
              static_cast<long long>(fused.stats.launches_per_decode));
  EXPECT_FALSE(apart.logits.empty());
  EXPECT_EQ(Differ(apart.logits, fused.logits), 0);
  EXPECT_LE(fused.stats.launches_per_decode, apart.stats.launches_per_decode);
  EXPECT_GT(fused.stats.launches_per_decode, 0);
}

}  // namespace
}  // namespace sluice::parity
