// sluiced and the tools parse the settings they share with one set of flag
// definitions (config/expert_flags.h; config/device_flag.h: --backend and
// --device); this feeds both parsers the same values, as command-line text,
// and checks that they agree on every field, and on the error when a value
// is refused. Linking both parsers into one binary is itself the check that
// no shared flag is defined twice (Abseil refuses a second definition at
// start-up).
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/reflection.h"
#include "config/expert_config.h"
#include "daemon/sluiced_flags.h"
#include "gtest/gtest.h"
#include "tools/engine_flags.h"

namespace sluice {
namespace {

using Flags = std::vector<std::pair<std::string, std::string>>;

void Set(const Flags& flags) {
  for (const auto& [name, value] : flags) {
    std::string error;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    ASSERT_NE(flag, nullptr) << name;
    ASSERT_TRUE(flag->ParseFrom(value, &error)) << name << ": " << error;
  }
}

struct Parsed {
  absl::StatusOr<daemon::Config> sluiced;
  absl::StatusOr<tools::EngineFlags> tools;
};

Parsed ParseBoth(const Flags& flags) {
  Set(flags);
  return {daemon::ConfigFromFlags(nullptr), tools::EngineFlagsFromFlags(nullptr)};
}

TEST(FlagsAgreeTest, EveryExpertFieldMeansTheSameToSluicedAndTheTools) {
  const std::vector<Flags> cases = {
      {},  // the defaults: the planner chooses
      {{"expert_slots", "-1"}},
      {{"expert_slots", "0"}},
      {{"expert_slots", "4096"}, {"expert_policy", "lfu"}},
      {{"expert_arena_fraction", "0.25"}, {"host_tier_bytes", "64G"}},
      {{"host_tier_bytes", "536870912"}, {"expert_prefetch", "true"}},
      {{"expert_arena_fraction", "1"}, {"expert_miss_policy", "cost"},
       {"expert_host_threads", "12"}},
      {{"expert_slots", "7"}, {"expert_miss_policy", "host"}, {"host_tier_bytes", "8GiB"},
       {"device", "3"}},
      {{"backend", "cuda"}, {"device", "1"}},
  };
  for (const Flags& flags : cases) {
    absl::FlagSaver saver;
    Parsed p = ParseBoth(flags);
    ASSERT_TRUE(p.sluiced.ok()) << p.sluiced.status();
    ASSERT_TRUE(p.tools.ok()) << p.tools.status();
    EXPECT_EQ(p.sluiced->experts, p.tools->experts)
        << "sluiced: " << config::ExpertConfigString(p.sluiced->experts)
        << "\ntools:   " << config::ExpertConfigString(p.tools->experts);
    EXPECT_EQ(p.sluiced->device, p.tools->device);
    EXPECT_EQ(p.sluiced->worker_kind == daemon::WorkerKindConfig::kCuda,
              p.tools->backend == Backend::kCuda);
  }
}

TEST(FlagsAgreeTest, TheDefaultsAreExpertConfigsAndSizesTakeSuffixesInBoth) {
  absl::FlagSaver saver;
  Parsed d = ParseBoth({});
  ASSERT_TRUE(d.sluiced.ok() && d.tools.ok());
  EXPECT_EQ(d.sluiced->experts, config::ExpertConfig{});
  EXPECT_EQ(d.tools->experts.slots, config::kPlannerChoosesSlots);
  Parsed g = ParseBoth({{"host_tier_bytes", "64G"}});
  ASSERT_TRUE(g.sluiced.ok() && g.tools.ok());
  EXPECT_EQ(g.sluiced->experts.host_tier_bytes, 64ull << 30);
  EXPECT_EQ(g.tools->experts.host_tier_bytes, 64ull << 30);
}

TEST(FlagsAgreeTest, BothRefuseABadValueWithTheSameMessage) {
  const std::vector<Flags> cases = {
      {{"expert_slots", "-2"}},
      {{"expert_slots", "16"}, {"expert_arena_fraction", "0.25"}},
      {{"expert_arena_fraction", "1.5"}},
      {{"expert_policy", "fifo"}},
      {{"expert_miss_policy", "cpu"}},
      {{"expert_host_threads", "-1"}},
      {{"host_tier_bytes", "lots"}},
      {{"device", "256"}},
      {{"backend", "tpu"}},
  };
  for (const Flags& flags : cases) {
    absl::FlagSaver saver;
    Parsed p = ParseBoth(flags);
    ASSERT_FALSE(p.sluiced.ok()) << flags[0].first;
    ASSERT_FALSE(p.tools.ok()) << flags[0].first;
    EXPECT_EQ(p.sluiced.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(p.sluiced.status().message(), p.tools.status().message());
    EXPECT_NE(p.sluiced.status().message().find("--" + flags[0].first), std::string::npos)
        << p.sluiced.status();
  }
}

}  // namespace
}  // namespace sluice
