#include "daemon/metrics.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"

namespace sluice::daemon {
namespace {

void Family(std::string* out, absl::string_view name, absl::string_view type,
            absl::string_view help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

std::string FormatValue(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrFormat("%.9g", v);
}

void Sample(std::string* out, absl::string_view name, double value,
            absl::string_view labels = "") {
  absl::StrAppend(out, name, labels.empty() ? "" : "{", labels,
                  labels.empty() ? "" : "}", " ", FormatValue(value), "\n");
}

void Metric(std::string* out, absl::string_view name, absl::string_view type,
            absl::string_view help, double value) {
  Family(out, name, type, help);
  Sample(out, name, value);
}

std::string FormatBound(double b) { return FormatValue(b); }

void RenderHistogram(std::string* out, absl::string_view name, absl::string_view help,
                     const Histogram::Data& d) {
  Family(out, name, "histogram", help);
  const std::string bucket = absl::StrCat(name, "_bucket");
  for (size_t i = 0; i < d.bounds.size(); ++i) {
    Sample(out, bucket, static_cast<double>(d.cumulative[i]),
           absl::StrCat("le=\"", FormatBound(d.bounds[i]), "\""));
  }
  Sample(out, bucket, static_cast<double>(d.count), "le=\"+Inf\"");
  Sample(out, absl::StrCat(name, "_sum"), d.sum);
  Sample(out, absl::StrCat(name, "_count"), static_cast<double>(d.count));
}

// The load in progress: every phase has a series (1 for the current one),
// all 0 while nothing loads.
void RenderLoad(std::string* out, const std::optional<v1::LoadProgress>& p) {
  Family(out, "sluice_load_phase", "gauge",
         "1 for the phase of the model load in progress (none: every phase 0).");
  for (const char* phase : {"validating", "mapping", "building", "dense", "experts"}) {
    Sample(out, "sluice_load_phase", p && p->phase() == phase ? 1 : 0,
           absl::StrCat("phase=\"", phase, "\""));
  }
  Metric(out, "sluice_load_phase_done_bytes", "gauge",
         "Bytes the current load phase has done.", p ? p->done_bytes() : 0);
  Metric(out, "sluice_load_phase_total_bytes", "gauge",
         "Bytes the current load phase has in all (0: not counted in bytes).",
         p ? p->total_bytes() : 0);
  Metric(out, "sluice_load_phase_seconds_left", "gauge",
         "Time the current load phase has left at its rate so far (-1: unknown).",
         p ? p->seconds_left() : 0);
}

std::vector<double> LatencyBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
          0.5,   1,      2.5,   5,    10,    30,   60};
}

// The expert slot cache as the worker last reported it (all 0 on a CPU
// worker, which never streams), so that a dashboard's series exist before
// the first CUDA worker.
void RenderBatch(std::string* out, const worker::v1::BatchStats& b) {
  Metric(out, "sluice_worker_max_sequences", "gauge",
         "Sequences the worker generates for at once (--max_sequences).", b.max_sequences());
  Family(out, "sluice_worker_sequences", "gauge",
         "Sequences in the worker's batch: running (admitted, holding KV) and waiting.");
  Sample(out, "sluice_worker_sequences", b.running_sequences(), "state=\"running\"");
  Sample(out, "sluice_worker_sequences", b.waiting_sequences(), "state=\"waiting\"");
  Metric(out, "sluice_worker_batch_size", "gauge",
         "Sequences evaluated in the worker's last batched step.", b.batch_size());
  Family(out, "sluice_worker_kv_blocks", "gauge",
         "KV cache blocks of the worker's scheduler, in use and free.");
  const uint32_t used = std::min(b.kv_blocks_used(), b.kv_blocks_total());
  Sample(out, "sluice_worker_kv_blocks", used, "state=\"used\"");
  Sample(out, "sluice_worker_kv_blocks", b.kv_blocks_total() - used, "state=\"free\"");
  Metric(out, "sluice_worker_state_resident_bytes", "gauge",
         "Memory the worker's sequence states hold now: the KV of the positions held and "
         "the recurrent state (a CUDA worker without --kv_cache_tokens: the whole "
         "allocation).",
         b.state_resident_bytes());
  Metric(out, "sluice_worker_prefill_cap_tokens", "gauge",
         "Prompt tokens a step may evaluate beside running streams, sized from measured "
         "steps so that such a step takes at most about 2.5x a step of decodes alone.",
         b.prefill_cap_tokens());
  Metric(out, "sluice_worker_preemptions_total", "counter",
         "Sequences the worker's scheduler preempted (recomputed later) for KV memory.",
         b.preemptions_total());
  Metric(out, "sluice_worker_batch_steps_total", "counter",
         "Batched forward steps the worker ran.", b.steps_total());
  Metric(out, "sluice_worker_step_experts_acquired", "gauge",
         "Routed experts the last step acquired, each distinct expert of a layer once, "
         "summed over the layers (0 where the backend does not count).",
         b.experts_acquired_last_step());
  Metric(out, "sluice_worker_experts_acquired_total", "counter",
         "Routed experts acquired by all steps (per step: each distinct expert of a layer "
         "once); over sluice_worker_batch_steps_total, the experts a step.",
         b.experts_acquired_total());
}

// One counter of a family of counters named PREFIX + name + "_total".
struct NamedCounter {
  const char* name;
  uint64_t value;
  const char* help;
};

void Counters(std::string* out, absl::string_view prefix,
              absl::Span<const NamedCounter> counters) {
  for (const NamedCounter& k : counters) {
    Metric(out, absl::StrCat(prefix, k.name, "_total"), "counter", k.help, k.value);
  }
}

void RenderExpertCache(std::string* out, const v1::SlotCacheStats& c) {
  Metric(out, "sluice_expert_streaming", "gauge",
         "1 while routed experts stream through the device slot cache.", c.streaming() ? 1 : 0);
  Metric(out, "sluice_expert_slots_capacity", "gauge", "Expert slots in the arena.",
         c.slots_capacity());
  Metric(out, "sluice_expert_arena_bytes", "gauge", "Device bytes of the expert slot arena.",
         c.arena_bytes());
  Metric(out, "sluice_expert_host_tier_bytes", "gauge",
         "Host RAM pinned for expert bytes (the host tier).", c.host_tier_bytes());
  const NamedCounter slot[] = {
      {"lookups", c.lookups(), "Expert lookups (one per routed expert of a token and layer)."},
      {"hits", c.hits(), "Expert lookups served from a slot."},
      {"misses", c.misses(),
       "Expert lookups that missed (moved into a slot or computed without one)."},
      {"evictions", c.evictions(), "Experts evicted from a slot."},
      {"exhausted", c.exhausted(), "Lookups of a layer in which some miss found no evictable slot."},
      {"forced", c.forced(), "Misses computed without taking a slot."},
      {"host_computed", c.host_computed(),
       "Misses computed by the host CPU (the miss policy): no slot, no copy."},
      {"prefetches_issued", c.prefetches_issued(), "Experts fetched ahead of demand."},
      {"prefetches_useful", c.prefetches_useful(), "Prefetched experts demanded before eviction."},
      {"prefetches_late", c.prefetches_late(), "Useful prefetches demanded while still in flight."}};
  Counters(out, "sluice_expert_slot_", slot);
  Metric(out, "sluice_expert_bytes_streamed_total", "counter",
         "Expert bytes copied into slots.", c.bytes_streamed());
  Family(out, "sluice_expert_bytes_total", "counter",
         "Bytes of expert misses by the tier they came from.");
  Sample(out, "sluice_expert_bytes_total", c.bytes_host(), "tier=\"host\"");
  Sample(out, "sluice_expert_bytes_total", c.bytes_disk(), "tier=\"disk\"");
  Metric(out, "sluice_expert_bytes_host_computed_total", "counter",
         "Expert bytes the host CPU read to compute misses (in no tier of "
         "sluice_expert_bytes_total).",
         c.bytes_host_computed());
  const NamedCounter tier[] = {
      {"lookups", c.host_tier_lookups(),
       "Lookups of the pinned host tier (inclusive: every device miss; exclusive: the misses "
       "it held)."},
      {"hits", c.host_tier_hits(), "Host tier lookups it served without a disk read."},
      {"demoted", c.host_tier_demoted(),
       "Device victims copied down into the host tier (exclusive tiers)."},
      {"promoted", c.host_tier_promoted(),
       "Experts moved up from the host tier into a device slot, leaving it (exclusive tiers)."}};
  Counters(out, "sluice_expert_host_tier_", tier);
  Metric(out, "sluice_expert_skipped_total", "counter",
         "Routed experts the lossy mode (--expert_skip) did not compute: a small weight and "
         "bytes not in RAM.",
         c.skipped());
  // One series per policy (1 for the one in use; all 0 while nothing
  // streams), so that a dashboard sees a policy change as a step.
  Family(out, "sluice_expert_miss_policy", "gauge",
         "1 for the miss policy in use: where decode misses are computed.");
  for (const char* p : {"copy", "host", "cost"}) {
    Sample(out, "sluice_expert_miss_policy", c.miss_policy() == p ? 1 : 0,
           absl::StrCat("policy=\"", p, "\""));
  }
  Metric(out, "sluice_expert_copy_bytes_per_second_estimate", "gauge",
         "The miss policy's estimate of copies into slots (bytes/s; learnt from transfers).",
         c.copy_bytes_per_second());
  Metric(out, "sluice_expert_host_bytes_per_second_estimate", "gauge",
         "The miss policy's estimate of host CPU products (expert bytes/s; learnt from them).",
         c.host_bytes_per_second());
  if (c.layer_hit_ratio_size() > 0) {
    Family(out, "sluice_expert_slot_layer_hit_ratio", "gauge",
           "Expert slot hit ratio per layer since the worker started.");
    for (int l = 0; l < c.layer_hit_ratio_size(); ++l) {
      Sample(out, "sluice_expert_slot_layer_hit_ratio", c.layer_hit_ratio(l),
             absl::StrCat("layer=\"", l, "\""));
    }
  }
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

Histogram::Data Histogram::Get() const {
  absl::MutexLock lock(&mu_);
  Data d;
  d.bounds = bounds_;
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    d.cumulative.push_back(running);
  }
  d.sum = sum_;
  d.count = count_;
  return d;
}

HostMemory ReadHostMemory(const std::string& meminfo_path) {
  std::ifstream in(meminfo_path);
  std::string line;
  uint64_t swap_total = 0, swap_free = 0, cached = 0;
  while (std::getline(in, line)) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(": "), absl::SkipEmpty());
    uint64_t kib = 0;
    if (f.size() < 2 || !absl::SimpleAtoi(f[1], &kib)) continue;
    if (f[0] == "SwapTotal") swap_total = kib;
    if (f[0] == "SwapFree") swap_free = kib;
    if (f[0] == "Cached") cached = kib;
  }
  HostMemory h;
  h.swap_used_bytes = (swap_total > swap_free ? swap_total - swap_free : 0) * 1024;
  h.page_cache_bytes = cached * 1024;
  return h;
}

