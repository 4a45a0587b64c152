#include "model/trace_routing.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "memory/routing_trace.h"
#include "model/cpu_model.h"
#include "model/engine.h"
#include "model/testing/mkmodel.h"
#include "model/testing/routing_collector.h"

namespace sluice {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

using Collect = testing::RoutingCollector;

struct Outcome {
  std::vector<float> logits;  // every step's, one after another
  memory::RoutingTrace routed;
  std::vector<float> weights;
};

class TraceRoutingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    mkmodel::Options o;
    o.arch = mkmodel::Arch::kQwen35Moe;
    o.shape = *mkmodel::NamedShape(o.arch, "micro");
    o.seed = 11;
    const std::string path = TempPath("trace_routing_test.gguf");
    ASSERT_TRUE(mkmodel::WriteModel(o, path).ok());
    auto files = ModelFiles::Open(path);
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = files->release();
  }
  static void TearDownTestSuite() { delete files_; }

  // A 5-token prompt and 4 decode steps, routed by `source` (or the router).
  static Outcome Generate(RoutingSource* source) {
    Collect seen;
    Outcome run;
    auto engine = Engine::Create(*files_, {.threads = 1,
                                           .context_length = 32,
                                           .routing_observer = &seen,
                                           .routing_source = source});
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return run;
    seen.trace.header = Header((*engine)->info());
    auto session = (*engine)->NewSession();
    EXPECT_TRUE(session.ok());
    std::vector<float> logits;
    EXPECT_TRUE((*session)->Prefill({3, 9, 14, 2, 7}, &logits).ok());
    run.logits = logits;
    for (int32_t token : {11, 12, 4, 8}) {
      EXPECT_TRUE((*session)->Decode(token, &logits).ok());
      run.logits.insert(run.logits.end(), logits.begin(), logits.end());
    }
    run.routed = seen.trace;
    run.weights = seen.weights;
    return run;
  }

  static memory::RoutingTraceHeader Header(const ModelInfo& info) {
    return {static_cast<uint32_t>(info.n_layer), static_cast<uint32_t>(info.n_expert),
            static_cast<uint32_t>(info.n_expert_used)};
  }

  static ModelFiles* files_;
};

ModelFiles* TraceRoutingTest::files_ = nullptr;

TEST_F(TraceRoutingTest, ReplayingTheModelsOwnRoutingChangesNothing) {
  const Outcome alone = Generate(nullptr);
  ASSERT_EQ(alone.routed.size(), 9u * alone.routed.header.n_layer);
  TraceRouting source(alone.routed, "own");
  const Outcome replayed = Generate(&source);
  EXPECT_EQ(replayed.routed.experts, alone.routed.experts);
  EXPECT_EQ(replayed.routed.layer, alone.routed.layer);
  EXPECT_EQ(replayed.logits, alone.logits);  // bit for bit
  EXPECT_EQ(source.tokens_routed(), alone.routed.size());
  EXPECT_EQ(source.wraps(), 0u);
}

TEST_F(TraceRoutingTest, ForcedExpertsAreTheTracesInOrderWithTheRoutersWeights) {
  const Outcome alone = Generate(nullptr);
  const memory::RoutingTraceHeader h = alone.routed.header;
  ASSERT_GE(h.n_expert, 2 * h.k);
  // Three tokens a layer, each the experts the router never picks first
  // for token 0, then wrapping: 9 tokens take records 0,1,2,0,1,2,...
  memory::RoutingTrace trace;
  trace.header = h;
  for (uint32_t t = 0; t < 3; ++t) {
    for (uint32_t layer = 0; layer < h.n_layer; ++layer) {
      std::vector<int32_t> ids;
      for (uint32_t j = 0; j < h.k; ++j) {
        ids.push_back(static_cast<int32_t>((t * 3 + layer + j * 2) % h.n_expert));
      }
      trace.Add(t, layer, ids);
    }
  }
  TraceRouting source(trace, "three");
  const Outcome forced = Generate(&source);
  ASSERT_EQ(forced.routed.size(), alone.routed.size());
  std::vector<uint32_t> used(h.n_layer, 0);
  for (size_t i = 0; i < forced.routed.size(); ++i) {
    const uint32_t layer = forced.routed.layer[i];
    const uint32_t t = used[layer]++ % 3;
    const absl::Span<const int32_t> want = trace.Experts(t * h.n_layer + layer);
    const absl::Span<const int32_t> got = forced.routed.Experts(i);
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()),
              std::vector<int32_t>(want.begin(), want.end()))
        << "record " << i;
  }
  // Layer 0's first prompt token: same input, so the router's weights are
  // the same numbers; they now weight the trace's experts.
  for (uint32_t j = 0; j < h.k; ++j) EXPECT_EQ(forced.weights[j], alone.weights[j]);
  EXPECT_NE(forced.logits, alone.logits);
  EXPECT_EQ(source.tokens_routed(), forced.routed.size());
  EXPECT_EQ(source.wraps(), 2u * h.n_layer);  // 9 tokens from 3 records a layer
}

