#include "tools/slotsim_lib.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "memory/expert_tiers.h"
#include "memory/slot_cache.h"

namespace sluice::slotsim {
namespace {

using memory::ExpertKey;
using memory::RoutingTrace;
using memory::SlotAssignment;
using memory::SlotCache;
using memory::Tier;

// Calls `step(layer, experts)` once per step of the replay: a record, or
// a run of consecutive records of one layer (a prefill micro-batch, which
// the data path acquires as one union of experts per layer) when the trace
// has several layers (with one, decode looks the same and is not merged).
template <typename Step>
absl::Status ForEachStep(const RoutingTrace& trace, Step step) {
  std::vector<int32_t> merged;
  for (size_t i = 0; i < trace.size();) {
    size_t j = i + 1;
    if (trace.header.n_layer > 1) {
      while (j < trace.size() && trace.layer[j] == trace.layer[i]) ++j;
    }
    const int32_t layer = static_cast<int32_t>(trace.layer[i]);
    if (j == i + 1) {
      RETURN_IF_ERROR(step(layer, trace.Experts(i)));
    } else {
      merged.clear();
      for (size_t r = i; r < j; ++r) {
        for (int32_t e : trace.Experts(r)) {
          if (std::find(merged.begin(), merged.end(), e) == merged.end()) {
            merged.push_back(e);
          }
        }
      }
      RETURN_IF_ERROR(step(layer, merged));
    }
    i = j;
  }
  return absl::OkStatus();
}

// `frequency`: the tiers' shared counts, or null (no host tier).
absl::StatusOr<std::unique_ptr<memory::EvictionPolicy>> OnlinePolicy(
    const std::string& name, const SimConfig& c,
    std::shared_ptr<memory::KeyFrequency> frequency) {
  if (name == "lfu" && c.lfu_half_life > 0) {
    return memory::MakeDecayedLfuPolicy(c.lfu_half_life);
  }
  if (name == "tinylfu") {
    return memory::MakeTinyLfuPolicy({.half_life = c.tinylfu_half_life,
                                      .window_fraction = c.tinylfu_window,
                                      .frequency = std::move(frequency)});
  }
  auto p = memory::MakePolicy(name);
  if (!p.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown policy \"", name, "\"; valid: lru, lfu, tinylfu, belady"));
  }
  return p;
}

absl::StatusOr<std::unique_ptr<memory::EvictionPolicy>> PolicyFor(
    const SimConfig& c, const RoutingTrace& trace,
    std::shared_ptr<memory::KeyFrequency> frequency) {
  if (c.policy == "belady") {
    // The access numbers the cache gives are the replay's lookups, step by
    // step (a prefill micro-batch's union once).
    std::vector<ExpertKey> future;
    future.reserve(trace.experts.size());
    ForEachStep(trace, [&](int32_t layer, absl::Span<const int32_t> experts) {
      for (int32_t e : experts) future.push_back({layer, e});
      return absl::OkStatus();
    }).IgnoreError();
    return memory::MakeBeladyPolicy(std::move(future));
  }
  return OnlinePolicy(c.policy, c, std::move(frequency));
}

absl::StatusOr<std::unique_ptr<SlotCache>> MakeCache(
    const memory::RoutingTraceHeader& h, int64_t slots, uint64_t slice_bytes,
    std::unique_ptr<memory::EvictionPolicy> policy) {
  // Slots past every key are never used: capping keeps the arrays small.
  const int64_t keys = static_cast<int64_t>(h.n_layer) * h.n_expert;
  return SlotCache::Create(
      {static_cast<int32_t>(h.n_layer), static_cast<int32_t>(h.n_expert),
       static_cast<int32_t>(std::min(slots, keys)), slice_bytes},
      std::move(policy));
}

}  // namespace

// The result's figures from the device's counters (bytes by tier filled in).
absl::StatusOr<SimResult> Finish(const RoutingTrace& trace, const SimConfig& config,
                                 const memory::SlotCacheCounters& counters);
