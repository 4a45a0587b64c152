// slotsim: replays a routing trace (memory/routing_trace.h) against the
// expert slot cache policy (memory/slot_cache.h) offline, so that policies
// and arena sizes are compared on the same routing without a GPU.
//
// Replay: every record (one token through one layer) is one step:
// BeginStep, Acquire(layer, experts). Every device miss (filled or forced)
// is served from host RAM or from disk:
//  - without a host tier (host_slots < 0), from host RAM: the experts fit
//    in RAM and the mapping is registered in place;
//  - with one, host RAM is an LRU cache of host_slots expert slices in
//    front of the disk: a miss found there moves from host, otherwise from
//    disk (and is then kept in the host tier).
#ifndef SLUICE_TOOLS_SLOTSIM_LIB_H_
#define SLUICE_TOOLS_SLOTSIM_LIB_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/routing_trace.h"
#include "memory/slot_counters.h"

namespace sluice::slotsim {

struct SimConfig {
  std::string policy = "lru";  // "lru", "lfu" or "belady"
  int64_t slots = 0;           // device slots (0: every miss forced)
  int64_t host_slots = -1;     // host-tier slots; -1: no host tier
  uint64_t slice_bytes = 1;    // one expert's bytes (1: count slices)
  double lfu_half_life = 0;    // "lfu" only; 0: kDefaultLfuHalfLife
};

struct SimResult {
  SimConfig config;
  memory::SlotCacheCounters counters;  // of the device cache
  double tokens = 0;                   // records / n_layer
  double layer_min_hit_rate = 0;       // over layers that had lookups
  double layer_max_hit_rate = 0;
  double host_bytes_per_token() const;
  double disk_bytes_per_token() const;
};

// Replays `trace` once. Errors: InvalidArgument for an unknown policy,
// negative slots, or slice_bytes 0.
absl::StatusOr<SimResult> Simulate(const memory::RoutingTrace& trace,
                                   const SimConfig& config);

// ceil(fraction x n_layer x n_expert), at most all of them.
// InvalidArgument unless 0 <= fraction.
absl::StatusOr<int64_t> SlotsForFraction(const memory::RoutingTraceHeader& h,
                                         double fraction);

// One line per result, with a header line, columns aligned.
std::string FormatTable(const std::vector<SimResult>& results);
// A JSON array of one object per result (the benchmark harness reads it).
std::string FormatJson(const std::vector<SimResult>& results);

// Synthetic traces, `tokens` tokens through every layer (token-major, as
// decode routes), deterministic for a seed:
//  "uniform": k distinct experts drawn uniformly per token and layer;
//  "zipf:S": expert of popularity rank r drawn with weight 1 / r^S (ranks
//    shuffled per layer), k distinct per token and layer;
//  "cyclic": token t takes experts t*k .. t*k+k-1 (mod n_expert): every
//    expert is reused after n_expert / k tokens.
// InvalidArgument for an unknown kind or a bad shape (k > n_expert...).
absl::StatusOr<memory::RoutingTrace> MakeSyntheticTrace(
    std::string_view kind, memory::RoutingTraceHeader shape, int64_t tokens,
    uint64_t seed);

}  // namespace sluice::slotsim

#endif  // SLUICE_TOOLS_SLOTSIM_LIB_H_