TEST_F(TraceRoutingTest, ATraceOfAnotherShapeIsRefusedByName) {
  const Outcome alone = Generate(nullptr);
  const memory::RoutingTraceHeader h = alone.routed.header;
  const auto refused = [](memory::RoutingTrace t) {
    TraceRouting source(std::move(t), "other.trace");
    auto engine = Engine::Create(*files_, {.threads = 1, .routing_source = &source});
    EXPECT_FALSE(engine.ok());
    return engine.ok() ? std::string() : std::string(engine.status().message());
  };
  memory::RoutingTrace t = alone.routed;
  t.header.n_expert = h.n_expert * 2;
  EXPECT_EQ(refused(t), absl::StrCat("routing trace other.trace: ", h.n_expert * 2,
                                     " experts per layer, the model has ", h.n_expert,
                                     "; replay a trace of this model's shape (generate "
                                     "--record_trace, or a synthetic kind, which takes the "
                                     "model's shape)"));
  t = alone.routed;
  t.header.k = h.k - 1;
  t.experts.clear();
  EXPECT_NE(refused(t).find(absl::StrCat(h.k - 1, " experts per token, the model has ", h.k)),
            std::string::npos);
  t = alone.routed;
  t.header.n_layer = h.n_layer + 1;
  EXPECT_NE(refused(t).find(absl::StrCat(h.n_layer + 1, " layers, the model has ", h.n_layer)),
            std::string::npos);
  // Every layer but the last.
  memory::RoutingTrace partial;
  partial.header = h;
  for (size_t i = 0; i < alone.routed.size(); ++i) {
    if (alone.routed.layer[i] + 1 == h.n_layer) continue;
    partial.Add(alone.routed.token[i], alone.routed.layer[i], alone.routed.Experts(i));
  }
  EXPECT_EQ(refused(partial), absl::StrCat("routing trace other.trace: no record of layer ",
                                           h.n_layer - 1, ", which routes experts in this model"));
}

TEST_F(TraceRoutingTest, EachSequenceOfABatchReadsTheTraceOnItsOwn) {
  const Outcome alone = Generate(nullptr);
  const memory::RoutingTraceHeader h = alone.routed.header;
  // Record t of every layer: experts t, t+1, ..., t+k-1 (mod n_expert), so
  // a routed row names its record.
  const uint32_t n_records = h.n_expert;
  memory::RoutingTrace trace;
  trace.header = h;
  for (uint32_t t = 0; t < n_records; ++t) {
    for (uint32_t layer = 0; layer < h.n_layer; ++layer) {
      std::vector<int32_t> ids;
      for (uint32_t j = 0; j < h.k; ++j) ids.push_back(static_cast<int32_t>((t + j) % h.n_expert));
      trace.Add(t, layer, ids);
    }
  }
  TraceRouting source(trace, "batch");
  Collect seen;
  seen.trace.header = h;
  auto model = LoadCpuModel(*files_, {.threads = 1, .routing_observer = &seen,
                                      .routing_source = &source});
  ASSERT_TRUE(model.ok()) << model.status();
  auto a = (*model)->CreateState(16);
  auto b = (*model)->CreateState(16);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<int32_t> pa = {3, 9, 14}, pb = {2, 7}, da = {5}, db = {6};
  std::vector<float> logits;
  ASSERT_TRUE((*model)
                  ->ForwardBatch({{a->get(), 0, pa, LogitRows::kLast},
                                  {b->get(), 0, pb, LogitRows::kLast}},
                                 &logits)
                  .ok());
  ASSERT_TRUE((*model)
                  ->ForwardBatch({{a->get(), 3, da, LogitRows::kLast},
                                  {b->get(), 2, db, LogitRows::kLast}},
                                 &logits)
                  .ok());
  EXPECT_EQ(source.streams(), 2u);
  // Per layer, the rows are a's then b's: a from record 0 on, b from
  // 0.618 of the way through.
  const uint32_t b0 = static_cast<uint32_t>(0.6180339887498949 * n_records);
  const std::vector<uint32_t> want = {0, 1, 2, b0, b0 + 1, 3, b0 + 2};
  std::vector<size_t> row_of_layer(h.n_layer, 0);
  ASSERT_EQ(seen.trace.size(), want.size() * h.n_layer);
  for (size_t i = 0; i < seen.trace.size(); ++i) {
    const uint32_t layer = seen.trace.layer[i];
    const uint32_t record = want[row_of_layer[layer]++] % n_records;
    EXPECT_EQ(seen.trace.Experts(i)[0], static_cast<int32_t>(record)) << "record " << i;
    EXPECT_EQ(seen.trace.Experts(i)[h.k - 1], static_cast<int32_t>((record + h.k - 1) % h.n_expert));
  }
}

}  // namespace
}  // namespace sluice
