#include "tools/slotsim_lib.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "memory/slot_cache.h"

namespace sluice::slotsim {
namespace {

using memory::ExpertKey;
using memory::RoutingTrace;
using memory::SlotAssignment;
using memory::SlotCache;
using memory::Tier;

absl::StatusOr<std::unique_ptr<memory::EvictionPolicy>> PolicyFor(
    const SimConfig& c, const RoutingTrace& trace) {
  if (c.policy == "belady") {
    // The access numbers the cache gives are the flattened lookups.
    std::vector<ExpertKey> future;
    future.reserve(trace.experts.size());
    for (size_t i = 0; i < trace.size(); ++i) {
      for (int32_t e : trace.Experts(i)) {
        future.push_back({static_cast<int32_t>(trace.layer[i]), e});
      }
    }
    return memory::MakeBeladyPolicy(std::move(future));
  }
  if (c.policy == "lfu" && c.lfu_half_life > 0) {
    return memory::MakeDecayedLfuPolicy(c.lfu_half_life);
  }
  auto p = memory::MakePolicy(c.policy);
  if (!p.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown policy \"", c.policy, "\"; valid: lru, lfu, belady"));
  }
  return p;
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
  ASSIGN_OR_RETURN(auto policy, PolicyFor(config, trace));
  ASSIGN_OR_RETURN(auto device, MakeCache(trace.header, config.slots,
                                          config.slice_bytes,
                                          std::move(policy)));
  std::unique_ptr<SlotCache> host;
  if (config.host_slots >= 0) {
    ASSIGN_OR_RETURN(host, MakeCache(trace.header, config.host_slots,
                                     config.slice_bytes,
                                     memory::MakeLruPolicy()));
  }
  std::vector<int32_t> missed;
  for (size_t i = 0; i < trace.size(); ++i) {
    const int32_t layer = static_cast<int32_t>(trace.layer[i]);
    const absl::Span<const int32_t> experts = trace.Experts(i);
    device->BeginStep();
    ASSIGN_OR_RETURN(std::vector<SlotAssignment> got,
                     device->Acquire(layer, experts));
    missed.clear();
    for (size_t j = 0; j < got.size(); ++j) {
      if (got[j].kind != SlotAssignment::kHit) missed.push_back(experts[j]);
    }
    if (missed.empty()) continue;
    if (host == nullptr) {
      device->RecordBytes(Tier::kHost, missed.size() * config.slice_bytes);
      continue;
    }
    host->BeginStep();
    ASSIGN_OR_RETURN(std::vector<SlotAssignment> from,
                     host->Acquire(layer, missed));
    for (const SlotAssignment& a : from) {
      device->RecordBytes(
          a.kind == SlotAssignment::kHit ? Tier::kHost : Tier::kDisk,
          config.slice_bytes);
    }
  }

  SimResult r;
  r.config = config;
  r.counters = device->Snapshot();
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
      "%-7s %8s %9s %8s %8s %8s %10s %9s %8s %12s %12s\n", "policy", "slots",
      "host_sl", "hit", "lyr_min", "lyr_max", "evictions", "exhausted",
      "forced", "host_B/tok", "disk_B/tok");
  for (const SimResult& r : results) {
    const auto& c = r.counters;
    absl::StrAppendFormat(
        &out, "%-7s %8d %9s %7.2f%% %7.2f%% %7.2f%% %10d %9d %8d %12.1f %12.1f\n",
        r.config.policy, r.config.slots,
        r.config.host_slots < 0 ? std::string("-")
                                : absl::StrCat(r.config.host_slots),
        100 * c.hit_rate(), 100 * r.layer_min_hit_rate,
        100 * r.layer_max_hit_rate, c.evictions, c.exhausted, c.forced,
        r.host_bytes_per_token(), r.disk_bytes_per_token());
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
        "\"disk_bytes_per_token\": %.6g}",
        i == 0 ? "" : ",", r.config.policy, r.config.slots,
        r.config.host_slots, r.config.slice_bytes, r.tokens, c.lookups,
        c.hits, c.hit_rate(), r.layer_min_hit_rate, r.layer_max_hit_rate,
        c.evictions, c.exhausted, c.forced, r.host_bytes_per_token(),
        r.disk_bytes_per_token());
  }
  out += "\n]\n";
  return out;
}

absl::StatusOr<RoutingTrace> MakeSyntheticTrace(
    std::string_view kind, memory::RoutingTraceHeader shape, int64_t tokens,
    uint64_t seed) {
  RETURN_IF_ERROR(memory::ValidateRoutingTraceHeader(shape, "synthetic"));
  if (tokens < 0) {
    return absl::InvalidArgumentError("synthetic: tokens must be >= 0");
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
                     "\"; valid: uniform, zipf:S, cyclic"));
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

}  // namespace sluice::slotsim