Metrics::Metrics() : ttft_(LatencyBounds()), itl_(LatencyBounds()) {
  absl::MutexLock lock(&mu_);
  for (const char* r : {"exit", "signal", "oom_kill", "protocol_error", "hung"}) restarts_[r] = 0;
}

void Metrics::AddTokens(uint64_t prompt, uint64_t generated) {
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
}

void Metrics::AddRestart(absl::string_view reason) {
  absl::MutexLock lock(&mu_);
  ++restarts_[std::string(reason)];
}

void Metrics::AddHttpRefusal(absl::string_view port, absl::string_view reason) {
  absl::MutexLock lock(&mu_);
  ++http_refused_[absl::StrCat("port=\"", port, "\",reason=\"", reason, "\"")];
}

void Metrics::AddAuthFailure(absl::string_view code) {
  absl::MutexLock lock(&mu_);
  ++auth_failures_[std::string(code)];
}

void Metrics::AddRequest(absl::string_view outcome) {
  absl::MutexLock lock(&mu_);
  ++requests_[std::string(outcome)];
}

uint64_t Metrics::restarts_total() const {
  absl::MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [reason, count] : restarts_) n += count;
  return n;
}

std::string Metrics::Render(const MetricsSnapshot& s, const HostMemory& host) const {
  std::string out;
  Metric(&out, "sluice_requests_running", "gauge",
         "Generate requests running on the worker.", s.requests_running);
  Metric(&out, "sluice_requests_waiting", "gauge",
         "Generate requests waiting in the queue.", s.requests_waiting);
  {
    absl::MutexLock lock(&mu_);
    Family(&out, "sluice_requests_total", "counter",
           "Finished Generate requests by outcome.");
    for (const char* o : {"ok", "cancelled", "deadline_exceeded", "unavailable",
                          "rejected", "error"}) {
      auto it = requests_.find(o);
      Sample(&out, "sluice_requests_total", it == requests_.end() ? 0 : it->second,
             absl::StrCat("outcome=\"", o, "\""));
    }
    Family(&out, "sluice_auth_failures_total", "counter",
           "Calls refused for a missing or invalid API key, or a key without the role.");
    for (const char* c : {"unauthenticated", "permission_denied"}) {
      auto it = auth_failures_.find(c);
      Sample(&out, "sluice_auth_failures_total", it == auth_failures_.end() ? 0 : it->second,
             absl::StrCat("code=\"", c, "\""));
    }
    Family(&out, "sluice_http_refused_total", "counter",
           "Connections and requests the HTTP and metrics ports refused before a handler "
           "saw them (caps, memory budget, deadlines, size limits, malformed framing).");
    for (const char* port : {"http", "metrics"}) {
      for (const char* reason : kHttpRefusalReasons) {
        const std::string labels =
            absl::StrCat("port=\"", port, "\",reason=\"", reason, "\"");
        auto it = http_refused_.find(labels);
        Sample(&out, "sluice_http_refused_total", it == http_refused_.end() ? 0 : it->second,
               labels);
      }
    }
    Family(&out, "sluice_worker_restarts_total", "counter",
           "Unexpected worker exits followed by a restart, by reason.");
    for (const auto& [reason, count] : restarts_) {
      Sample(&out, "sluice_worker_restarts_total", count,
             absl::StrCat("reason=\"", reason, "\""));
    }
  }
  Metric(&out, "sluice_prompt_tokens_total", "counter",
         "Prompt tokens of completed generations.", prompt_tokens_);
  Metric(&out, "sluice_generated_tokens_total", "counter",
         "Tokens generated by completed generations.", generated_tokens_);
  RenderHistogram(&out, "sluice_time_to_first_token_seconds",
                  "Time from accepting a request to its first token.", ttft_.Get());
  RenderHistogram(&out, "sluice_inter_token_latency_seconds",
                  "Time between consecutive tokens of a stream.", itl_.Get());
  Metric(&out, "sluice_worker_up", "gauge", "1 while a worker is ready to serve.",
         s.worker.up() ? 1 : 0);
  Metric(&out, "sluice_worker_rss_anon_bytes", "gauge",
         "Worker resident anonymous memory (RssAnon).", s.worker.rss_anon_bytes());
  Metric(&out, "sluice_worker_rss_file_bytes", "gauge",
         "Worker resident file-backed memory (RssFile).", s.worker.rss_file_bytes());
  Metric(&out, "sluice_worker_swap_bytes", "gauge", "Worker swapped-out memory (VmSwap).",
         s.worker.swap_bytes());
  Metric(&out, "sluice_worker_major_faults_total", "counter",
         "Major page faults of the current worker process.", s.worker.major_faults());
  Metric(&out, "sluice_host_swap_used_bytes", "gauge",
         "Host swap in use (SwapTotal - SwapFree).", host.swap_used_bytes);
  Metric(&out, "sluice_host_page_cache_bytes", "gauge",
         "Host page cache (Cached in /proc/meminfo).", host.page_cache_bytes);
  RenderBatch(&out, s.batch);
  RenderExpertCache(&out, s.slot_cache);
  // Always all four kinds, 0 on a CPU worker, so that a dashboard's series
  // exist before the first CUDA worker.
  Family(&out, "sluice_device_memory_bytes", "gauge",
         "Device memory held by the worker, by kind.");
  const worker::v1::DeviceMemory& d = s.device_memory;
  for (const auto& [kind, bytes] :
       {std::pair<const char*, uint64_t>{"dense", d.dense_bytes()},
        {"kv_state", d.kv_state_bytes()},
        {"workspace", d.workspace_bytes()},
        {"expert_arena", d.expert_arena_bytes()}}) {
    Sample(&out, "sluice_device_memory_bytes", bytes, absl::StrCat("kind=\"", kind, "\""));
  }
  RenderLoad(&out, s.loading);
  Family(&out, "sluice_oom_containment_mode", "gauge",
         "1 for the out-of-memory containment mode in use.");
  for (const char* m : {"cgroup_v2", "cgroup_v1", "none"}) {
    Sample(&out, "sluice_oom_containment_mode", s.oom_mode == m ? 1 : 0,
           absl::StrCat("mode=\"", m, "\""));
  }
  return out;
}

}  // namespace sluice::daemon
