#include "model/expert_profile_recorder.h"

#include <sys/stat.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "memory/expert_profile.h"
#include "model/engine.h"
#include "model/testing/mkmodel.h"

namespace sluice {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

// Each pass's distinct experts per layer, and passes the routing on.
class Tee : public RoutingObserver {
 public:
  explicit Tee(RoutingObserver* next, int64_t n_layer, int64_t n_expert)
      : next_(next), counts(n_layer, std::vector<uint64_t>(n_expert, 0)) {}
  void OnRouting(int64_t layer, int64_t k, absl::Span<const Routing> routes) override {
    std::set<int32_t> used;
    for (const Routing& r : routes) used.insert(r.expert, r.expert + k);
    for (int32_t e : used) ++counts[layer][e];
    next_->OnRouting(layer, k, routes);
  }
  RoutingObserver* next_;
  std::vector<std::vector<uint64_t>> counts;
};

TEST(ExpertProfileRecorderTest, CountsEachPassesExpertsOnceAndSavesWhatItCounted) {
  mkmodel::Options o;
  o.arch = mkmodel::Arch::kQwen35Moe;
  o.shape = *mkmodel::NamedShape(o.arch, "micro");
  const std::string model = TempPath("profile_recorder.gguf");
  ASSERT_TRUE(mkmodel::WriteModel(o, model).ok());
  auto files = ModelFiles::Open(model);
  ASSERT_TRUE(files.ok()) << files.status();
  const int n_layer = o.shape.n_layer, n_expert = o.shape.n_expert;
  auto start = memory::ExpertProfile::Create(n_layer, n_expert);
  ASSERT_TRUE(start.ok());
  // A loaded profile's counts are kept and added to.
  ASSERT_TRUE(start->Record(1, {3}).ok());
  ExpertProfileRecorder recorder(*start);
  Tee tee(&recorder, n_layer, n_expert);
  tee.counts[1][3] = 1;
  auto engine = Engine::Create(**files, {.threads = 1, .context_length = 32,
                                         .routing_observer = &tee});
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto session = (*engine)->NewSession();
  ASSERT_TRUE(session.ok());
  std::vector<float> logits;
  ASSERT_TRUE((*session)->Prefill({3, 9, 14, 2, 7}, &logits).ok());
  ASSERT_TRUE((*session)->Decode(11, &logits).ok());
  ASSERT_TRUE((*session)->Decode(12, &logits).ok());

  const memory::ExpertProfile got = recorder.Snapshot();
  uint64_t total = 0;
  for (int l = 0; l < n_layer; ++l) {
    for (int e = 0; e < n_expert; ++e) {
      EXPECT_EQ(got.count({l, e}), tee.counts[l][e]) << "layer " << l << " expert " << e;
      total += got.count({l, e});
    }
  }
  // Two decode tokens of k experts each per layer, and the prompt's pass
  // at least k and at most every expert.
  const uint64_t k = o.shape.n_expert_used;
  EXPECT_GE(total, 1 + n_layer * (2 * k + k));
  EXPECT_LE(total, 1 + n_layer * (2 * k + n_expert));
  EXPECT_EQ(recorder.unsaved(), total - 1);
  EXPECT_EQ(recorder.dropped(), 0u);

  const std::string path = TempPath("recorded.profile");
  ASSERT_TRUE(recorder.Save(path).ok());
  EXPECT_EQ(recorder.unsaved(), 0u);
  struct stat st;
  EXPECT_NE(stat((path + ".tmp").c_str(), &st), 0) << "the temporary file was left behind";
  auto back = memory::ExpertProfile::Load(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Serialize(), got.Serialize());

  const std::string nowhere = TempPath("no-such-dir/x.profile");
  const absl::Status s = recorder.Save(nowhere);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), absl::StrCat(nowhere, ": cannot save the expert profile (open ", nowhere,
                                      ".tmp: No such file or directory)"));
}

TEST(ExpertProfileRecorderTest, RoutingOutsideTheProfilesShapeIsDroppedAndCounted) {
  auto start = memory::ExpertProfile::Create(2, 4);
  ASSERT_TRUE(start.ok());
  ExpertProfileRecorder recorder(*start);
  Routing r{};
  r.expert[0] = 1;
  r.expert[1] = 6;  // no expert 6 in a profile of 4
  recorder.OnRouting(0, 2, {r});
  recorder.OnRouting(5, 1, {r});  // no layer 5
  EXPECT_EQ(recorder.dropped(), 3u);
  EXPECT_EQ(recorder.unsaved(), 0u);
  EXPECT_EQ(recorder.Snapshot().count({0, 1}), 0u);
}

}  // namespace
}  // namespace sluice
