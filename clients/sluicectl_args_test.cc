#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "clients/plan.h"
#include "clients/sluicectl.h"
#include "clients/sluicectl_flags.h"
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

// The values are Abseil's flags: SetFlags starts from every default, parses
// with the flag's type and names the flag and the text when the type refuses.
TEST(SetFlagsTest, ParsesIntoAbseilFlagsFromTheDefaults) {
  ASSERT_TRUE(SetFlags({{"max_tokens", "5"}, {"temperature", "0.5"}, {"json", "true"},
                        {"disk_bytes_per_s", "1e9"}, {"help", "true"}, {"context", "9"}})
                  .ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_max_tokens), 5u);
  EXPECT_EQ(absl::GetFlag(FLAGS_temperature), 0.5f);
  EXPECT_TRUE(absl::GetFlag(FLAGS_json));
  EXPECT_EQ(absl::GetFlag(FLAGS_disk_bytes_per_s)->value, 1e9);
  ASSERT_TRUE(SetFlags({{"seed", "7"}}).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_max_tokens), 0u);
  EXPECT_EQ(absl::GetFlag(FLAGS_temperature), std::nullopt);
  EXPECT_FALSE(absl::GetFlag(FLAGS_json));
  EXPECT_EQ(absl::GetFlag(FLAGS_disk_bytes_per_s).has_value(), false);
  EXPECT_EQ(absl::GetFlag(FLAGS_seed), 7u);
  EXPECT_EQ(absl::GetFlag(FLAGS_addr), "127.0.0.1:50051");
}

TEST(SetFlagsTest, RefusedTextsNameTheFlag) {
  for (const auto& [name, text, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"max_tokens", "x", "--max_tokens='x' is not a number"},
           {"threads", "-1", "--threads='-1' is not a number"},
           {"timeout", "soon", "--timeout='soon' is not a number"},
           {"json", "maybe", "--json='maybe': expected true or false"},
           {"hbm_bytes_per_s", "0",
            "--hbm_bytes_per_s='0': expected bytes per second > 0, such as 1.5e9"}}) {
    const absl::Status s = SetFlags({{name, text}});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(s.message(), message);
  }
}

// Abseil's rules are not sluicectl's: a bare --stats before the prompt, -5 as
// a positional, --help, and flags the process defines that sluicectl does not
// take (sluiced's --expert_policy, Abseil's --helpfull) are unknown.
TEST(RunTest, SluicectlsOwnArgvRules) {
  auto a = ParseArgs({"generate", "--stats", "Hi", "-5"}, FlagNames(), BareFlagNames());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->flags.at("stats"), "true");
  EXPECT_EQ(a->positional, (std::vector<std::string>{"Hi", "-5"}));
  for (const auto& [flag, name] : std::vector<std::pair<std::string, std::string>>{
           {"--expert_policy=lfu", "--expert_policy"}, {"--helpfull", "--helpfull"}}) {
    std::ostringstream out, err;
    EXPECT_EQ(ctl::Run({"plan", "m.gguf", flag}, out, err), 2);
    EXPECT_EQ(err.str().rfind("sluicectl: unknown flag " + name + "\nusage: sluicectl", 0), 0u)
        << err.str();
  }
  std::ostringstream out, err;
  EXPECT_EQ(ctl::Run({"generate", "--help"}, out, err), 0);
  EXPECT_NE(out.str().find("usage: sluicectl"), std::string::npos);
}

// A bad value is a usage error (exit 2) naming the flag, after the command's
// name is known; one call's flags never reach the next.
TEST(RunTest, BadValuesExitTwoAndFlagsDoNotLeak) {
  std::ostringstream out, err;
  EXPECT_EQ(ctl::Run({"--addr=127.0.0.1:1", "--timeout=soon", "health"}, out, err), 2);
  EXPECT_EQ(err.str(), "sluicectl: --timeout='soon' is not a number\n");
  std::ostringstream out2, err2;
  EXPECT_EQ(ctl::Run({"frobnicate", "--max_tokens=x"}, out2, err2), 2);
  EXPECT_EQ(err2.str().rfind("sluicectl: unknown command 'frobnicate'\n", 0), 0u) << err2.str();
  std::ostringstream out3, err3;
  EXPECT_EQ(ctl::Run({"plan", "/nonexistent/m.gguf", "--expert_arena_fraction=0.5"}, out3, err3),
            1);
  std::ostringstream out4, err4;
  EXPECT_EQ(ctl::Run({"plan", "/nonexistent/m.gguf", "--expert_slots=3"}, out4, err4), 1)
      << err4.str();
  EXPECT_NE(err4.str().find("/nonexistent/m.gguf"), std::string::npos) << err4.str();
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
