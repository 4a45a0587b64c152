#include "worker/batch/batch_runner.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/goldens.h"
#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "model/engine.h"

namespace sluice::worker {
namespace {

constexpr int kContext = 64;

absl::Time T(int64_t s) { return absl::FromUnixSeconds(1000000 + s); }

// The F32 micro goldens of each architecture (qwen35moe has Gated DeltaNet
// blocks, whose recurrent state a reused slot must not leak).
class BatchRunnerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_GOLDENS(dir);
    auto files = ModelFiles::Open(absl::StrCat(dir, "/", GetParam(), ".gguf"));
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = *std::move(files);
    auto engine = Engine::Create(*files_, {.threads = 1, .context_length = kContext});
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  // Seeded prompts of the given lengths.
  std::vector<std::vector<int32_t>> Prompts(const std::vector<int>& lengths) const {
    std::mt19937 rng(5);
    std::vector<std::vector<int32_t>> out;
    for (int n : lengths) {
      std::vector<int32_t> p;
      for (int i = 0; i < n; ++i) p.push_back(rng() % engine_->info().n_vocab);
      out.push_back(p);
    }
    return out;
  }

  // What the request gives alone: Generate, greedy, no stops.
  std::vector<int32_t> Alone(const std::vector<int32_t>& prompt, int max_tokens) {
    std::vector<int32_t> ids;
    auto session = engine_->NewSession();
    EXPECT_TRUE(session.ok());
    GenerateParams p;
    p.prompt = prompt;
    p.max_tokens = max_tokens;
    p.stop_at_eos = false;
    auto r = Generate(**session, p, [&](int32_t id, std::string_view) {
      ids.push_back(id);
      return true;
    });
    EXPECT_TRUE(r.ok()) << r.status();
    return ids;
  }

  // Blocks of 4 positions, a pool of 1.25 contexts for 3 sequences (so they
  // preempt each other), 8 tokens a step (so prompts are chunked).
  static sched::SchedulerOptions Tight() {
    sched::SchedulerOptions o;
    o.max_sequences = 3;
    o.token_budget = 8;
    o.context_per_sequence = kContext;
    o.block_tokens = 4;
    o.kv_blocks = 20;
    o.decode_headroom_tokens = 0;
    return o;
  }

  std::unique_ptr<ModelFiles> files_;
  std::unique_ptr<Engine> engine_;
};

// Five requests (one ends at the context) through 3 slots: each streams
// exactly the tokens it streams alone, though prompts were chunked and
// sequences preempted and recomputed.
TEST_P(BatchRunnerTest, EveryRequestGetsTheTokensItGetsAlone) {
  const std::vector<int> lengths = {3, 17, 30, 9, 50};
  const std::vector<int> max_tokens = {20, 12, 16, 25, 30};
  const auto prompts = Prompts(lengths);
  auto runner = BatchRunner::Create(*engine_, Tight());
  ASSERT_TRUE(runner.ok()) << runner.status();
  // The recurrent states only: no KV page is resident before a token.
  const uint64_t idle_bytes = (*runner)->ResidentStateBytes();
  uint64_t busiest = 0;
  std::map<sched::SeqId, std::vector<int32_t>> got;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE((*runner)->Add({i + 1, prompts[i], {}, max_tokens[i]}).ok());
  }
  std::map<sched::SeqId, sched::FinishReason> reasons;
  int64_t chunked = 0;
  for (int step = 0; !(*runner)->idle(); ++step) {
    ASSERT_LT(step, 1000);
    auto r = (*runner)->Step(T(0), [&](sched::SeqId id, int32_t t) {
      got[id].push_back(t);
      return false;
    });
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_LE(r->plan.tokens(), 8);
    busiest = std::max(busiest, (*runner)->ResidentStateBytes());
    for (const sched::Chunk& c : r->plan.prefills) chunked += !c.samples;
    for (const sched::Finished& f : r->finished) reasons[f.id] = f.reason;
  }
  const sched::SchedulerStats stats = (*runner)->scheduler().Stats();
  EXPECT_GT(stats.preemptions, 0u);
  EXPECT_GT(chunked, 0);
  EXPECT_EQ(stats.kv_blocks_used, 0);
  // Every ended or preempted sequence's KV pages were given back.
  EXPECT_GT(busiest, idle_bytes);
  EXPECT_EQ((*runner)->ResidentStateBytes(), idle_bytes);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> alone = Alone(prompts[i], max_tokens[i]);
    EXPECT_EQ(got[i + 1], alone) << "request " << i + 1;
  }
  // 50 + 15 > 64: the last ends at the context after 64 - 50 + 1 tokens.
  EXPECT_EQ(got[5].size(), 15u);
  EXPECT_EQ(reasons[5], sched::FinishReason::kContext);
  EXPECT_EQ(reasons[1], sched::FinishReason::kLength);
  std::cout << "preemptions " << stats.preemptions << ", steps " << stats.steps << "\n";
}

