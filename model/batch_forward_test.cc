// Model::ForwardBatch: several sequences' chunks in one pass give, bit for
// bit, the logits and states each chunk gives alone (CpuModel's batched
// pass on random-weight models of every architecture; the default
// implementation on a fake backend), count the union of their experts, and
// refuse malformed batches without touching any state. Golden parity of a
// prompt inside a batch is tools/parity_test.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "model/cpu_model.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/state.h"
#include "model/testing/mkmodel.h"

namespace sluice {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

// The distinct experts each layer was routed to, per OnRouting call.
class ExpertSets : public RoutingObserver {
 public:
  void OnRouting(int64_t layer, int64_t k,
                 absl::Span<const Routing> routes) override {
    std::set<int32_t> s;
    for (const Routing& r : routes) s.insert(r.expert, r.expert + k);
    calls.push_back({layer, s});
  }
  std::vector<std::pair<int64_t, std::set<int32_t>>> calls;
};

struct Case {
  mkmodel::Arch arch;
  GgmlType type;
  const char* name;
};

class BatchForwardTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case c = GetParam();
    mkmodel::Options o;
    o.arch = c.arch;
    o.shape = *mkmodel::NamedShape(c.arch, "micro");
    o.type = c.type;
    o.seed = 11;
    const std::string path = TempPath(absl::StrCat(c.name, ".gguf"));
    ASSERT_TRUE(mkmodel::WriteModel(o, path).ok());
    auto files = ModelFiles::Open(path);
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = *std::move(files);
    auto model = LoadCpuModel(*files_, {.threads = 2, .routing_observer = &seen_});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  std::unique_ptr<SequenceState> NewState(int capacity = 700) const {
    auto s = model_->CreateState(capacity);
    EXPECT_TRUE(s.ok());
    return *std::move(s);
  }

  std::vector<int32_t> Tokens(int n, int salt) const {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) {
      t.push_back(static_cast<int32_t>((i * 7919 + salt * 104729) % model_->info().n_vocab));
    }
    return t;
  }

  ExpertSets seen_;
  std::unique_ptr<ModelFiles> files_;
  std::unique_ptr<Model> model_;
};

void ExpectSameState(const SequenceState& a, const SequenceState& b) {
  const auto& x = dynamic_cast<const State&>(a);
  const auto& y = dynamic_cast<const State&>(b);
  ASSERT_EQ(x.position(), y.position());
  for (int i = 0; i < x.num_blocks(); ++i) {
    EXPECT_TRUE(std::equal(x.block(i).k.begin(), x.block(i).k.end(), y.block(i).k.begin(),
                           y.block(i).k.end()))
        << "block " << i;
    EXPECT_TRUE(std::equal(x.block(i).v.begin(), x.block(i).v.end(), y.block(i).v.begin(),
                           y.block(i).v.end()))
        << "block " << i;
    EXPECT_EQ(x.block(i).conv, y.block(i).conv) << "block " << i;
    EXPECT_EQ(x.block(i).ssm, y.block(i).ssm) << "block " << i;
  }
}

