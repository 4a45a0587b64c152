#include "tools/expert_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "memory/miss_split.h"

ABSL_FLAG(int64_t, expert_slots, -1,
          "CUDA: device slots for routed experts (-1: all resident unless "
          "--expert_arena_fraction; 0: none, every expert read in place)");
ABSL_FLAG(double, expert_arena_fraction, 0,
          "CUDA: slots as a fraction of all routed experts (with "
          "--expert_slots -1; 0: off)");
ABSL_FLAG(std::string, expert_policy, "lru", "slot eviction policy: lru or lfu");
ABSL_FLAG(uint64_t, host_tier_bytes, 0,
          "CUDA with streaming: a pinned host tier of this many bytes in "
          "front of O_DIRECT disk reads (0: register the mapping)");
ABSL_FLAG(bool, expert_prefetch, false,
          "CUDA with streaming: fetch each next layer's predicted experts "
          "during decode");
ABSL_FLAG(std::string, expert_miss_policy, "copy",
          "CUDA with streaming: where decode misses are computed: copy (into "
          "slots; bit-identical logits), host (all on the host CPU) or cost "
          "(split by measured rates)");
ABSL_FLAG(int, expert_host_threads, 0,
          "threads computing host misses (0: one per hardware thread)");

namespace sluice::tools {

absl::StatusOr<EngineOptions::Experts> ExpertOptionsFromFlags() {
  EngineOptions::Experts e;
  e.slots = absl::GetFlag(FLAGS_expert_slots);
  e.arena_fraction = absl::GetFlag(FLAGS_expert_arena_fraction);
  e.policy = absl::GetFlag(FLAGS_expert_policy);
  e.host_tier_bytes = absl::GetFlag(FLAGS_host_tier_bytes);
  e.prefetch = absl::GetFlag(FLAGS_expert_prefetch);
  e.miss_policy = absl::GetFlag(FLAGS_expert_miss_policy);
  e.host_threads = absl::GetFlag(FLAGS_expert_host_threads);
  if (e.slots < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--expert_slots=", e.slots, ": must be >= -1"));
  }
  if (!(e.arena_fraction >= 0 && e.arena_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expert_arena_fraction=", e.arena_fraction, ": must be in [0, 1]"));
  }
  if (e.policy != "lru" && e.policy != "lfu") {
    return absl::InvalidArgumentError(
        absl::StrCat("--expert_policy=", e.policy, ": must be lru or lfu"));
  }
  if (absl::Status s = memory::ParseMissPolicy(e.miss_policy).status(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--expert_miss_policy: ", s.message()));
  }
  if (e.host_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expert_host_threads=", e.host_threads, ": must be >= 0"));
  }
  return e;
}

}  // namespace sluice::tools
