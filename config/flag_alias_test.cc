#include "config/flag_alias.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, alias_test_new, 4096, "the new name");
ABSL_FLAG(int, alias_test_old, 4096, "the old name");

namespace sluice::config {
namespace {

struct Logged {
  std::vector<std::string> lines;
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& line) { lines.push_back(line); };
  }
};

TEST(FlagAliasTest, TheNewNameWinsSilentlyWhenTheOldIsNotGiven) {
  absl::FlagSaver saver;
  Logged log;
  absl::SetFlag(&FLAGS_alias_test_new, 8192);
  EXPECT_EQ(*ResolveRenamedFlag(FLAGS_alias_test_new, FLAGS_alias_test_old, log.Sink()), 8192);
  EXPECT_TRUE(log.lines.empty());
}

TEST(FlagAliasTest, TheOldNameWorksAndLogsOneDeprecationLine) {
  absl::FlagSaver saver;
  Logged log;
  absl::SetFlag(&FLAGS_alias_test_old, 512);
  EXPECT_EQ(*ResolveRenamedFlag(FLAGS_alias_test_new, FLAGS_alias_test_old, log.Sink()), 512);
  EXPECT_EQ(log.lines, std::vector<std::string>{
                           "--alias_test_old is deprecated; use --alias_test_new (same meaning)"});
}

TEST(FlagAliasTest, BothNamesWithDifferentValuesAreRefused) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_alias_test_old, 512);
  absl::SetFlag(&FLAGS_alias_test_new, 1024);
  EXPECT_EQ(ResolveRenamedFlag(FLAGS_alias_test_new, FLAGS_alias_test_old, nullptr)
                .status()
                .message(),
            "--alias_test_new=1024 and --alias_test_old=512: --alias_test_old is the old name "
            "of --alias_test_new; give one of them");
}

}  // namespace
}  // namespace sluice::config
