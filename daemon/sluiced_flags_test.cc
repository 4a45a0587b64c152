#include "daemon/sluiced_flags.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/flags/reflection.h"
#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

// Sets flags as the command line would, then reads sluiced's Config back
// with the log lines it wrote.
struct Parsed {
  absl::StatusOr<Config> config;
  std::vector<std::string> log;
};

Parsed Parse(const std::vector<std::pair<std::string, std::string>>& flags) {
  for (const auto& [name, value] : flags) {
    std::string error;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    EXPECT_NE(flag, nullptr) << name;
    if (flag != nullptr) {
      EXPECT_TRUE(flag->ParseFrom(value, &error)) << name << ": " << error;
    }
  }
  Parsed p;
  p.config = ConfigFromFlags([&p](const std::string& line) { p.log.push_back(line); });
  return p;
}

TEST(SluicedFlagsTest, BackendNamesTheWorkersBackendWithoutALogLine) {
  absl::FlagSaver saver;
  Parsed d = Parse({});
  ASSERT_TRUE(d.config.ok()) << d.config.status();
  EXPECT_EQ(d.config->worker_kind, WorkerKindConfig::kCpu);
  Parsed p = Parse({{"backend", "cuda"}, {"device", "2"}});
  ASSERT_TRUE(p.config.ok()) << p.config.status();
  EXPECT_EQ(p.config->worker_kind, WorkerKindConfig::kCuda);
  EXPECT_EQ(p.config->device, 2);
  EXPECT_TRUE(p.log.empty()) << p.log[0];
}

TEST(SluicedFlagsTest, TheOldWorkerKindStillWorksAndLogsOneDeprecationLine) {
  absl::FlagSaver saver;
  Parsed p = Parse({{"worker_kind", "cuda"}});
  ASSERT_TRUE(p.config.ok()) << p.config.status();
  EXPECT_EQ(p.config->worker_kind, WorkerKindConfig::kCuda);
  EXPECT_EQ(p.log, std::vector<std::string>{
                       "--worker_kind is deprecated; use --backend (same meaning)"});
}

TEST(SluicedFlagsTest, ABadBackendIsNamedByTheFlagItCameIn) {
  {
    absl::FlagSaver saver;
    EXPECT_EQ(Parse({{"backend", "tpu"}}).config.status().message(),
              "--backend='tpu': expected cpu or cuda");
  }
  {
    absl::FlagSaver saver;
    EXPECT_EQ(Parse({{"worker_kind", "tpu"}}).config.status().message(),
              "--worker_kind='tpu': expected cpu or cuda");
  }
  {
    absl::FlagSaver saver;
    EXPECT_EQ(Parse({{"backend", "cuda"}, {"worker_kind", "tpu"}}).config.status().message(),
              "--backend=cuda and --worker_kind=tpu: --worker_kind is the old name of "
              "--backend; give one of them");
  }
}

TEST(SluicedFlagsTest, TheHttpRequestTimeoutIsNoneAtZeroAndNeverNegative) {
  absl::FlagSaver saver;
  auto none = HttpRequestTimeoutFromFlags();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, absl::InfiniteDuration());
  Parse({{"http_request_timeout_s", "90"}});
  auto set = HttpRequestTimeoutFromFlags();
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(*set, absl::Seconds(90));
  Parse({{"http_request_timeout_s", "-1"}});
  EXPECT_EQ(HttpRequestTimeoutFromFlags().status().message(),
            "--http_request_timeout_s=-1: seconds must be 0 (no limit) or more");
}

}  // namespace
}  // namespace sluice::daemon
