#include "config/expert_config.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "config/expert_config_proto.h"
#include "config/expert_flags.h"
#include "gtest/gtest.h"

namespace sluice::config {
namespace {

TEST(ExpertConfigTest, DefaultsAreValidAndLeaveThePlannerToChoose) {
  const ExpertConfig d;
  EXPECT_TRUE(ValidateExpertConfig(d).ok());
  EXPECT_EQ(ExpertConfigString(d),
            "slots=-1 arena_fraction=0 policy=lru host_tier_bytes=0 prefetch=false "
            "miss_policy=copy host_threads=0");
}

TEST(ExpertConfigTest, ValidationNamesTheFlag) {
  ExpertConfig c;
  c.slots = -2;
  EXPECT_EQ(ValidateExpertConfig(c).message(),
            "--expert_slots=-2: must be >= 0 (or -1: the fit planner chooses)");
  c.slots = 16;
  c.arena_fraction = 0.25;
  EXPECT_EQ(ValidateExpertConfig(c).message(),
            "--expert_slots=16 and --expert_arena_fraction=0.25: give one of them");
  c.slots = -1;
  c.arena_fraction = 1.5;
  EXPECT_EQ(ValidateExpertConfig(c).message(),
            "--expert_arena_fraction=1.5: must be in (0, 1] (0: the fit planner chooses)");
  c.arena_fraction = 0.25;
  c.host_threads = -1;
  EXPECT_EQ(ValidateExpertConfig(c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateExpertConfig(c).message(), "--expert_host_threads=-1: must be in 0..1024");
  c.host_threads = 16;
  EXPECT_TRUE(ValidateExpertConfig(c).ok());
  c.skip_threshold = 1;
  EXPECT_EQ(ValidateExpertConfig(c).message(), "--expert_skip=1: must be in [0, 1) (0: off)");
  c.skip_threshold = -0.1;
  EXPECT_EQ(ValidateExpertConfig(c).message(), "--expert_skip=-0.1: must be in [0, 1) (0: off)");
  c.skip_threshold = 0.05;
  EXPECT_TRUE(ValidateExpertConfig(c).ok());
  EXPECT_EQ(ExpertConfigString(c),
            "slots=-1 arena_fraction=0.25 policy=lru host_tier_bytes=0 prefetch=false "
            "miss_policy=copy host_threads=16 skip=0.05");
  c.host_tier_policy = "fifo";
  EXPECT_EQ(ValidateExpertConfig(c).message(),
            "--host_tier_policy='fifo': expected lru, lfu or tinylfu");
  c.host_tier_policy = "lru";
  c.tiers = TierMode::kInclusive;  // not the default: named
  EXPECT_TRUE(ValidateExpertConfig(c).ok());
  EXPECT_EQ(ExpertConfigString(c),
            "slots=-1 arena_fraction=0.25 policy=lru host_tier_bytes=0 prefetch=false "
            "miss_policy=copy host_threads=16 host_tier_policy=lru tiers=inclusive skip=0.05");
}

TEST(ExpertConfigTest, PolicyNamesRoundTrip) {
  for (const char* name : {"lru", "lfu", "tinylfu"}) {
    auto p = ParseEvictionPolicy(name);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(EvictionPolicyName(*p), name);
  }
  EXPECT_EQ(ParseEvictionPolicy("fifo").status().message(),
            "--expert_policy='fifo': expected lru, lfu or tinylfu");
  for (const char* name : {"copy", "host", "cost"}) {
    auto p = ParseMissPolicy(name);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(MissPolicyName(*p), name);
  }
  EXPECT_EQ(ParseMissPolicy("Host").status().message(),
            "unknown expert miss policy \"Host\" (copy, host or cost)");
  for (const char* name : {"inclusive", "exclusive"}) {
    auto t = ParseTierMode(name);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(TierModeName(*t), name);
  }
  EXPECT_EQ(ParseTierMode("both").status().message(),
            "--expert_tiers='both': expected inclusive or exclusive");
}

TEST(ExpertConfigProtoTest, RoundTripsEveryField) {
  ExpertConfig c;
  c.slots = 12;
  c.policy = EvictionPolicy::kLfu;
  c.host_tier_bytes = 64ull << 30;
  c.prefetch = true;  // not the default
  c.miss_policy = MissPolicy::kCost;
  c.host_threads = 7;
  c.profile = "/var/lib/sluice/experts.profile";
  c.skip_threshold = 0.125;
  c.host_tier_policy = "lfu";
  c.tiers = TierMode::kExclusive;
  worker::v1::WorkerConfig wire;
  ToWorkerConfig(c, &wire);
  EXPECT_EQ(wire.expert_tiers(), "exclusive");
  EXPECT_EQ(wire.host_tier_policy(), "lfu");
  EXPECT_EQ(wire.expert_skip(), 0.125);
  EXPECT_TRUE(wire.has_expert_slots());
  EXPECT_EQ(wire.expert_profile(), "/var/lib/sluice/experts.profile");
  EXPECT_EQ(wire.expert_miss_policy(), "cost");
  auto back = FromWorkerConfig(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c) << ExpertConfigString(*back);

  // -1 travels as an unset field (the planner chooses); a fraction with it.
  c.slots = -1;
  c.arena_fraction = 0.25;
  ToWorkerConfig(c, &wire);
  EXPECT_FALSE(wire.has_expert_slots());
  back = FromWorkerConfig(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c) << ExpertConfigString(*back);
}

TEST(ExpertConfigProtoTest, AnEmptyConfigIsTheDefaultsAndBadNamesNameTheField) {
  auto d = FromWorkerConfig(worker::v1::WorkerConfig());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, ExpertConfig{});
  worker::v1::WorkerConfig wire;
  wire.set_expert_miss_policy("fastest");
  EXPECT_EQ(FromWorkerConfig(wire).status().message(),
            "Hello.config.expert_miss_policy: unknown expert miss policy \"fastest\" "
            "(copy, host or cost)");
  wire.set_expert_miss_policy("");
  wire.set_expert_slots(-3);
  EXPECT_EQ(FromWorkerConfig(wire).status().code(), absl::StatusCode::kInvalidArgument);
  wire.clear_expert_slots();
  wire.set_expert_skip(2);
  EXPECT_EQ(FromWorkerConfig(wire).status().message(),
            "Hello.config.expert_*: --expert_skip=2: must be in [0, 1) (0: off)");
  wire.set_expert_skip(0);
  wire.set_expert_tiers("both");
  EXPECT_EQ(FromWorkerConfig(wire).status().message(),
            "Hello.config.expert_tiers: --expert_tiers='both': expected inclusive or exclusive");
  wire.set_expert_tiers("");
  wire.set_host_tier_policy("fifo");
  EXPECT_EQ(FromWorkerConfig(wire).status().message(),
            "Hello.config.expert_*: --host_tier_policy='fifo': expected lru, lfu or tinylfu");
}

// Sets flag `name` from text as the command line would.
void Set(const char* name, const char* value) {
  std::string error;
  ASSERT_TRUE(absl::FindCommandLineFlag(name)->ParseFrom(value, &error)) << name << ": " << error;
}

TEST(ExpertFlagsTest, DefaultsAreExpertConfigsAndSizesTakeSuffixes) {
  absl::FlagSaver saver;
  auto d = ExpertConfigFromFlags();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, ExpertConfig{}) << ExpertConfigString(*d);
  Set("host_tier_bytes", "64G");
  Set("expert_slots", "100");
  Set("expert_policy", "lfu");
  Set("expert_miss_policy", "host");
  auto c = ExpertConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->host_tier_bytes, 64ull << 30);
  EXPECT_EQ(c->slots, 100);
  EXPECT_EQ(c->policy, EvictionPolicy::kLfu);
  EXPECT_EQ(c->miss_policy, MissPolicy::kHost);
  EXPECT_EQ(c->skip_threshold, 0);
  Set("expert_skip", "0.1");
  Set("expert_tiers", "exclusive");
  Set("host_tier_policy", "lru");
  c = ExpertConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->skip_threshold, 0.1);
  EXPECT_EQ(c->tiers, TierMode::kExclusive);
  EXPECT_EQ(c->host_tier_policy, "lru");
}