// The replay with a host tier (memory::ExpertTiers).
absl::StatusOr<SimResult> SimulateTiers(const RoutingTrace& trace,
                                        const SimConfig& config);

double SimResult::host_bytes_per_token() const {
  return tokens == 0 ? 0
                     : counters.bytes_by_tier[static_cast<int>(Tier::kHost)] /
                           tokens;
}

double SimResult::disk_bytes_per_token() const {
  return tokens == 0 ? 0
                     : counters.bytes_by_tier[static_cast<int>(Tier::kDisk)] /
                           tokens;
}

absl::StatusOr<SimResult> Simulate(const RoutingTrace& trace,
                                   const SimConfig& config) {
  if (config.slots < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("slots must be >= 0, got ", config.slots));
  }
  if (config.slice_bytes == 0) {
    return absl::InvalidArgumentError("slice_bytes must be >= 1");
  }
  if (config.host_slots >= 0) return SimulateTiers(trace, config);
  ASSIGN_OR_RETURN(auto policy, PolicyFor(config, trace, nullptr));
  ASSIGN_OR_RETURN(auto device, MakeCache(trace.header, config.slots,
                                          config.slice_bytes,
                                          std::move(policy)));
  RETURN_IF_ERROR(ForEachStep(
      trace, [&](int32_t layer, absl::Span<const int32_t> experts) -> absl::Status {
        device->BeginStep();
        ASSIGN_OR_RETURN(std::vector<SlotAssignment> got,
                         device->Acquire(layer, experts));
        uint64_t missed = 0;
        for (const SlotAssignment& a : got) missed += a.kind != SlotAssignment::kHit;
        if (missed > 0) device->RecordBytes(Tier::kHost, missed * config.slice_bytes);
        return absl::OkStatus();
      }));
  return Finish(trace, config, device->Snapshot());
}

absl::StatusOr<SimResult> SimulateTiers(const RoutingTrace& trace,
                                        const SimConfig& config) {
  // Counts shared by the tiers whenever either is frequency-aware, so an
  // expert moving between them keeps its history.
  std::shared_ptr<memory::KeyFrequency> frequency;
  if (config.policy == "tinylfu" || config.host_policy == "tinylfu") {
    frequency = std::make_shared<memory::KeyFrequency>(
        config.tinylfu_half_life > 0 ? config.tinylfu_half_life
                                     : memory::kDefaultTinyLfuHalfLife);
  }
  ASSIGN_OR_RETURN(auto device_policy, PolicyFor(config, trace, frequency));
  ASSIGN_OR_RETURN(auto host_policy,
                   OnlinePolicy(config.host_policy, config, frequency));
  const int64_t keys = static_cast<int64_t>(trace.header.n_layer) * trace.header.n_expert;
  ASSIGN_OR_RETURN(
      auto tiers,
      memory::ExpertTiers::Create(
          {static_cast<int32_t>(trace.header.n_layer),
           static_cast<int32_t>(trace.header.n_expert),
           static_cast<int32_t>(std::min(config.slots, keys)),
           static_cast<int32_t>(std::min(config.host_slots, keys)),
           config.slice_bytes, config.exclusive},
          std::move(device_policy), std::move(host_policy), frequency));
  RETURN_IF_ERROR(ForEachStep(
      trace, [&](int32_t layer, absl::Span<const int32_t> experts) {
        return tiers->Step(layer, experts).status();
      }));
  const memory::ExpertTiersCounters c = tiers->Snapshot();
  memory::SlotCacheCounters device = c.device;
  device.bytes_by_tier[static_cast<int>(Tier::kHost)] = c.host_hits * config.slice_bytes;
  device.bytes_by_tier[static_cast<int>(Tier::kDisk)] = c.disk_reads * config.slice_bytes;
  ASSIGN_OR_RETURN(SimResult r, Finish(trace, config, device));
  r.host_hit_rate = c.host_hit_rate();
  r.off_disk_rate = c.off_disk_rate();
  r.demoted = c.demoted;
  return r;
}

