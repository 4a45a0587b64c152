#include "tools/generate_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice::tools {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.9g", v);
}

// Builds one JSON object; values are added already encoded.
class Object {
 public:
  Object& Raw(const std::string& key, const std::string& json) {
    absl::StrAppend(&body_, body_.empty() ? "" : ",", Quote(key), ":", json);
    return *this;
  }
  Object& Num(const std::string& key, double v) { return Raw(key, Number(v)); }
  Object& Int(const std::string& key, int64_t v) { return Raw(key, absl::StrCat(v)); }
  Object& UInt(const std::string& key, uint64_t v) { return Raw(key, absl::StrCat(v)); }
  Object& Bool(const std::string& key, bool v) { return Raw(key, v ? "true" : "false"); }
  Object& Str(const std::string& key, const std::string& v) { return Raw(key, Quote(v)); }
  std::string Json() const { return absl::StrCat("{", body_, "}"); }

 private:
  std::string body_;
};

double Ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

// The counters of one interval; `tokens` are the tokens it computed (0:
// no per-token figures) and `seconds` its duration (0: no per-second ones).
std::string CountersJson(const memory::SlotCacheCounters& c, double tokens,
                         double seconds) {
  const uint64_t host = c.bytes_by_tier[static_cast<int>(memory::Tier::kHost)];
  const uint64_t disk = c.bytes_by_tier[static_cast<int>(memory::Tier::kDisk)];
  const uint64_t moved = c.bytes_streamed + c.bytes_forced;
  std::string layers = "[";
  for (size_t i = 0; i < c.layer_lookups.size(); ++i) {
    absl::StrAppend(&layers, i == 0 ? "" : ",",
                    Number(c.layer_hit_rate(static_cast<int>(i))));
  }
  layers += "]";
  Object o;
  o.UInt("lookups", c.lookups)
      .UInt("hits", c.hits)
      .UInt("misses", c.misses)
      .Num("hit_rate", c.hit_rate())
      .UInt("evictions", c.evictions)
      .UInt("exhausted", c.exhausted)
      .UInt("forced", c.forced)
      .UInt("host_computed", c.host_computed)
      // --expert_skip: (token, expert) pairs not computed.
      .UInt("skipped", c.skipped)
      .UInt("prefetches_issued", c.prefetches_issued)
      .UInt("prefetches_useful", c.prefetches_useful)
      .UInt("prefetches_late", c.prefetches_late)
      .Num("prefetch_accuracy", c.prefetch_accuracy())
      .UInt("bytes_streamed", c.bytes_streamed)
      // The key's old name, kept for readers of earlier results.json files.
      .UInt("bytes_filled", c.bytes_streamed)
      .UInt("bytes_forced", c.bytes_forced)
      .UInt("bytes_host_computed", c.bytes_host_computed)
      .UInt("bytes_moved", moved)
      .Raw("bytes_by_tier",
           Object().UInt("host", host).UInt("disk", disk).Json())
      .Raw("layer_hit_rate", layers);
  if (tokens > 0) {
    o.Num("tokens", tokens);
    o.Raw("bytes_per_token", Object()
                                 .Num("host", Ratio(host, tokens))
                                 .Num("disk", Ratio(disk, tokens))
                                 .Num("moved", Ratio(moved, tokens))
                                 .Json());
  }
  if (seconds > 0) {
    o.Raw("bytes_per_s", Object()
                             .Num("host", host / seconds)
                             .Num("disk", disk / seconds)
                             .Num("moved", moved / seconds)
                             .Json());
  }
  return o.Json();
}

std::string ExpertsJson(const GenerateReport& r) {
  const ExpertStreamStats& e = r.stats.experts;
  const GenerateResult& g = r.result;
  // Decode steps: every generated token but the last is fed back.
  const double decode_steps = g.generated_tokens > 1 ? g.generated_tokens - 1 : 0;
  const double decode_s =
      g.decode_tok_per_s > 0 ? decode_steps / g.decode_tok_per_s : 0;
  const double prefill_s =
      g.prefill_tok_per_s > 0 ? g.prompt_tokens / g.prefill_tok_per_s : 0;
  return Object()
      .Bool("streaming", e.streaming)
      .Bool("skipping", e.skipping)
      .Str("policy", e.policy)
      .Str("miss_policy", e.miss_policy)
      .Num("copy_bytes_per_s_estimate", e.copy_bytes_per_s)
      .Num("host_bytes_per_s_estimate", e.host_bytes_per_s)
      .Num("host_fixed_s_estimate", e.host_fixed_s)
      .Num("host_path_saving_s", e.host_path_saving_s)
      .Int("prefetch_batches_landed", e.prefetch_batches_landed)
      .Int("prefetch_batches_late", e.prefetch_batches_late)
      .Num("copy_issue_s", e.copy_issue_s)
      .Num("table_upload_s", e.table_upload_s)
      .Int("slots_capacity", e.slots_capacity)
      // The key's old name, kept for readers of earlier results.json files.
      .Int("slots", e.slots_capacity)
      .Int("experts", e.experts)
      .Num("arena_fraction_actual", Ratio(e.slots_capacity, e.experts))
      .UInt("slot_bytes", e.slot_bytes)
      .UInt("arena_bytes", e.arena_bytes)
      .UInt("host_tier_bytes", e.host_tier_bytes)
      // The fewest bytes --host_tier_bytes takes for this model (inclusive;
      // exclusive tiers need twice).
      .UInt("host_tier_min_bytes", e.host_tier_min_bytes)
      .Str("tiers", !e.host_tier ? "" : e.exclusive_tiers ? "exclusive" : "inclusive")
      .Raw("host_tier", Object()
                            .UInt("lookups", e.host_tier_counters.lookups)
                            .UInt("hits", e.host_tier_counters.hits)
                            .UInt("demoted", e.host_tier_counters.offers_admitted)
                            .UInt("promoted", e.host_tier_counters.removed)
                            .Json())
      .Raw("prefill", CountersJson(r.after_prefill.Minus(r.before_prefill),
                                   g.prompt_tokens, prefill_s))
      .Raw("decode", CountersJson(e.counters.Minus(r.after_prefill), decode_steps,
                                  decode_s))
      .Raw("since_load", CountersJson(e.counters, 0, 0))
      .Json();
}

