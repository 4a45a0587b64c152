// `sluicectl top`: a live view of one daemon, refreshed every interval.
//
// Each frame comes from two GetMetrics answers, the previous and the current
// one: rates (tokens/s, GB/s, hit rates) are over the interval between them,
// latency quantiles over the requests and tokens of that interval (from the
// Prometheus histograms' bucket deltas), gauges as of now. RenderTopFrame is
// a pure function of the two samples, so the whole screen is tested without a
// daemon; the loop that fetches and redraws is in sluicectl.cc.
#ifndef SLUICE_CLIENTS_TOP_H_
#define SLUICE_CLIENTS_TOP_H_

#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/sluice/v1/sluice.pb.h"

namespace sluice::ctl {

// Prometheus text exposition as "name{labels}" -> value (comments dropped).
std::map<std::string, double> ParsePrometheusText(absl::string_view text);

struct TopSample {
  absl::Time at;
  v1::GetMetricsResponse metrics;
  std::map<std::string, double> series;  // ParsePrometheusText(prometheus_text)
};

TopSample MakeTopSample(absl::Time at, v1::GetMetricsResponse metrics);

// The quantile `q` (0..1) of histogram `name` over the observations made
// between `prev` and `cur`: the upper bound of the first bucket holding it,
// "+Inf" past the last bound. -1 when the interval observed nothing.
double IntervalQuantile(const TopSample& prev, const TopSample& cur, absl::string_view name,
                        double q);

// The screen: plain lines of at most ~100 columns, no terminal codes.
// `prev` is null for the first frame (rates are then shown as "-").
std::string RenderTopFrame(const TopSample* prev, const TopSample& cur,
                           absl::string_view address);

// One line for `sluicectl load`: the phase, its bytes, rate and time left;
// with `bar`, a 20-column bar of the phase's bytes in front (for a terminal).
std::string LoadProgressLine(const v1::LoadProgress& p, bool bar);

}  // namespace sluice::ctl

#endif  // SLUICE_CLIENTS_TOP_H_
