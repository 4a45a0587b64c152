#include "model/routing_trace_recorder.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "memory/routing_trace.h"
#include "model/engine.h"
#include "model/testing/mkmodel.h"

namespace sluice {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

// Keeps what the model routed, in order, and passes it on to the recorder:
// the file must hold exactly this.
class Tee : public RoutingObserver {
 public:
  explicit Tee(RoutingObserver* next) : next_(next) {}
  void OnRouting(int64_t layer, int64_t k,
                 absl::Span<const Routing> routes) override {
    for (const Routing& r : routes) {
      layers.push_back(static_cast<uint32_t>(layer));
      experts.insert(experts.end(), r.expert, r.expert + k);
    }
    next_->OnRouting(layer, k, routes);
  }
  std::vector<uint32_t> layers;
  std::vector<int32_t> experts;

 private:
  RoutingObserver* next_;
};

class RoutingTraceRecorderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    mkmodel::Options o;
    o.arch = mkmodel::Arch::kQwen35Moe;
    o.shape = *mkmodel::NamedShape(o.arch, "micro");
    o.seed = 5;
    const std::string path = TempPath("recorder_test.gguf");
    ASSERT_TRUE(mkmodel::WriteModel(o, path).ok());
    auto files = ModelFiles::Open(path);
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = files->release();
  }
  static void TearDownTestSuite() { delete files_; }
  static ModelFiles* files_;
};

ModelFiles* RoutingTraceRecorderTest::files_ = nullptr;

TEST_F(RoutingTraceRecorderTest, EngineRoutingLandsInTheTraceFile) {
  const std::string path = TempPath("engine.trace");
  auto rec = RoutingTraceRecorder::Create(path);
  Tee tee(rec.get());
  auto engine = Engine::Create(*files_, {.threads = 1,
                                         .context_length = 32,
                                         .routing_observer = &tee});
  ASSERT_TRUE(engine.ok()) << engine.status();
  const ModelInfo& info = (*engine)->info();
  ASSERT_TRUE(rec->Start(info).ok());
  auto session = (*engine)->NewSession();
  ASSERT_TRUE(session.ok());
  std::vector<float> logits;
  ASSERT_TRUE((*session)->Prefill({3, 9, 14, 2, 7}, &logits).ok());
  ASSERT_TRUE((*session)->Decode(11, &logits).ok());
  ASSERT_TRUE((*session)->Decode(12, &logits).ok());
  ASSERT_TRUE(rec->Close().ok());
  EXPECT_EQ(rec->dropped(), 0u);

  auto trace = memory::ReadRoutingTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->header.n_layer, info.n_layer);
  EXPECT_EQ(trace->header.n_expert, info.n_expert);
  EXPECT_EQ(trace->header.k, info.n_expert_used);
  // 7 tokens through every layer.
  ASSERT_EQ(trace->size(), static_cast<size_t>(7 * info.n_layer));
  EXPECT_EQ(rec->records(), trace->size());
  EXPECT_EQ(trace->layer, tee.layers);
  EXPECT_EQ(trace->experts, tee.experts);
  // Prefill is layer-major (layer 0's 5 tokens first), decode token-major;
  // token indices count per layer.
  EXPECT_EQ(trace->layer[4], 0u);
  EXPECT_EQ(trace->token[4], 4u);
  EXPECT_EQ(trace->layer[5], 1u);
  EXPECT_EQ(trace->token[5], 0u);
  const size_t decode0 = 5 * info.n_layer;
  EXPECT_EQ(trace->layer[decode0], 0u);
  EXPECT_EQ(trace->token[decode0], 5u);
  EXPECT_EQ(trace->layer[decode0 + 1], 1u);
  EXPECT_EQ(trace->token[decode0 + 1], 5u);
  EXPECT_EQ(trace->token.back(), 6u);
}

TEST_F(RoutingTraceRecorderTest, RoutingBeforeStartIsDroppedAndCounted) {
  auto rec = RoutingTraceRecorder::Create(TempPath("early.trace"));
  Routing r{};
  r.expert[0] = 1;
  rec->OnRouting(0, 1, {r, r});
  EXPECT_EQ(rec->dropped(), 2u);
  EXPECT_EQ(rec->records(), 0u);
  ModelInfo info;
  info.n_layer = 2;
  info.n_expert = 4;
  info.n_expert_used = 1;
  ASSERT_TRUE(rec->Start(info).ok());
  EXPECT_EQ(rec->Start(info).code(), absl::StatusCode::kFailedPrecondition);
  rec->OnRouting(1, 1, {r});
  ASSERT_TRUE(rec->Close().ok());
  auto trace = memory::ReadRoutingTrace(TempPath("early.trace"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->size(), 1u);
  EXPECT_EQ(trace->layer[0], 1u);
  EXPECT_EQ(trace->Experts(0)[0], 1);
}

TEST_F(RoutingTraceRecorderTest, MismatchedRoutingIsReportedByClose) {
  const std::string path = TempPath("bad.trace");
  auto rec = RoutingTraceRecorder::Create(path);
  ModelInfo info;
  info.n_layer = 2;
  info.n_expert = 4;
  info.n_expert_used = 2;
  ASSERT_TRUE(rec->Start(info).ok());
  Routing r{};
  r.expert[0] = 0;
  r.expert[1] = 5;  // out of range
  rec->OnRouting(0, 2, {r});
  r.expert[1] = 1;
  rec->OnRouting(0, 2, {r});  // after the first error: dropped
  absl::Status s = rec->Close();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("expert 5 out of range"), std::string::npos) << s;
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
  EXPECT_EQ(rec->dropped(), 1u);
}

}  // namespace
}  // namespace sluice
