// slotsim: compare expert slot cache policies and arena sizes offline on a
// routing trace (tools/slotsim_lib.h; docs/SLOT_CACHE.md).
//
//   slotsim --trace FILE --policy lru,lfu,belady --arena_fraction 1,0.5,0.25,0.1
//   slotsim --trace FILE --slots 64,128 --host_slots 256 --slice_bytes 1048576
//   slotsim --synthetic zipf:1.0 --layers 48 --experts 128 --k 8 --tokens 500
//
// One run per policy and size; one table (or --json) on stdout. Sizes are
// --arena_fraction (of n_layer x n_expert) or --slots; the host tier is
// --host_fraction or --host_slots (none by default: every miss from host).
// Bytes default to counting expert slices (--slice_bytes 1).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "memory/routing_trace.h"
#include "tools/slotsim_lib.h"

ABSL_FLAG(std::string, trace, "", "routing trace file (tools/generate --record_trace)");
ABSL_FLAG(std::string, synthetic, "",
          "instead of --trace: uniform, zipf:S, cyclic, realistic[:zipf=S,"
          "reuse=R,spread=D] or mixed[:wave=W,every=N,...] (with --layers "
          "--experts --k --tokens --seed)");
ABSL_FLAG(int, layers, 48, "synthetic: layers");
ABSL_FLAG(int, experts, 128, "synthetic: experts per layer");
ABSL_FLAG(int, k, 8, "synthetic: experts per token");
ABSL_FLAG(int, tokens, 256, "synthetic: tokens");
ABSL_FLAG(uint64_t, seed, 1, "synthetic: seed");
ABSL_FLAG(int, streams, 1,
          "requests decoding together: each step acquires, per layer, the union of the "
          "streams' experts (the trace cut into N consecutive streams; --synthetic makes N x "
          "--tokens); bytes per token are per generated token");
ABSL_FLAG(std::string, write_trace, "", "also write the (synthetic) trace here");
ABSL_FLAG(std::string, policy, "lru,lfu,belady", "policies, comma-separated");
ABSL_FLAG(std::string, arena_fraction, "1,0.5,0.25,0.1",
          "device slots as fractions of all experts (ignored with --slots)");
ABSL_FLAG(std::string, slots, "", "device slots, comma-separated");
ABSL_FLAG(double, host_fraction, -1, "host tier as a fraction of all experts");
ABSL_FLAG(int64_t, host_slots, -1, "host tier slots (-1: no host tier)");
ABSL_FLAG(uint64_t, slice_bytes, 1, "bytes of one expert (1: count slices)");
ABSL_FLAG(double, lfu_half_life, 0, "lfu half-life in lookups (0: default)");
ABSL_FLAG(std::string, host_policy, "lru",
          "host tier policies, comma-separated: lru, lfu, tinylfu");
ABSL_FLAG(std::string, tiers, "inclusive",
          "with a host tier, comma-separated: inclusive (the data path "
          "today) and/or exclusive (an expert in one tier at a time)");
ABSL_FLAG(double, tinylfu_half_life, 0, "tinylfu half-life in lookups (0: default)");
ABSL_FLAG(double, tinylfu_window, 0, "tinylfu window share of the slots (0: default)");
ABSL_FLAG(bool, json, false, "print JSON instead of the table");

namespace {

using sluice::memory::RoutingTrace;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "slotsim: %s\n", s.ToString().c_str());
  return 1;
}

absl::StatusOr<std::vector<double>> Numbers(const std::string& flag,
                                            const std::string& list) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    double v;
    if (!absl::SimpleAtod(part, &v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": \"", std::string(part), "\" is not a number >= 0"));
    }
    out.push_back(v);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  }
  return out;
}

// The trace of --trace or --synthetic (LoadStream), or, with --streams N >
// 1, N streams decoding together: the trace cut into N consecutive requests
// (a synthetic one N times --tokens long, so that the streams share one
// model's expert popularity and each keeps its own token-to-token reuse).
absl::StatusOr<RoutingTrace> LoadStream(int64_t tokens);

absl::StatusOr<RoutingTrace> LoadTrace() {
  const int n = absl::GetFlag(FLAGS_streams);
  if (n < 1) return absl::InvalidArgumentError("--streams must be >= 1");
  auto whole = LoadStream(absl::GetFlag(FLAGS_tokens) * n);
  if (!whole.ok() || n == 1) return whole;
  auto split = sluice::slotsim::SplitStreams(*whole, n);
  if (!split.ok()) return split.status();
  return sluice::slotsim::InterleaveStreams(*split);
}

