// End-to-end: --expert_profile on a CPU worker (issue 22). The worker
// counts each pass's experts, saves the profile atomically while serving
// and at shutdown, and a restarted daemon reads it back and goes on
// counting from it; a file of another model is ignored (cold start, then
// overwritten), never a failed load.
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "memory/expert_profile.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

uint64_t Uses(const memory::ExpertProfile& p) {
  uint64_t n = 0;
  for (const memory::ExpertKey& k : p.Ranked()) n += p.count(k);
  return n;
}

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(E2eProfileTest, CountedSavedAndReadBackAcrossARestart) {
  const std::string dir = MakeTempDir("e2e-profile");
  auto model = WriteMicroModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string path = dir + "/experts.profile";
  // A profile of another shape: ignored, then overwritten.
  auto other = memory::ExpertProfile::Create(3, 5);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(other->Record(0, {1}).ok());
  ASSERT_TRUE(other->Save(path).ok());

  DaemonOptions options;
  options.model_path = *model;
  options.flags = {"--expert_profile=" + path};
  uint64_t first_uses = 0;
  {
    auto d = Daemon::Start(options);
    ASSERT_TRUE(d.ok()) << d.status();
    Generation g = RunGenerate((*d)->stub(), GreedyRequest("Hello", 4));
    ASSERT_TRUE(g.status.ok()) << g.status.error_message();
    ASSERT_EQ((*d)->Stop(), 0) << (*d)->Log();
    const std::string log = (*d)->Log();
    EXPECT_TRUE(Contains(log, absl::StrCat("expert profile ", path,
                                           " ignored, starting cold: it counts 3 layers x 5 "
                                           "experts, the model has ")))
        << log;
    auto saved = memory::ExpertProfile::Load(path);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_NE(saved->n_layer(), 3);
    // Every pass looks up at least k experts in every layer: the prompt's
    // pass and three decode passes.
    first_uses = Uses(*saved);
    EXPECT_GE(first_uses, 4u * saved->n_layer() * 2);
  }
  {
    auto d = Daemon::Start(options);
    ASSERT_TRUE(d.ok()) << d.status();
    Generation g = RunGenerate((*d)->stub(), GreedyRequest("Hello", 4));
    ASSERT_TRUE(g.status.ok()) << g.status.error_message();
    ASSERT_EQ((*d)->Stop(), 0) << (*d)->Log();
    const std::string log = (*d)->Log();
    EXPECT_TRUE(Contains(log, absl::StrCat(" uses")) && Contains(log, "expert profile " + path + ": "))
        << log;
    auto saved = memory::ExpertProfile::Load(path);
    ASSERT_TRUE(saved.ok()) << saved.status();
    // The same request again: the counts doubled.
    EXPECT_EQ(Uses(*saved), 2 * first_uses);
  }
}

TEST(E2eProfileTest, AProfileWithoutADirectoryIsRefusedAtStart) {
  const std::string dir = MakeTempDir("e2e-profile-bad");
  DaemonOptions options;
  options.flags = {"--expert_profile=" + dir + "/missing/experts.profile"};
  auto d = Daemon::Start(options);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(Contains(std::string(d.status().message()),
                       "--expert_profile=" + dir + "/missing/experts.profile: no directory"))
      << d.status();
}

}  // namespace
}  // namespace sluice::testing