// Microseconds a call (0 without calls).
double Mean(double seconds, int64_t calls) { return calls > 0 ? seconds * 1e6 / calls : 0; }

std::string FaultsJson(const GenerateReport::Faults& f) {
  return Object().Int("minor", f.minor).Int("major", f.major).Json();
}

// Per replayed decode step, in microseconds: where the host's time went
// (model.h DecodeHostTimes); acquire is the routing actions less their
// waits.
std::string DecodeHostJson(const DecodeHostTimes& t) {
  const double per = t.steps > 0 ? 1e6 / static_cast<double>(t.steps) : 0;
  return Object()
      .Int("steps", t.steps)
      .Num("step", t.step_s * per)
      .Num("launch", t.launch_s * per)
      .Num("routing_wait", t.routing_wait_s * per)
      .Num("acquire", (t.routing_s - t.routing_wait_s) * per)
      .Num("host_experts", t.host_experts_s * per)
      .Raw("host_calls", Object()
                             .Int("one", t.host_calls[0])
                             .Int("two_three", t.host_calls[1])
                             .Int("four_up", t.host_calls[2])
                             .Json())
      .Raw("host_call_us_mean", Object()
                                    .Num("one", Mean(t.host_call_s[0], t.host_calls[0]))
                                    .Num("two_three", Mean(t.host_call_s[1], t.host_calls[1]))
                                    .Num("four_up", Mean(t.host_call_s[2], t.host_calls[2]))
                                    .Json())
      .Json();
}

std::string DeviceJson(const GenerateReport& r) {
  Object kinds;
  uint64_t accounted = 0;
  for (const auto& [kind, bytes] : r.stats.device_memory) {
    // by_kind's key for the arena is its published one (results.json files
    // and bench/ read "experts"); the backend and the metric say expert_arena.
    kinds.UInt(kind == "expert_arena" ? "experts" : kind, bytes);
    accounted += bytes;
  }
  // The session's KV/state is allocated per session, outside the model's
  // accounting; on a CPU run there is no device memory at all.
  const bool on_device = !r.stats.device_memory.empty();
  if (on_device) {
    kinds.UInt("kv_state", r.kv_state_bytes);
    accounted += r.kv_state_bytes;
  }
  return Object()
      .Raw("by_kind", kinds.Json())
      .UInt("accounted_bytes", accounted)
      .UInt("in_use_measured_bytes", r.stats.device_in_use_measured)
      // Every device buffer is allocated at load or session creation, so
      // the larger of the two figures after decoding is the run's peak.
      .UInt("peak_bytes", std::max(accounted, r.stats.device_in_use_measured))
      .Int("launches_per_decode", r.stats.launches_per_decode)
      .Bool("decode_graph", r.stats.decode_graph)
      .Raw("decode_host_us", DecodeHostJson(r.stats.decode_host))
      .Json();
}

int64_t KbToBytes(long kb) { return kb < 0 ? -1 : static_cast<int64_t>(kb) * 1024; }

}  // namespace

std::string GenerateReportJson(const GenerateReport& r) {
  const config::ExpertConfig& x = r.expert_options;
  const GenerateResult& g = r.result;
  return Object()
      .Str("model", r.model_path)
      .UInt("model_file_bytes", r.model_file_bytes)
      .Str("device", r.device)
      .Int("threads", r.threads)
      .Int("warmup_tokens", r.warmup_tokens)
      .Str("routing", r.routing)
      .Raw("expert_options", Object()
                                 .Int("slots", x.slots)
                                 .Num("arena_fraction", x.arena_fraction)
                                 .Str("policy", std::string(config::EvictionPolicyName(x.policy)))
                                 .UInt("host_tier_bytes", x.host_tier_bytes)
                                 .Bool("prefetch", x.prefetch)
                                 .Str("miss_policy",
                                      std::string(config::MissPolicyName(x.miss_policy)))
                                 .Int("host_threads", x.host_threads)
                                 .Num("skip", x.skip_threshold)
                                 .Json())
      .Int("prompt_tokens", g.prompt_tokens)
      .Int("generated_tokens", g.generated_tokens)
      .Str("finish", std::string(FinishReasonName(g.finish_reason)))
      .Num("ttft_ms", g.ttft_s * 1e3)
      .Num("prefill_tok_s", g.prefill_tok_per_s)
      .Num("decode_tok_s", g.decode_tok_per_s)
      .Raw("page_faults", Object()
                              .Raw("prefill", FaultsJson(r.prefill_faults))
                              .Raw("decode", FaultsJson(r.decode_faults))
                              .Json())
      .Raw("rss", Object()
                      .Int("peak_bytes", KbToBytes(r.peak_rss_kb))
                      .Int("anon_bytes", KbToBytes(r.rss_anon_kb))
                      .Int("anon_decoding_max_bytes",
                           KbToBytes(r.rss_anon_decoding_max_kb))
                      .Json())
      .UInt("kv_state_bytes", r.kv_state_bytes)
      .Raw("device_memory", DeviceJson(r))
      .Raw("experts", ExpertsJson(r))
      .Json();
}

}  // namespace sluice::tools