absl::StatusOr<SimResult> Finish(const RoutingTrace& trace, const SimConfig& config,
                                 const memory::SlotCacheCounters& counters) {
  SimResult r;
  r.config = config;
  r.counters = counters;
  r.tokens = static_cast<double>(trace.size()) / trace.header.n_layer;
  bool any = false;
  for (uint32_t l = 0; l < trace.header.n_layer; ++l) {
    if (r.counters.layer_lookups[l] == 0) continue;
    const double h = r.counters.layer_hit_rate(static_cast<int>(l));
    r.layer_min_hit_rate = any ? std::min(r.layer_min_hit_rate, h) : h;
    r.layer_max_hit_rate = any ? std::max(r.layer_max_hit_rate, h) : h;
    any = true;
  }
  return r;
}

absl::StatusOr<int64_t> SlotsForFraction(const memory::RoutingTraceHeader& h,
                                         double fraction) {
  if (!(fraction >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("arena fraction must be >= 0, got ", fraction));
  }
  const int64_t keys = static_cast<int64_t>(h.n_layer) * h.n_expert;
  // The small epsilon keeps 0.1 x 1000 at 100, not 101, despite rounding.
  const double want = std::ceil(fraction * static_cast<double>(keys) - 1e-9);
  return std::min<int64_t>(keys, static_cast<int64_t>(want));
}

std::string FormatTable(const std::vector<SimResult>& results) {
  std::string out = absl::StrFormat(
      "%-7s %8s %9s %8s %8s %8s %10s %9s %8s %12s %12s %-7s %-5s %8s %8s\n",
      "policy", "slots", "host_sl", "hit", "lyr_min", "lyr_max", "evictions",
      "exhausted", "forced", "host_B/tok", "disk_B/tok", "h_pol", "tiers",
      "host_hit", "off_disk");
  for (const SimResult& r : results) {
    const auto& c = r.counters;
    const bool tiers = r.config.host_slots >= 0;
    absl::StrAppendFormat(
        &out,
        "%-7s %8d %9s %7.2f%% %7.2f%% %7.2f%% %10d %9d %8d %12.1f %12.1f %-7s "
        "%-5s %8s %8s\n",
        r.config.policy, r.config.slots,
        tiers ? absl::StrCat(r.config.host_slots) : std::string("-"),
        100 * c.hit_rate(), 100 * r.layer_min_hit_rate,
        100 * r.layer_max_hit_rate, c.evictions, c.exhausted, c.forced,
        r.host_bytes_per_token(), r.disk_bytes_per_token(),
        tiers ? r.config.host_policy : "-",
        tiers ? (r.config.exclusive ? "excl" : "incl") : "-",
        tiers ? absl::StrFormat("%.2f%%", 100 * r.host_hit_rate) : "-",
        tiers ? absl::StrFormat("%.2f%%", 100 * r.off_disk_rate) : "-");
  }
  return out;
}

std::string FormatJson(const std::vector<SimResult>& results) {
  std::string out = "[";
  for (size_t i = 0; i < results.size(); ++i) {
    const SimResult& r = results[i];
    const auto& c = r.counters;
    absl::StrAppendFormat(
        &out,
        "%s\n  {\"policy\": \"%s\", \"slots\": %d, \"host_slots\": %d, "
        "\"slice_bytes\": %d, \"tokens\": %.6g, \"lookups\": %d, "
        "\"hits\": %d, \"hit_rate\": %.6f, \"layer_min_hit_rate\": %.6f, "
        "\"layer_max_hit_rate\": %.6f, \"evictions\": %d, \"exhausted\": %d, "
        "\"forced\": %d, \"host_bytes_per_token\": %.6g, "
        "\"disk_bytes_per_token\": %.6g, \"host_policy\": \"%s\", "
        "\"tiers\": \"%s\", \"host_hit_rate\": %.6f, \"off_disk_rate\": %.6f, "
        "\"demoted\": %d}",
        i == 0 ? "" : ",", r.config.policy, r.config.slots,
        r.config.host_slots, r.config.slice_bytes, r.tokens, c.lookups,
        c.hits, c.hit_rate(), r.layer_min_hit_rate, r.layer_max_hit_rate,
        c.evictions, c.exhausted, c.forced, r.host_bytes_per_token(),
        r.disk_bytes_per_token(), r.config.host_policy,
        r.config.exclusive ? "exclusive" : "inclusive", r.host_hit_rate,
        r.off_disk_rate, r.demoted);
  }
  out += "\n]\n";
  return out;
}

