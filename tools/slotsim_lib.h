// slotsim: replays a routing trace (memory/routing_trace.h) against the
// expert slot cache policy (memory/slot_cache.h) offline, so that policies
// and arena sizes are compared on the same routing without a GPU.
//
// Replay: every record (one token through one layer) is one step:
// BeginStep, Acquire(layer, experts); except that a run of consecutive
// records of one layer (a prefill micro-batch, recorded layer-major) is one
// step of the union of their experts, as the data path acquires it (only in
// traces of several layers: with one, decode would look the same). Every device miss (filled or forced)
// is served from host RAM or from disk:
//  - without a host tier (host_slots < 0), from host RAM: the experts fit
//    in RAM and the mapping is registered in place;
//  - with one, host RAM is a cache of host_slots expert slices (policy
//    host_policy) in front of the disk, and the two tiers are driven as
//    memory::ExpertTiers: inclusive (the data path today: a miss found in
//    the host tier moves from host, otherwise from disk and is then kept in
//    the host tier too) or exclusive (an expert in one tier at a time: the
//    device's victims are demoted into the host tier, a promoted expert
//    leaves it).
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
  std::string host_policy = "lru";  // "lru", "lfu" or "tinylfu"
  bool exclusive = false;           // the tiers (with a host tier)
  // "tinylfu" (either tier): the half-life of the counts in lookups (0:
  // kDefaultTinyLfuHalfLife) and the window's share (0: the default).
  double tinylfu_half_life = 0;
  double tinylfu_window = 0;
};

struct SimResult {
  SimConfig config;
  memory::SlotCacheCounters counters;  // of the device cache
  double tokens = 0;                   // records / n_layer
  double layer_min_hit_rate = 0;       // over layers that had lookups
  double layer_max_hit_rate = 0;
  // With a host tier: device misses found there, and lookups not read
  // from disk (device hits + host hits over lookups).
  double host_hit_rate = 0;
  double off_disk_rate = 0;
  uint64_t demoted = 0;  // exclusive: device victims copied down
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
//  "realistic[:zipf=S,reuse=R,spread=D]": routing with the structure
//    published for real MoE models: static popularity (Zipf, exponent S,
//    default 0.8, ranks shuffled per layer), temporal reuse (each of a
//    token's k picks repeats one of the previous token's experts of that
//    layer with probability R, default 0.45) and per-layer differences
//    (layer l's exponent is S x (1 - D/2 + D x l / (n_layer - 1)), D default
//    0.5: early layers flatter than late ones).
//  "mixed[:wave=W,every=N,...]": "realistic" decode (its knobs may follow)
//    interrupted every N tokens (default 64) by a prefill wave of W tokens
//    (default 512) of another request: uniform routing, recorded as a
//    prefill micro-batch is (layer 0's W records, then layer 1's, ...). The
//    tokens count the decode tokens; the waves come on top.
// InvalidArgument for an unknown kind or a bad shape (k > n_expert...).
absl::StatusOr<memory::RoutingTrace> MakeSyntheticTrace(
    std::string_view kind, memory::RoutingTraceHeader shape, int64_t tokens,
    uint64_t seed);

// Several requests decoding at once (issue 19's batch): `streams` as one
// trace whose step t holds every stream's token t, each layer's records
// together, so the replay acquires each layer's union of the streams'
// experts once, as a batched decode step does. Token t of stream s becomes
// token t x B + s; steps run to the shortest stream. Each stream must route
// every token through every layer once (a decode trace).
// InvalidArgument for no stream, headers that differ, or a token without
// exactly one record per layer.
absl::StatusOr<memory::RoutingTrace> InterleaveStreams(
    absl::Span<const memory::RoutingTrace> streams);

// `trace`'s tokens (in order of first appearance) cut into `n` consecutive
// streams of T / n tokens each (the rest dropped): a recorded trace as `n`
// requests. InvalidArgument for n < 1 or fewer than n tokens.
absl::StatusOr<std::vector<memory::RoutingTrace>> SplitStreams(
    const memory::RoutingTrace& trace, int n);

}  // namespace sluice::slotsim

#endif  // SLUICE_TOOLS_SLOTSIM_LIB_H_
