// The one JSON object `generate --json` prints: what the benchmark harness
// (bench/run.sh, bench/report.py) reads from a run. Field names and units
// are documented in docs/BENCHMARKS.md, "generate --json"; keep them in step.
#ifndef SLUICE_TOOLS_GENERATE_REPORT_H_
#define SLUICE_TOOLS_GENERATE_REPORT_H_

#include <cstdint>
#include <string>

#include "config/expert_config.h"
#include "memory/slot_counters.h"
#include "model/engine.h"
#include "model/model.h"

namespace sluice::tools {

// Everything one measured generation produced. The expert counters are the
// cache's cumulative ones at three moments, so the report can give the
// measured request apart from model load / warm-up, and decode apart from
// prefill.
struct GenerateReport {
  std::string model_path;
  std::string device;  // "cpu" or "cuda"
  int threads = 1;
  int warmup_tokens = 0;
  std::string routing = "router";  // --routing (tools/routing_flag.h)
  config::ExpertConfig expert_options;
  GenerateResult result;
  // From /proc/self/status after decoding (kB; -1 when unreadable).
  long peak_rss_kb = -1;
  long rss_anon_kb = -1;
  long rss_anon_decoding_max_kb = -1;
  uint64_t kv_state_bytes = 0;
  uint64_t model_file_bytes = 0;
  // Stats() after the measured generation.
  BackendStats stats;
  // Counters before the measured prefill and right after it (at the first
  // sampled token); stats.experts.counters is the third, after decoding.
  memory::SlotCacheCounters before_prefill;
  memory::SlotCacheCounters after_prefill;
  // The process's page faults (getrusage) in prefill and in decode (split at
  // the first token, as the counters): a first touch of a mapped page the
  // page cache holds is a minor fault, one read from disk a major fault.
  struct Faults {
    long minor = 0, major = 0;
    Faults Minus(const Faults& earlier) const {
      return {minor - earlier.minor, major - earlier.major};
    }
  };
  Faults prefill_faults, decode_faults;
};

// One line of JSON (no trailing newline). Ratios of empty counters are 0;
// non-finite numbers are written as null.
std::string GenerateReportJson(const GenerateReport& report);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_GENERATE_REPORT_H_
