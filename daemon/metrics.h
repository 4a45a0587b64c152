// Prometheus metrics of the supervisor: the instruments the request path
// updates (histograms, counters) and the text exposition of everything,
// including gauges sampled at scrape time (queue, worker, host memory).
//
// Families (all in the `sluice_` namespace, units as suffixes) are listed in
// docs/OPERATIONS.md.
//
// Thread-safety: all methods may be called concurrently.
#ifndef SLUICE_DAEMON_METRICS_H_
#define SLUICE_DAEMON_METRICS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "absl/synchronization/mutex.h"
#include "proto/sluice/v1/sluice.pb.h"
#include "proto/sluice/worker/v1/worker.pb.h"

namespace sluice::daemon {

class Histogram {
 public:
  // `bounds` are the upper bounds of the buckets, ascending; +Inf is implied.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);

  struct Data {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Data Get() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// Memory figures of the host from /proc/meminfo.
struct HostMemory {
  uint64_t swap_used_bytes = 0;   // SwapTotal - SwapFree
  uint64_t page_cache_bytes = 0;  // Cached
};
HostMemory ReadHostMemory(const std::string& meminfo_path = "/proc/meminfo");

// What the supervisor knows at scrape time.
struct MetricsSnapshot {
  uint64_t requests_running = 0;
  uint64_t requests_waiting = 0;
  v1::WorkerStats worker;
  v1::SlotCacheStats slot_cache;
  // Device memory the worker reported, by kind, as its Ready and Stats
  // carry it (all 0 for a CPU worker or when no worker is up).
  worker::v1::DeviceMemory device_memory;
  // The worker's batch as its last Stats said; all 0 when no worker is up.
  worker::v1::BatchStats batch;
  std::string oom_mode;  // OomModeName()
  std::optional<v1::LoadProgress> loading;  // Supervisor::Loading()
};

class Metrics {
 public:
  Metrics();

  Histogram& time_to_first_token() { return ttft_; }
  Histogram& inter_token_latency() { return itl_; }
  void AddTokens(uint64_t prompt, uint64_t generated);
  // `reason` is a label value: exit, signal, oom_kill.
  void AddRestart(absl::string_view reason);
  // A call refused by the API key check; `code` is "unauthenticated" or
  // "permission_denied" (sluice_auth_failures_total).
  void AddAuthFailure(absl::string_view code);
  // A request or connection the HTTP front refused itself; `port` is "http"
  // or "metrics", `reason` one of kHttpRefusalReasons
  // (sluice_http_refused_total).
  void AddHttpRefusal(absl::string_view port, absl::string_view reason);
  // HttpFrontOptions::on_refused's reasons: every one has a series from the
  // start, so that a dashboard's rate() works before the first refusal.
  static constexpr const char* kHttpRefusalReasons[] = {
      "connections",    "client_connections", "memory_budget", "timeout",
      "body_too_large", "headers_too_large",  "malformed"};
  // outcome: ok, cancelled, deadline_exceeded, unavailable, error, rejected.
  void AddRequest(absl::string_view outcome);

  uint64_t prompt_tokens_total() const { return prompt_tokens_; }
  uint64_t generated_tokens_total() const { return generated_tokens_; }
  uint64_t restarts_total() const;

  // The whole exposition (text format 0.0.4).
  std::string Render(const MetricsSnapshot& snapshot, const HostMemory& host) const;

 private:
  Histogram ttft_;
  Histogram itl_;
  std::atomic<uint64_t> prompt_tokens_{0};
  std::atomic<uint64_t> generated_tokens_{0};
  mutable absl::Mutex mu_;
  std::map<std::string, uint64_t, std::less<>> restarts_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t, std::less<>> requests_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t, std::less<>> auth_failures_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t, std::less<>> http_refused_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_METRICS_H_
