// GenerateBatch in-process on a golden CPU model, with a stand-in for the
// backend's expert counters that adds fixed figures at every forward pass:
// each request's expert figures are its rows' share of each pass it took
// part in, so they add up to the worker's counters instead of each request
// counting the whole batch.
#include "worker/generate_batch.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/testing/goldens.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "model/engine.h"

namespace sluice::worker {
namespace {

v1::SupervisorMessage Job(uint64_t id, int prompt_tokens, int max_tokens) {
  v1::SupervisorMessage m;
  m.set_request_id(id);
  sluice::v1::GenerateRequest* g = m.mutable_generate();
  for (int i = 0; i < prompt_tokens; ++i) g->mutable_token_ids()->add_ids(10 + i);
  g->set_max_tokens(max_tokens);
  g->set_ignore_eos(true);
  g->mutable_sampling()->set_temperature(0);
  return m;
}

class GenerateBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_GOLDENS(dir);
    auto files = ModelFiles::Open(dir + "/qwen35moe-micro-f32.gguf");
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = *std::move(files);
    auto engine = Engine::Create(*files_, {.threads = 1, .context_length = 64});
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  // Every pass adds 12 lookups, 6 hits and 1,200 disk bytes.
  GenerateBatch::Hooks Hooks() {
    GenerateBatch::Hooks h;
    h.send = [this](const v1::WorkerMessage& m) {
      if (m.has_done()) done_[m.request_id()] = m.done();
    };
    h.send_error = [](uint64_t id, const absl::Status& s) {
      ADD_FAILURE() << "request " << id << ": " << s;
    };
    h.experts = [this] {
      ExpertStreamStats s;
      s.streaming = true;
      s.counters = counters_;
      return s;
    };
    h.count_pass = [this] {
      ++passes_;
      counters_.lookups += 12;
      counters_.hits += 6;
      counters_.misses += 6;
      counters_.bytes_by_tier[static_cast<int>(memory::Tier::kDisk)] += 1200;
    };
    h.log = [](const std::string&) {};
    return h;
  }

  void RunAll(GenerateBatch& b) {
    for (int i = 0; i < 1000 && !b.idle(); ++i) ASSERT_TRUE(b.Step().ok());
    ASSERT_TRUE(b.idle());
  }

  std::unique_ptr<ModelFiles> files_;
  std::unique_ptr<Engine> engine_;
  memory::SlotCacheCounters counters_;
  int passes_ = 0;
  std::map<uint64_t, sluice::v1::GenerateDone> done_;
};

TEST_F(GenerateBatchTest, ARequestAloneGetsEveryPassItRan) {
  if (engine_ == nullptr) return;
  auto b = GenerateBatch::Create(*engine_, {.max_sequences = 4}, Hooks());
  ASSERT_TRUE(b.ok()) << b.status();
  (*b)->Admit(Job(1, 7, 5));
  RunAll(**b);
  ASSERT_EQ(done_.count(1), 1u);
  EXPECT_EQ(passes_, 5);  // the prompt with the first token, then 4 decodes
  EXPECT_EQ(done_[1].experts().lookups(), 60u);
  EXPECT_EQ(done_[1].experts().bytes_disk(), 6000u);
}

// Two requests admitted together: the first pass evaluates 7 + 3 prompt
// rows, each later pass one row of each. The shares add up to the whole
// and follow the rows: the 7-token prompt's request gets 12 x 7/10 of the
// first pass.
TEST_F(GenerateBatchTest, ABatchSplitsEachPassByRows) {
  if (engine_ == nullptr) return;
  auto b = GenerateBatch::Create(*engine_, {.max_sequences = 4}, Hooks());
  ASSERT_TRUE(b.ok()) << b.status();
  (*b)->Admit(Job(1, 7, 5));
  (*b)->Admit(Job(2, 3, 5));
  RunAll(**b);
  ASSERT_EQ(done_.size(), 2u);
  EXPECT_EQ(passes_, 5);
  const sluice::v1::ExpertRequestStats& one = done_[1].experts();
  const sluice::v1::ExpertRequestStats& two = done_[2].experts();
  EXPECT_EQ(one.lookups() + two.lookups(), 60u);
  EXPECT_EQ(one.bytes_disk() + two.bytes_disk(), 6000u);
  EXPECT_EQ(one.hits() + two.hits(), 30u);
  // First pass: floor(12 x 7 / 10) = 8 and 12 - 8 = 4; then 6 and 6 four times.
  EXPECT_EQ(one.lookups(), 8u + 4 * 6);
  EXPECT_EQ(two.lookups(), 4u + 4 * 6);
  EXPECT_EQ(one.bytes_disk(), 840u + 4 * 600);
}

TEST(BatchLimitsOfTest, ReadsTheHellosPacing) {
  v1::WorkerConfig config;
  config.set_max_sequences(8);
  config.set_kv_cache_tokens(4096);
  EXPECT_EQ(BatchLimitsOf(config).pacing, PrefillPacing::kOn);  // "": the default
  EXPECT_EQ(BatchLimitsOf(config).max_sequences, 8);
  EXPECT_EQ(BatchLimitsOf(config).kv_cache_tokens, 4096);
  config.set_prefill_pacing("on");
  EXPECT_EQ(BatchLimitsOf(config).pacing, PrefillPacing::kOn);
  config.set_prefill_pacing("off");
  EXPECT_EQ(BatchLimitsOf(config).pacing, PrefillPacing::kOff);
}

// The switch reaches the batch: a batch paces by default (its cap is the
// pacer's, unmeasured 64) and reports no cap when pacing is off.
TEST_F(GenerateBatchTest, PacingFollowsTheLimits) {
  if (engine_ == nullptr) return;
  for (PrefillPacing p : {PrefillPacing::kOn, PrefillPacing::kOff}) {
    auto b = GenerateBatch::Create(*engine_, {.max_sequences = 2, .pacing = p}, Hooks());
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)->Stats().prefill_cap_tokens(), p == PrefillPacing::kOff ? 0u : 64u)
        << static_cast<int>(p);
  }
}

}  // namespace
}  // namespace sluice::worker