// A stop from the callback, a cancel and a deadline end their requests
// early; the others are unaffected, and the tokens streamed before the end
// are the ones alone.
TEST_P(BatchRunnerTest, StopCancelAndDeadlineEndOneRequest) {
  const auto prompts = Prompts({5, 6, 7, 8});
  auto runner = BatchRunner::Create(*engine_, Tight());
  ASSERT_TRUE(runner.ok()) << runner.status();
  ASSERT_TRUE((*runner)->Add({1, prompts[0], {}, 20}).ok());
  ASSERT_TRUE((*runner)->Add({2, prompts[1], {}, 20}).ok());
  ASSERT_TRUE((*runner)->Add({3, prompts[2], {}, 20, T(6)}).ok());
  ASSERT_TRUE((*runner)->Add({4, prompts[3], {}, 20}).ok());
  std::map<sched::SeqId, std::vector<int32_t>> got;
  std::map<sched::SeqId, sched::FinishReason> reasons;
  bool cancelled = false;
  for (int step = 0; !(*runner)->idle(); ++step) {
    ASSERT_LT(step, 1000);
    if (got[2].size() == 4 && !cancelled) {
      ASSERT_TRUE((*runner)->Cancel(2).ok());
      cancelled = true;
    }
    auto r = (*runner)->Step(T(step), [&](sched::SeqId id, int32_t t) {
      got[id].push_back(t);
      return id == 1 && got[id].size() == 7;
    });
    ASSERT_TRUE(r.ok()) << r.status();
    for (const sched::Finished& f : r->finished) reasons[f.id] = f.reason;
  }
  EXPECT_EQ(reasons[1], sched::FinishReason::kStopped);
  EXPECT_EQ(got[1].size(), 7u);
  EXPECT_EQ(reasons.count(2), 0u);  // cancelled: no finish reported
  EXPECT_EQ(got[2].size(), 4u);
  EXPECT_EQ(reasons[3], sched::FinishReason::kDeadline);
  EXPECT_LT(got[3].size(), 20u);
  EXPECT_EQ(reasons[4], sched::FinishReason::kLength);
  EXPECT_EQ(got[4].size(), 20u);
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> alone = Alone(prompts[i], 20);
    alone.resize(got[i + 1].size());
    EXPECT_EQ(got[i + 1], alone) << "request " << i + 1;
  }
  EXPECT_EQ((*runner)->Cancel(2).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*runner)->scheduler().kv_blocks().used_blocks(), 0);
}

// Random options (budget, block size, pool, headroom, slots) cut prompts and
// preempt sequences at random points; every request still streams what it
// streams alone.
TEST_P(BatchRunnerTest, RandomSchedulesGiveTheSameTokens) {
  std::mt19937 rng(GetParam().size());
  uint64_t preemptions = 0;
  for (int round = 0; round < 10; ++round) {
    sched::SchedulerOptions o;
    o.max_sequences = 1 + rng() % 4;
    o.token_budget = o.max_sequences + rng() % 12;
    o.context_per_sequence = kContext;
    o.block_tokens = 1 + rng() % 8;
    const int32_t one = (kContext + o.block_tokens - 1) / o.block_tokens;
    o.kv_blocks = one + rng() % (one / 4 + 1);  // tight: sequences collide
    o.decode_headroom_tokens = rng() % 9;
    auto runner = BatchRunner::Create(*engine_, o);
    ASSERT_TRUE(runner.ok()) << runner.status();
    std::vector<int> lengths, max_tokens;
    for (int i = 0; i < 6; ++i) {
      lengths.push_back(1 + rng() % 40);
      max_tokens.push_back(1 + rng() % 30);
    }
    const auto prompts = Prompts(lengths);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE((*runner)->Add({i + 1, prompts[i], {}, max_tokens[i]}).ok());
    }
    std::map<sched::SeqId, std::vector<int32_t>> got;
    for (int step = 0; !(*runner)->idle(); ++step) {
      ASSERT_LT(step, 5000);
      auto r = (*runner)->Step(T(0), [&](sched::SeqId id, int32_t t) {
        got[id].push_back(t);
        return false;
      });
      ASSERT_TRUE(r.ok()) << r.status();
    }
    preemptions += (*runner)->scheduler().Stats().preemptions;
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(got[i + 1], Alone(prompts[i], max_tokens[i])) << "round " << round << " request "
                                                              << i + 1;
    }
  }
  std::cout << "preemptions over the rounds: " << preemptions << "\n";
  EXPECT_GT(preemptions, 5u);
}

TEST_P(BatchRunnerTest, RefusesWhatCannotRun) {
  sched::SchedulerOptions o = Tight();
  o.context_per_sequence = kContext + 1;
  o.kv_blocks = 40;
  EXPECT_EQ(BatchRunner::Create(*engine_, o).status().code(), absl::StatusCode::kInvalidArgument);
  auto runner = BatchRunner::Create(*engine_, Tight());
  ASSERT_TRUE(runner.ok());
  const int32_t n_vocab = static_cast<int32_t>(engine_->info().n_vocab);
  EXPECT_EQ((*runner)->Add({1, {n_vocab}, {}, 4}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*runner)->Add({1, {}, {}, 4}).code(), absl::StatusCode::kInvalidArgument);
  SamplerParams bad;
  bad.temperature = -1;
  EXPECT_EQ((*runner)->Add({1, {1}, bad, 4}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*runner)->Add({1, std::vector<int32_t>(kContext + 1, 1), {}, 4}).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_TRUE((*runner)->idle());
}

INSTANTIATE_TEST_SUITE_P(Goldens, BatchRunnerTest,
                         ::testing::Values("qwen35moe-micro-f32", "qwen3moe-micro-f32"),
                         [](const auto& info) {
                           return info.param.substr(0, info.param.find('-'));
                         });

}  // namespace
}  // namespace sluice::worker