namespace {

// The knobs of "realistic" and "mixed" (slotsim_lib.h).
struct Structure {
  double zipf = 0.8;
  double reuse = 0.45;
  double spread = 0.5;
  int64_t wave = 512;
  int64_t every = 64;
};

absl::StatusOr<Structure> ParseStructure(std::string_view kind,
                                         std::string_view params) {
  Structure st;
  for (absl::string_view kv : absl::StrSplit(absl::string_view(params.data(), params.size()), ',', absl::SkipEmpty())) {
    const std::pair<std::string, std::string> p = absl::StrSplit(kv, '=');
    double v = 0;
    if (!absl::SimpleAtod(p.second, &v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "synthetic: bad value in \"", std::string(kv), "\" of ", std::string(kind)));
    }
    if (p.first == "zipf") st.zipf = v;
    else if (p.first == "reuse" && v <= 1) st.reuse = v;
    else if (p.first == "spread" && v <= 2) st.spread = v;
    else if (p.first == "wave") st.wave = static_cast<int64_t>(v);
    else if (p.first == "every" && v >= 1) st.every = static_cast<int64_t>(v);
    else {
      return absl::InvalidArgumentError(absl::StrCat(
          "synthetic: unknown or out-of-range knob \"", std::string(kv), "\" of ",
          std::string(kind), "; valid: zipf=S, reuse=[0,1], spread=[0,2], wave=W, every=N"));
    }
  }
  return st;
}

// Decode routing with static popularity, temporal reuse and per-layer
// exponents; one token of one layer per call.
class RealisticRouter {
 public:
  RealisticRouter(const Structure& st, memory::RoutingTraceHeader shape,
                  std::mt19937_64& rng)
      : st_(st), shape_(shape), rng_(rng), cumulative_(shape.n_layer),
        rank_expert_(shape.n_layer), previous_(shape.n_layer) {
    for (uint32_t l = 0; l < shape.n_layer; ++l) {
      const double at = shape.n_layer == 1 ? 0.5 : static_cast<double>(l) / (shape.n_layer - 1);
      const double s = st.zipf * (1 - st.spread / 2 + st.spread * at);
      double total = 0;
      for (uint32_t r = 0; r < shape.n_expert; ++r) {
        total += 1.0 / std::pow(r + 1, s);
        cumulative_[l].push_back(total);
      }
      rank_expert_[l].resize(shape.n_expert);
      for (uint32_t e = 0; e < shape.n_expert; ++e) rank_expert_[l][e] = e;
      std::shuffle(rank_expert_[l].begin(), rank_expert_[l].end(), rng_);
    }
  }

  void Route(uint32_t layer, std::vector<int32_t>& ids) {
    ids.clear();
    const std::vector<int32_t>& prev = previous_[layer];
    std::uniform_real_distribution<double> unit(0, 1);
    while (ids.size() < shape_.k) {
      int32_t e;
      if (!prev.empty() && unit(rng_) < st_.reuse) {
        e = prev[rng_() % prev.size()];
      } else {
        const std::vector<double>& c = cumulative_[layer];
        const auto it = std::upper_bound(c.begin(), c.end(), unit(rng_) * c.back());
        e = rank_expert_[layer][std::min<size_t>(it - c.begin(), c.size() - 1)];
      }
      if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
    }
    previous_[layer] = ids;
  }

 private:
  const Structure st_;
  const memory::RoutingTraceHeader shape_;
  std::mt19937_64& rng_;
  std::vector<std::vector<double>> cumulative_;
  std::vector<std::vector<int32_t>> rank_expert_;
  std::vector<std::vector<int32_t>> previous_;
};

