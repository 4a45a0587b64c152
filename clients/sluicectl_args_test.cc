#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "clients/plan.h"
#include "clients/sluicectl.h"
#include "gtest/gtest.h"

namespace sluice::ctl {
namespace {

TEST(ParseArgsTest, FlagsAnywhere) {
  auto a = ParseArgs({"--addr=h:1", "generate", "hello", "--max_tokens", "5", "--json",
                      "world"},
                     {"addr", "max_tokens", "json"}, {"json"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, "generate");
  EXPECT_EQ(a->positional, (std::vector<std::string>{"hello", "world"}));
  EXPECT_EQ(a->flags.at("addr"), "h:1");
  EXPECT_EQ(a->flags.at("max_tokens"), "5");
  EXPECT_EQ(a->flags.at("json"), "true");
}

TEST(ParseArgsTest, DoubleDashEndsFlags) {
  auto a = ParseArgs({"tokenize", "--", "--not-a-flag"}, {}, {});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->positional, (std::vector<std::string>{"--not-a-flag"}));
}

TEST(ParseArgsTest, UnknownFlagAndMissingValue) {
  EXPECT_EQ(ParseArgs({"--bogus"}, {"addr"}, {}).status().message(), "unknown flag --bogus");
  EXPECT_EQ(ParseArgs({"--addr"}, {"addr"}, {}).status().message(), "flag --addr needs a value");
}

TEST(RunTest, UsageErrorsExitTwo) {
  std::ostringstream out, err;
  EXPECT_EQ(ctl::Run({}, out, err), 2);
  EXPECT_NE(err.str().find("usage: sluicectl"), std::string::npos);
  std::ostringstream out2, err2;
  EXPECT_EQ(ctl::Run({"frobnicate"}, out2, err2), 2);
  EXPECT_NE(err2.str().find("unknown command 'frobnicate'"), std::string::npos);
  std::ostringstream out3, err3;
  EXPECT_EQ(ctl::Run({"help"}, out3, err3), 0);
  EXPECT_NE(out3.str().find("generate PROMPT"), std::string::npos);
}

TEST(RunTest, UnreachableDaemonIsExitOne) {
  std::ostringstream out, err;
  EXPECT_EQ(ctl::Run({"--addr=127.0.0.1:1", "--timeout=2", "models"}, out, err), 1);
  EXPECT_NE(err.str().find("sluicectl: "), std::string::npos) << err.str();
}

TEST(PlanTest, ParseBytes) {
  EXPECT_EQ(*ParseBytes("x", "123"), 123u);
  EXPECT_EQ(*ParseBytes("x", "64K"), 65536u);
  EXPECT_EQ(*ParseBytes("x", "1.5G"), 3ull << 29);
  EXPECT_EQ(*ParseBytes("x", "2GiB"), 2ull << 30);
  EXPECT_EQ(ParseBytes("host_memory", "lots").status().message(),
            "--host_memory='lots': expected a byte count such as 536870912, 512M, 1.5G or 8G");
}

// Bad plan flags are usage errors (exit 2) that name the flag, before any
// file is opened; the ranges and messages are sluiced's (config/expert_config).
TEST(PlanTest, BadFlagsAreUsageErrors) {
  std::ostringstream out, err;
  EXPECT_EQ(
      ctl::Run({"plan", "m.gguf", "--expert_arena_fraction=0.5", "--expert_slots=3"}, out, err),
      2);
  EXPECT_EQ(err.str(),
            "sluicectl: plan: --expert_slots=3 and --expert_arena_fraction=0.5: give one of "
            "them\n");
  std::ostringstream out2, err2;
  EXPECT_EQ(ctl::Run({"plan", "m.gguf", "--expert_arena_fraction=1.5"}, out2, err2), 2);
  EXPECT_EQ(err2.str(),
            "sluicectl: plan: --expert_arena_fraction=1.5: must be in (0, 1] (0: the fit planner "
            "chooses)\n");
  std::ostringstream out3, err3;
  EXPECT_EQ(ctl::Run({"plan", "/nonexistent/m.gguf", "--host_memory=8G"}, out3, err3), 1);
  EXPECT_NE(err3.str().find("/nonexistent/m.gguf"), std::string::npos) << err3.str();
}

// plan's flags carry sluiced's names; the old ones still work, with a
// deprecation line, and disagreeing with the new name is a usage error.
TEST(PlanTest, OldFlagNamesAreAliases) {
  std::ostringstream out, err;
  EXPECT_EQ(ctl::Run({"plan", "m.gguf", "--arena_fraction=1.5", "--context=64"}, out, err), 2);
  EXPECT_EQ(err.str(),
            "sluicectl: --context is deprecated; use --context_length (same meaning)\n"
            "sluicectl: --arena_fraction is deprecated; use --expert_arena_fraction (same "
            "meaning)\n"
            "sluicectl: plan: --expert_arena_fraction=1.5: must be in (0, 1] (0: the fit "
            "planner chooses)\n");
  std::ostringstream out2, err2;
  EXPECT_EQ(ctl::Run({"plan", "m.gguf", "--context_length=64", "--context=128"}, out2, err2), 2);
  EXPECT_EQ(err2.str(),
            "sluicectl: plan: --context_length=64 and --context=128: --context is the old name "
            "of --context_length; give one of them\n");
}

// The rates of the cold-start and decode estimates are bytes per second
// > 0; anything else is a usage error naming the flag, as is a tier mode
// other than sluiced's. --disk_bandwidth is the old name of
// --disk_bytes_per_s.
TEST(PlanTest, BadRatesAreUsageErrors) {
  for (const auto& [flag, message] : std::vector<std::pair<std::string, std::string>>{
           {"--disk_bytes_per_s=fast",
            "--disk_bytes_per_s='fast': expected bytes per second > 0, such as 1.5e9"},
           {"--pcie_bytes_per_s=0",
            "--pcie_bytes_per_s='0': expected bytes per second > 0, such as 1.5e9"},
           {"--hbm_bytes_per_s=-4e12",
            "--hbm_bytes_per_s='-4e12': expected bytes per second > 0, such as 1.5e9"},
           {"--hbm_bytes_per_s=inf",
            "--hbm_bytes_per_s='inf': expected bytes per second > 0, such as 1.5e9"}}) {
    std::ostringstream out, err;
    EXPECT_EQ(ctl::Run({"plan", "m.gguf", flag}, out, err), 2) << flag;
    EXPECT_EQ(err.str(), "sluicectl: plan: " + message + "\n");
  }
  std::ostringstream tiers_out, tiers_err;
  EXPECT_EQ(ctl::Run({"plan", "m.gguf", "--expert_tiers=both"}, tiers_out, tiers_err), 2);
  EXPECT_EQ(tiers_err.str(),
            "sluicectl: plan: --expert_tiers='both': expected inclusive or exclusive\n");
  std::ostringstream out, err;
  EXPECT_EQ(ctl::Run({"plan", "m.gguf", "--disk_bandwidth=1.5G"}, out, err), 2);
  EXPECT_EQ(err.str(),
            "sluicectl: --disk_bandwidth is deprecated; use --disk_bytes_per_s (same meaning)\n"
            "sluicectl: plan: --disk_bytes_per_s='1.5G': expected bytes per second > 0, such as "
            "1.5e9\n");
}

}  // namespace
}  // namespace sluice::ctl
