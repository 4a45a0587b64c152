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

}  // namespace
}  // namespace sluice::testing