absl::StatusOr<RoutingTrace> MakeStructuredTrace(std::string_view kind,
                                                 memory::RoutingTraceHeader shape,
                                                 int64_t tokens, uint64_t seed) {
  const size_t colon = kind.find(':');
  const std::string_view name = kind.substr(0, colon);
  ASSIGN_OR_RETURN(const Structure st,
                   ParseStructure(kind, colon == std::string_view::npos
                                            ? std::string_view()
                                            : kind.substr(colon + 1)));
  std::mt19937_64 rng(seed);
  RealisticRouter router(st, shape, rng);
  RoutingTrace t;
  t.header = shape;
  std::vector<int32_t> ids;
  uint32_t index = 0;  // tokens routed so far, the same for every layer
  for (int64_t tok = 0; tok < tokens; ++tok) {
    if (name == "mixed" && tok > 0 && tok % st.every == 0) {
      // A prefill wave of another request: uniform, layer-major.
      for (uint32_t l = 0; l < shape.n_layer; ++l) {
        for (int64_t w = 0; w < st.wave; ++w) {
          ids.clear();
          while (ids.size() < shape.k) {
            const int32_t e = static_cast<int32_t>(rng() % shape.n_expert);
            if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
          }
          t.Add(index + static_cast<uint32_t>(w), l, ids);
        }
      }
      index += static_cast<uint32_t>(st.wave);
    }
    for (uint32_t l = 0; l < shape.n_layer; ++l) {
      router.Route(l, ids);
      t.Add(index, l, ids);
    }
    ++index;
  }
  return t;
}

}  // namespace

absl::StatusOr<RoutingTrace> MakeSyntheticTrace(
    std::string_view kind, memory::RoutingTraceHeader shape, int64_t tokens,
    uint64_t seed) {
  RETURN_IF_ERROR(memory::ValidateRoutingTraceHeader(shape, "synthetic"));
  if (tokens < 0) {
    return absl::InvalidArgumentError("synthetic: tokens must be >= 0");
  }
  if (kind.substr(0, 9) == "realistic" || kind.substr(0, 5) == "mixed") {
    return MakeStructuredTrace(kind, shape, tokens, seed);
  }
  double zipf_s = -1;
  if (kind.substr(0, 5) == "zipf:") {
    if (!absl::SimpleAtod(std::string(kind.substr(5)), &zipf_s) || zipf_s < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "synthetic: bad zipf exponent in \"", std::string(kind), "\""));
    }
  } else if (kind != "uniform" && kind != "cyclic") {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic: unknown kind \"", std::string(kind),
                     "\"; valid: uniform, zipf:S, cyclic, realistic[:...], mixed[:...]"));
  }
  const int32_t n_expert = static_cast<int32_t>(shape.n_expert);
  std::mt19937_64 rng(seed);
  // Per layer: the expert of each popularity rank (zipf), and the
  // cumulative weights of the ranks.
  std::vector<std::vector<int32_t>> rank_expert(shape.n_layer);
  std::vector<double> cumulative(n_expert);
  double total = 0;
  for (int32_t r = 0; r < n_expert; ++r) {
    total += zipf_s > 0 ? 1.0 / std::pow(r + 1, zipf_s) : 1.0;
    cumulative[r] = total;
  }
  for (auto& perm : rank_expert) {
    perm.resize(n_expert);
    for (int32_t e = 0; e < n_expert; ++e) perm[e] = e;
    std::shuffle(perm.begin(), perm.end(), rng);
  }
  std::uniform_real_distribution<double> unit(0, total);
  RoutingTrace t;
  t.header = shape;
  std::vector<int32_t> ids;
  for (int64_t tok = 0; tok < tokens; ++tok) {
    for (uint32_t l = 0; l < shape.n_layer; ++l) {
      ids.clear();
      while (ids.size() < shape.k) {
        int32_t e;
        if (kind == "cyclic") {
          e = static_cast<int32_t>((tok * shape.k + ids.size()) % n_expert);
        } else {
          const auto it = std::upper_bound(cumulative.begin(),
                                           cumulative.end(), unit(rng));
          const int32_t rank = static_cast<int32_t>(
              std::min<ptrdiff_t>(it - cumulative.begin(), n_expert - 1));
          e = rank_expert[l][rank];
        }
        // Distinct experts: redraw a repeat (cyclic never repeats while
        // k <= n_expert).
        if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
      }
      t.Add(static_cast<uint32_t>(tok), l, ids);
    }
  }
  return t;
}

