#include "base/testing/goldens.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace sluice::testing {
namespace {

// Restores an environment variable when the test ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name); old != nullptr) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(GoldensDirTest, EnvNamingADirectoryWins) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  ScopedEnv env("SLUICE_GOLDENS", dir.c_str());
  EXPECT_EQ(GoldensDir(), dir);
}

TEST(GoldensDirTest, EnvNamingNoDirectoryFindsNothing) {
  // No fallback to ../shared/goldens: an explicit setting that is wrong must
  // not silently test against other data.
  ScopedEnv env("SLUICE_GOLDENS", "/nonexistent/goldens");
  EXPECT_EQ(GoldensDir(), std::nullopt);
}

TEST(GoldensDirTest, CiMeansExactlyTrue) {
  {
    ScopedEnv ci("CI", "true");
    EXPECT_TRUE(InCi());
  }
  {
    ScopedEnv ci("CI", "1");
    EXPECT_FALSE(InCi());
  }
  {
    ScopedEnv ci("CI", nullptr);
    EXPECT_FALSE(InCi());
  }
}

TEST(GoldensDeepseek2DirTest, EnvNamingADirectoryWins) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  ScopedEnv env("SLUICE_GOLDENS_DEEPSEEK2", dir.c_str());
  EXPECT_EQ(GoldensDeepseek2Dir(), dir);
  ScopedEnv wrong("SLUICE_GOLDENS_DEEPSEEK2", "/nonexistent/goldens-deepseek2");
  EXPECT_EQ(GoldensDeepseek2Dir(), std::nullopt);
}

// Unset, it is the goldens-deepseek2 directory beside SLUICE_GOLDENS.
TEST(GoldensDeepseek2DirTest, SitsBesideTheGoldens) {
  const std::string tmp = std::getenv("TEST_TMPDIR");
  ASSERT_EQ(system(("mkdir -p " + tmp + "/g/goldens " + tmp + "/g/goldens-deepseek2").c_str()),
            0);
  ScopedEnv unset("SLUICE_GOLDENS_DEEPSEEK2", nullptr);
  ScopedEnv goldens("SLUICE_GOLDENS", (tmp + "/g/goldens/").c_str());
  EXPECT_EQ(GoldensDeepseek2Dir(), tmp + "/g/goldens-deepseek2");
  ScopedEnv elsewhere("SLUICE_GOLDENS", tmp.c_str());
  EXPECT_EQ(GoldensDeepseek2Dir(), std::nullopt);
}

}  // namespace
}  // namespace sluice::testing