// Four sequences at different points (a fresh prompt wanting every row, a
// decode, a prefill chunk in the middle of its prompt, a prompt's last
// chunk), then a step of decodes: every logit and every byte of state is
// what the chunk gives alone, and each layer acquires the union of its
// rows' experts, once each.
TEST_P(BatchForwardTest, ChunksInOneBatchEqualEachAlone) {
  const int64_t v = model_->info().n_vocab;
  const int kSeqs = 4;
  // What the sequences hold before the batch, and their chunks.
  const std::vector<int> before = {0, 9, 5, 12};
  const std::vector<int> chunk_len = {7, 1, 6, 3};
  const std::vector<LogitRows> rows = {LogitRows::kAll, LogitRows::kLast,
                                       LogitRows::kNone, LogitRows::kLast};
  std::vector<std::unique_ptr<SequenceState>> batched, alone;
  std::vector<std::vector<int32_t>> chunk;
  std::vector<float> ignored;
  for (int s = 0; s < kSeqs; ++s) {
    batched.push_back(NewState());
    alone.push_back(NewState());
    if (before[s] > 0) {
      const std::vector<int32_t> held = Tokens(before[s], 100 + s);
      ASSERT_TRUE(model_->Forward(held, *batched[s], LogitRows::kNone, &ignored).ok());
      ASSERT_TRUE(model_->Forward(held, *alone[s], LogitRows::kNone, &ignored).ok());
    }
    chunk.push_back(Tokens(chunk_len[s], s));
  }
  std::vector<float> want;
  int64_t alone_acquired = 0;
  for (int s = 0; s < kSeqs; ++s) {
    seen_.calls.clear();
    std::vector<float> l;
    ASSERT_TRUE(model_->Forward(chunk[s], *alone[s], rows[s], &l).ok());
    want.insert(want.end(), l.begin(), l.end());
    for (const auto& [layer, set] : seen_.calls) alone_acquired += set.size();
  }

  seen_.calls.clear();
  std::vector<BatchChunk> batch;
  for (int s = 0; s < kSeqs; ++s) {
    batch.push_back({batched[s].get(), before[s], chunk[s], rows[s]});
  }
  std::vector<float> got;
  auto stats = model_->ForwardBatch(batch, &got);
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(got.size(), static_cast<size_t>((7 + 1 + 0 + 1) * v));
  EXPECT_EQ(got, want);
  for (int s = 0; s < kSeqs; ++s) {
    EXPECT_EQ(batched[s]->position(), before[s] + chunk_len[s]);
    ExpectSameState(*batched[s], *alone[s]);
  }
  // One routing call per MoE layer over all 17 rows; its union is what
  // the layer acquired.
  ASSERT_EQ(stats->experts_per_layer.size(), static_cast<size_t>(model_->info().n_layer));
  int64_t moe_layers = 0;
  for (const auto& [layer, set] : seen_.calls) {
    EXPECT_EQ(stats->experts_per_layer[layer], static_cast<int32_t>(set.size()))
        << "layer " << layer;
    ++moe_layers;
  }
  EXPECT_GT(moe_layers, 0);
  EXPECT_EQ(seen_.calls.size(), static_cast<size_t>(moe_layers));
  EXPECT_LT(stats->experts_acquired(), alone_acquired);
  std::printf("%s: experts acquired batched %lld vs one chunk at a time %lld\n",
              GetParam().name, static_cast<long long>(stats->experts_acquired()),
              static_cast<long long>(alone_acquired));

  // A step of decodes after it: still identical.
  std::vector<BatchChunk> step;
  std::vector<std::vector<int32_t>> next;
  want.clear();
  for (int s = 0; s < kSeqs; ++s) next.push_back({static_cast<int32_t>(40 + s)});
  for (int s = 0; s < kSeqs; ++s) {
    step.push_back({batched[s].get(), batched[s]->position(), next[s], LogitRows::kLast});
    std::vector<float> l;
    ASSERT_TRUE(model_->Forward(next[s], *alone[s], LogitRows::kLast, &l).ok());
    want.insert(want.end(), l.begin(), l.end());
  }
  ASSERT_TRUE(model_->ForwardBatch(step, &got).ok());
  EXPECT_EQ(got, want);
}

// More rows than kMaxMicroBatch: a chunk straddles two micro-batches, and
// every row still equals the chunk alone.
TEST_P(BatchForwardTest, LongBatchStraddlesMicroBatches) {
  const std::vector<int32_t> a = Tokens(400, 1), b = Tokens(200, 2), c = Tokens(1, 3);
  auto sa = NewState(), sb = NewState(), sc = NewState();
  std::vector<float> got;
  const std::vector<BatchChunk> batch = {{sa.get(), 0, a, LogitRows::kLast},
                                         {sb.get(), 0, b, LogitRows::kAll},
                                         {sc.get(), 0, c, LogitRows::kLast}};
  ASSERT_TRUE(model_->ForwardBatch(batch, &got).ok());
  std::vector<float> want, l;
  for (const auto& [tokens, rows] :
       {std::pair{a, LogitRows::kLast}, {b, LogitRows::kAll}, {c, LogitRows::kLast}}) {
    auto s = NewState();
    ASSERT_TRUE(model_->Forward(tokens, *s, rows, &l).ok());
    want.insert(want.end(), l.begin(), l.end());
  }
  EXPECT_EQ(got.size(), (1 + 200 + 1) * static_cast<size_t>(model_->info().n_vocab));
  EXPECT_EQ(got, want);
  EXPECT_EQ(sb->position(), 200);
}

INSTANTIATE_TEST_SUITE_P(
    Archs, BatchForwardTest,
    ::testing::Values(Case{mkmodel::Arch::kQwen3Moe, GgmlType::kF32, "q3_f32"},
                      Case{mkmodel::Arch::kQwen35Moe, GgmlType::kF32, "q35_f32"},
                      Case{mkmodel::Arch::kQwen35Moe, GgmlType::kQ8_0, "q35_q8"},
                      Case{mkmodel::Arch::kDeepseek2, GgmlType::kF32, "ds2_f32"}),
    [](const auto& info) { return std::string(info.param.name); });

class BatchForwardErrorsTest : public BatchForwardTest {};