absl::StatusOr<RoutingTrace> LoadStream(int64_t tokens) {
  if (!absl::GetFlag(FLAGS_trace).empty()) {
    return sluice::memory::ReadRoutingTrace(absl::GetFlag(FLAGS_trace));
  }
  if (absl::GetFlag(FLAGS_synthetic).empty()) {
    return absl::InvalidArgumentError("give --trace FILE or --synthetic KIND");
  }
  sluice::memory::RoutingTraceHeader shape;
  shape.n_layer = static_cast<uint32_t>(std::max(0, absl::GetFlag(FLAGS_layers)));
  shape.n_expert = static_cast<uint32_t>(std::max(0, absl::GetFlag(FLAGS_experts)));
  shape.k = static_cast<uint32_t>(std::max(0, absl::GetFlag(FLAGS_k)));
  auto t = sluice::slotsim::MakeSyntheticTrace(absl::GetFlag(FLAGS_synthetic), shape,
                                               tokens, absl::GetFlag(FLAGS_seed));
  if (t.ok() && !absl::GetFlag(FLAGS_write_trace).empty()) {
    absl::Status s = sluice::memory::WriteRoutingTrace(absl::GetFlag(FLAGS_write_trace), *t);
    if (!s.ok()) return s;
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "slotsim --trace FILE [--policy lru,lfu,belady] [--arena_fraction F,... | "
      "--slots N,...] [--host_fraction F | --host_slots M] [--slice_bytes B] [--json]");
  absl::ParseCommandLine(argc, argv);

  auto trace = LoadTrace();
  if (!trace.ok()) return Fail(trace.status());

  std::vector<int64_t> sizes;
  if (!absl::GetFlag(FLAGS_slots).empty()) {
    auto n = Numbers("slots", absl::GetFlag(FLAGS_slots));
    if (!n.ok()) return Fail(n.status());
    for (double v : *n) sizes.push_back(static_cast<int64_t>(v));
  } else {
    auto f = Numbers("arena_fraction", absl::GetFlag(FLAGS_arena_fraction));
    if (!f.ok()) return Fail(f.status());
    for (double v : *f) {
      auto slots = sluice::slotsim::SlotsForFraction(trace->header, v);
      if (!slots.ok()) return Fail(slots.status());
      sizes.push_back(*slots);
    }
  }
  int64_t host_slots = absl::GetFlag(FLAGS_host_slots);
  if (absl::GetFlag(FLAGS_host_fraction) >= 0) {
    auto h = sluice::slotsim::SlotsForFraction(trace->header,
                                               absl::GetFlag(FLAGS_host_fraction));
    if (!h.ok()) return Fail(h.status());
    host_slots = *h;
  }

  std::vector<std::string> tiers = absl::StrSplit(absl::GetFlag(FLAGS_tiers), ',',
                                                  absl::SkipEmpty());
  std::vector<std::string> host_policies =
      absl::StrSplit(absl::GetFlag(FLAGS_host_policy), ',', absl::SkipEmpty());
  for (const std::string& t : tiers) {
    if (t != "inclusive" && t != "exclusive") {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--tiers: \"", t, "\"; valid: inclusive, exclusive")));
    }
  }
  // Without a host tier the host policy and the tiers do not apply.
  if (host_slots < 0) {
    tiers = {"inclusive"};
    host_policies = {"lru"};
  }
  std::vector<sluice::slotsim::SimResult> results;
  for (absl::string_view policy :
       absl::StrSplit(absl::GetFlag(FLAGS_policy), ',', absl::SkipEmpty())) {
    for (const std::string& host_policy : host_policies) {
      for (const std::string& t : tiers) {
        for (int64_t slots : sizes) {
          sluice::slotsim::SimConfig c;
          c.policy = std::string(policy);
          c.slots = slots;
          c.host_slots = host_slots;
          c.slice_bytes = absl::GetFlag(FLAGS_slice_bytes);
          c.lfu_half_life = absl::GetFlag(FLAGS_lfu_half_life);
          c.host_policy = host_policy;
          c.exclusive = t == "exclusive";
          c.tinylfu_half_life = absl::GetFlag(FLAGS_tinylfu_half_life);
          c.tinylfu_window = absl::GetFlag(FLAGS_tinylfu_window);
          auto r = sluice::slotsim::Simulate(*trace, c);
          if (!r.ok()) return Fail(r.status());
          results.push_back(*std::move(r));
        }
      }
    }
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::fputs(sluice::slotsim::FormatJson(results).c_str(), stdout);
  } else {
    std::printf("trace: %zu records, %u layers x %u experts, k=%u, %.0f tokens\n",
                trace->size(), trace->header.n_layer, trace->header.n_expert,
                trace->header.k,
                static_cast<double>(trace->size()) / trace->header.n_layer);
    std::fputs(sluice::slotsim::FormatTable(results).c_str(), stdout);
  }
  return 0;
}