namespace {

// Per token (in order of first appearance): its record index per layer.
absl::StatusOr<std::vector<std::vector<size_t>>> RecordsByToken(const RoutingTrace& t) {
  std::vector<std::vector<size_t>> by_token;
  absl::flat_hash_map<uint32_t, size_t> slot;
  const size_t n_layer = t.header.n_layer;
  for (size_t i = 0; i < t.size(); ++i) {
    auto [it, fresh] = slot.try_emplace(t.token[i], by_token.size());
    if (fresh) by_token.emplace_back(n_layer, SIZE_MAX);
    size_t& at = by_token[it->second][t.layer[i]];
    if (at != SIZE_MAX) {
      return absl::InvalidArgumentError(absl::StrCat(
          "streams: token ", t.token[i], " routes layer ", t.layer[i], " twice"));
    }
    at = i;
  }
  for (size_t k = 0; k < by_token.size(); ++k) {
    for (size_t l = 0; l < n_layer; ++l) {
      if (by_token[k][l] == SIZE_MAX) {
        return absl::InvalidArgumentError(absl::StrCat(
            "streams: a token has no record for layer ", l, " (not a decode trace)"));
      }
    }
  }
  return by_token;
}

bool SameShape(const memory::RoutingTraceHeader& a, const memory::RoutingTraceHeader& b) {
  return a.n_layer == b.n_layer && a.n_expert == b.n_expert && a.k == b.k;
}

}  // namespace

absl::StatusOr<RoutingTrace> InterleaveStreams(absl::Span<const RoutingTrace> streams) {
  if (streams.empty()) return absl::InvalidArgumentError("streams: none given");
  std::vector<std::vector<std::vector<size_t>>> tokens;
  size_t steps = SIZE_MAX;
  for (const RoutingTrace& s : streams) {
    if (!SameShape(s.header, streams[0].header)) {
      return absl::InvalidArgumentError("streams: traces of different shapes");
    }
    ASSIGN_OR_RETURN(std::vector<std::vector<size_t>> t, RecordsByToken(s));
    steps = std::min(steps, t.size());
    tokens.push_back(std::move(t));
  }
  RoutingTrace out;
  out.header = streams[0].header;
  const uint32_t n = static_cast<uint32_t>(streams.size());
  for (size_t t = 0; t < steps; ++t) {
    for (uint32_t l = 0; l < out.header.n_layer; ++l) {
      for (uint32_t s = 0; s < n; ++s) {
        out.Add(static_cast<uint32_t>(t) * n + s, l, streams[s].Experts(tokens[s][t][l]));
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<RoutingTrace>> SplitStreams(const RoutingTrace& trace, int n) {
  ASSIGN_OR_RETURN(std::vector<std::vector<size_t>> tokens, RecordsByToken(trace));
  if (n < 1 || tokens.size() < static_cast<size_t>(n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "streams: ", n, " streams of a trace of ", tokens.size(), " tokens"));
  }
  const size_t per = tokens.size() / n;
  std::vector<RoutingTrace> out(n);
  for (int s = 0; s < n; ++s) {
    out[s].header = trace.header;
    for (size_t t = 0; t < per; ++t) {
      for (uint32_t l = 0; l < trace.header.n_layer; ++l) {
        out[s].Add(static_cast<uint32_t>(t), l, trace.Experts(tokens[s * per + t][l]));
      }
    }
  }
  return out;
}

}  // namespace sluice::slotsim