// Each malformed batch is refused with its code and message, and no state
// moves (the valid chunk before the bad one included).
TEST_P(BatchForwardErrorsTest, RefusedBatchesLeaveEveryStateAlone) {
  auto s1 = NewState(16), s2 = NewState(16);
  const std::vector<int32_t> t = {1, 2, 3};
  const std::vector<int32_t> bad = {1, static_cast<int32_t>(model_->info().n_vocab)};
  const std::vector<int32_t> none, too_long(17, 1);
  std::vector<float> logits;
  struct Bad {
    std::vector<BatchChunk> batch;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {{}, absl::StatusCode::kInvalidArgument, "ForwardBatch: no chunks"},
      {{{s1.get(), 0, t}, {s1.get(), 0, t}}, absl::StatusCode::kInvalidArgument,
       "chunk 1: ForwardBatch: the state of an earlier chunk again"},
      {{{s1.get(), 0, t}, {s2.get(), 2, t}}, absl::StatusCode::kInvalidArgument,
       "chunk 1: Forward: the chunk starts at position 2 but its state is at 0"},
      {{{s1.get(), 0, t}, {s2.get(), 0, none}}, absl::StatusCode::kInvalidArgument,
       "chunk 1: Forward: empty batch"},
      {{{s1.get(), 0, t}, {nullptr, 0, t}}, absl::StatusCode::kInvalidArgument,
       "chunk 1: Forward: null state"},
      {{{s1.get(), 0, t}, {s2.get(), 0, bad}}, absl::StatusCode::kInvalidArgument,
       absl::StrCat("chunk 1: Forward: token id ", bad[1],
                    " at batch index 1 is outside the vocabulary [0, ", bad[1], ")")},
      {{{s1.get(), 0, t}, {s2.get(), 0, too_long}},
       absl::StatusCode::kOutOfRange,
       "chunk 1: context length exceeded: 0 tokens held + 17 new > context length 16"},
  };
  for (const Bad& b : cases) {
    const auto r = model_->ForwardBatch(b.batch, &logits);
    EXPECT_EQ(r.status().code(), b.code) << b.message;
    EXPECT_EQ(r.status().message(), b.message);
  }
  const std::vector<BatchChunk> wants = {{s1.get(), 0, t, LogitRows::kLast}};
  EXPECT_EQ(model_->ForwardBatch(wants, nullptr).status().message(),
            "Forward: logits requested but null");
  EXPECT_EQ(s1->position(), 0);
  EXPECT_EQ(s2->position(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Qwen3, BatchForwardErrorsTest,
    ::testing::Values(Case{mkmodel::Arch::kQwen3Moe, GgmlType::kF32, "errors"}),
    [](const auto& info) { return std::string(info.param.name); });

// A backend with only a per-sequence pass: the default ForwardBatchImpl
// runs it on each piece in order (the CUDA backend's case).
class PerSequenceModel final : public Model {
 public:
  class FakeState final : public SequenceState {
   public:
    FakeState() : SequenceState(1000) {}
    void Reset() override {}
    uint64_t bytes() const override { return 0; }
  };

  PerSequenceModel() { info_.n_vocab = 4; }
  const ModelInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<SequenceState>> CreateState(int) const override {
    return std::unique_ptr<SequenceState>(std::make_unique<FakeState>());
  }
  uint64_t StateBytes(int) const override { return 0; }

  // (first token, position, rows) of every call, in order.
  mutable std::vector<std::vector<int>> calls;

 protected:
  // Row r of a call gets logits {position + r, first token, 0, 0}.
  absl::Status ForwardImpl(absl::Span<const int32_t> tokens, SequenceState& s,
                           LogitRows rows, std::vector<float>* logits) const override {
    calls.push_back({tokens[0], s.position(), static_cast<int>(tokens.size())});
    logits->clear();
    const size_t first = rows == LogitRows::kLast ? tokens.size() - 1 : 0;
    for (size_t r = first; rows != LogitRows::kNone && r < tokens.size(); ++r) {
      logits->insert(logits->end(), {float(s.position() + r), float(tokens[0]), 0, 0});
    }
    return absl::OkStatus();
  }

 private:
  ModelInfo info_;
};

TEST(DefaultForwardBatchTest, RunsEachPieceThroughForwardImpl) {
  PerSequenceModel m;
  auto a = *m.CreateState(1), b = *m.CreateState(1);
  a->Advance(5);
  const std::vector<int32_t> ta = {3, 1}, tb(600, 2);
  std::vector<float> logits;
  const std::vector<BatchChunk> batch = {{a.get(), 5, ta, LogitRows::kLast},
                                         {b.get(), 0, tb, LogitRows::kLast}};
  auto stats = m.ForwardBatch(batch, &logits);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_TRUE(stats->experts_per_layer.empty());
  // b straddles the micro-batches: 510 rows with a, the last 90 alone.
  const std::vector<std::vector<int>> calls = {{3, 5, 2}, {2, 0, 510}, {2, 510, 90}};
  EXPECT_EQ(m.calls, calls);
  EXPECT_EQ(logits, (std::vector<float>{6, 3, 0, 0, 599, 2, 0, 0}));
  EXPECT_EQ(a->position(), 7);
  EXPECT_EQ(b->position(), 600);
}

}  // namespace
}  // namespace sluice
