// A BatchRunner step is one batched forward pass: each MoE layer routes the
// rows of every chunk of the step together, once, and the step reports the
// union of their experts as what it acquired (a random-weight qwen35moe
// model, hermetic). That the tokens equal each request alone is
// batch_runner_test.
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "model/engine.h"
#include "model/moe.h"
#include "model/testing/mkmodel.h"
#include "worker/batch/batch_runner.h"

namespace sluice::worker {
namespace {

// Per OnRouting call: the layer, its rows and their distinct experts.
class Routes : public RoutingObserver {
 public:
  struct Call {
    int64_t layer;
    size_t rows;
    std::set<int32_t> experts;
  };
  void OnRouting(int64_t layer, int64_t k, absl::Span<const Routing> routes) override {
    Call c{layer, routes.size(), {}};
    for (const Routing& r : routes) c.experts.insert(r.expert, r.expert + k);
    calls.push_back(c);
  }
  std::vector<Call> calls;
};

TEST(BatchRunnerStepTest, OneRoutingPerLayerPerStepOverAllItsRows) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/step.gguf");
  mkmodel::Options o;
  o.arch = mkmodel::Arch::kQwen35Moe;
  o.shape = *mkmodel::NamedShape(o.arch, "micro");
  ASSERT_TRUE(mkmodel::WriteModel(o, path).ok());
  auto files = ModelFiles::Open(path);
  ASSERT_TRUE(files.ok()) << files.status();
  Routes routes;
  auto engine = Engine::Create(
      **files, {.threads = 1, .context_length = 64, .routing_observer = &routes});
  ASSERT_TRUE(engine.ok()) << engine.status();
  const int64_t n_layer = (*engine)->info().n_layer;

  sched::SchedulerOptions so;
  so.max_sequences = 3;
  so.token_budget = 8;
  so.context_per_sequence = 64;
  so.block_tokens = 4;
  so.kv_blocks = 48;
  auto runner = BatchRunner::Create(**engine, so);
  ASSERT_TRUE(runner.ok()) << runner.status();
  for (sched::SeqId id = 1; id <= 3; ++id) {
    std::vector<int32_t> prompt(static_cast<size_t>(3 * id), static_cast<int32_t>(10 * id));
    ASSERT_TRUE((*runner)->Add({id, prompt, {}, 6}).ok());
  }
  int multi_chunk_steps = 0;
  for (int step = 0; !(*runner)->idle(); ++step) {
    ASSERT_LT(step, 100);
    routes.calls.clear();
    auto r = (*runner)->Step(absl::FromUnixSeconds(0), [](sched::SeqId, int32_t) { return false; });
    ASSERT_TRUE(r.ok()) << r.status();
    if (r->plan.empty()) continue;
    multi_chunk_steps += r->plan.batch_size() > 1;
    // One pass: every layer routed once, over the rows of all chunks.
    ASSERT_EQ(routes.calls.size(), static_cast<size_t>(n_layer)) << "step " << step;
    ASSERT_EQ(r->forward.experts_per_layer.size(), static_cast<size_t>(n_layer));
    for (const Routes::Call& c : routes.calls) {
      EXPECT_EQ(c.rows, static_cast<size_t>(r->plan.tokens())) << "step " << step;
      EXPECT_EQ(r->forward.experts_per_layer[c.layer], static_cast<int32_t>(c.experts.size()))
          << "step " << step << " layer " << c.layer;
    }
  }
  EXPECT_GT(multi_chunk_steps, 3);
}

}  // namespace
}  // namespace sluice::worker