TEST(ExpertFlagsTest, BadValuesNameTheFlag) {
  absl::FlagSaver saver;
  Set("expert_policy", "fifo");
  EXPECT_EQ(ExpertConfigFromFlags().status().message(),
            "--expert_policy='fifo': expected lru, lfu or tinylfu");
  Set("expert_policy", "lru");
  Set("expert_miss_policy", "Host");
  EXPECT_EQ(ExpertConfigFromFlags().status().message(),
            "--expert_miss_policy='Host': expected copy, host or cost");
  Set("expert_miss_policy", "copy");
  Set("host_tier_bytes", "lots");
  EXPECT_EQ(ExpertConfigFromFlags().status().message(),
            "--host_tier_bytes='lots': expected a byte count such as 536870912, 512M, 1.5G or 8G");
  Set("host_tier_bytes", "0");
  Set("expert_slots", "-2");
  EXPECT_EQ(ExpertConfigFromFlags().status().message(),
            "--expert_slots=-2: must be >= 0 (or -1: the fit planner chooses)");
  Set("expert_slots", "-1");
  Set("expert_skip", "1.5");
  EXPECT_EQ(ExpertConfigFromFlags().status().message(),
            "--expert_skip=1.5: must be in [0, 1) (0: off)");
  Set("expert_skip", "0");
  Set("expert_tiers", "Exclusive");
  EXPECT_EQ(ExpertConfigFromFlags().status().message(),
            "--expert_tiers='Exclusive': expected inclusive or exclusive");
}

}  // namespace
}  // namespace sluice::config
