#include "clients/top.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace sluice::ctl {
namespace {

double Series(const TopSample& s, const std::string& key) {
  auto it = s.series.find(key);
  return it == s.series.end() ? 0 : it->second;
}

// A rate over the interval, or -1 on the first frame or a counter that went
// back (a restarted worker's counters begin again).
double Rate(const TopSample* prev, const TopSample& cur, double then, double now) {
  if (prev == nullptr || now < then) return -1;
  const double seconds = absl::ToDoubleSeconds(cur.at - prev->at);
  return seconds > 0 ? (now - then) / seconds : -1;
}

std::string Fixed(double v, int decimals, absl::string_view unit = "") {
  if (v < 0) return "-";
  return absl::StrCat(absl::StrFormat("%.*f", decimals, v), unit);
}

std::string Bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return absl::StrFormat(u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
}

std::string Seconds(double s) {
  if (s < 0) return "-";
  if (std::isinf(s)) return ">60 s";
  return s < 1 ? absl::StrFormat("%.0f ms", s * 1000) : absl::StrFormat("%.1f s", s);
}

std::string Percent(double num, double den) {
  return den > 0 ? absl::StrFormat("%.1f%%", 100 * num / den) : "-";
}

// Tokens streamed in the interval: one first token per TTFT observation and
// one per inter-token gap (the completed-token counters move only when a
// request ends).
double StreamedTokens(const TopSample& s) {
  return Series(s, "sluice_time_to_first_token_seconds_count") +
         Series(s, "sluice_inter_token_latency_seconds_count");
}

void AppendLatency(std::string* out, const TopSample* prev, const TopSample& cur,
                   absl::string_view label, absl::string_view histogram) {
  if (prev == nullptr) {
    absl::StrAppend(out, label, "-\n");
    return;
  }
  const std::string count = absl::StrCat(histogram, "_count");
  absl::StrAppend(out, label, "p50 ", Seconds(IntervalQuantile(*prev, cur, histogram, 0.5)),
                  "  p99 ", Seconds(IntervalQuantile(*prev, cur, histogram, 0.99)), "  (n=",
                  Series(cur, count) - Series(*prev, count), ")\n");
}

void AppendExperts(std::string* out, const TopSample* prev, const TopSample& cur) {
  const v1::SlotCacheStats& c = cur.metrics.slot_cache();
  if (!c.streaming()) {
    absl::StrAppend(out, "experts    all resident (no slot cache)\n");
    return;
  }
  const v1::SlotCacheStats* p = prev ? &prev->metrics.slot_cache() : nullptr;
  const double lookups = p ? double(c.lookups()) - double(p->lookups()) : c.lookups();
  const double hits = p ? double(c.hits()) - double(p->hits()) : c.hits();
  const double host = p ? double(c.bytes_host()) - double(p->bytes_host()) : c.bytes_host();
  const double disk = p ? double(c.bytes_disk()) - double(p->bytes_disk()) : c.bytes_disk();
  absl::StrAppend(out, "experts    slots ", c.slots_used(), "/", c.slots_capacity(), "  policy ",
                  c.policy(), "  miss policy ", c.miss_policy().empty() ? "-" : c.miss_policy(),
                  "\n");
  absl::StrAppend(out, "  hits     device ", Percent(hits, lookups), " of ",
                  static_cast<int64_t>(lookups), " lookups;  misses from host ",
                  Percent(host, host + disk), ", from disk ", Percent(disk, host + disk), "\n");
  const auto gbps = [&](uint64_t now, uint64_t then) {
    return Fixed(Rate(prev, cur, then, now) / 1e9, 2, " GB/s");
  };
  absl::StrAppend(out, "  moved    to device ",
                  gbps(c.bytes_streamed(), p ? p->bytes_streamed() : 0), "  from host ",
                  gbps(c.bytes_host(), p ? p->bytes_host() : 0), "  from disk ",
                  gbps(c.bytes_disk(), p ? p->bytes_disk() : 0), "\n");
  std::string layers;
  for (int l = 0; l < c.layer_hit_ratio_size(); ++l) {
    if (l % 12 == 0) absl::StrAppend(&layers, l == 0 ? "  layers   " : "\n           ");
    absl::StrAppend(&layers, absl::StrFormat("%2d:%3.0f%% ", l, 100 * c.layer_hit_ratio(l)));
  }
  if (!layers.empty()) absl::StrAppend(out, layers, " (hit, since start)\n");
}

}  // namespace

std::map<std::string, double> ParsePrometheusText(absl::string_view text) {
  std::map<std::string, double> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line.front() == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    double v = 0;
    if (!absl::SimpleAtod(line.substr(space + 1), &v)) continue;
    out[std::string(line.substr(0, space))] = v;
  }
  return out;
}

TopSample MakeTopSample(absl::Time at, v1::GetMetricsResponse metrics) {
  TopSample s{at, std::move(metrics), {}};
  s.series = ParsePrometheusText(s.metrics.prometheus_text());
  return s;
}

double IntervalQuantile(const TopSample& prev, const TopSample& cur, absl::string_view name,
                        double q) {
  const std::string prefix = absl::StrCat(name, "_bucket{le=\"");
  std::vector<std::pair<double, double>> buckets;  // bound, observations in the interval
  for (auto it = cur.series.lower_bound(prefix);
       it != cur.series.end() && absl::StartsWith(it->first, prefix); ++it) {
    absl::string_view bound = absl::StripPrefix(it->first, prefix);
    bound = absl::StripSuffix(bound, "\"}");
    double b = 0;
    if (bound == "+Inf") {
      b = INFINITY;
    } else if (!absl::SimpleAtod(bound, &b)) {
      continue;
    }
    buckets.push_back({b, it->second - Series(prev, it->first)});
  }
  std::sort(buckets.begin(), buckets.end());
  if (buckets.empty() || buckets.back().second <= 0) return -1;
  const double want = q * buckets.back().second;
  for (const auto& [bound, cumulative] : buckets) {
    if (cumulative >= want) return bound;
  }
  return INFINITY;
}

std::string RenderTopFrame(const TopSample* prev, const TopSample& cur,
                           absl::string_view address) {
  const v1::GetMetricsResponse& m = cur.metrics;
  std::string out;
  const v1::WorkerStats& w = m.worker();
  absl::StrAppend(&out, "sluiced ", address, "   worker ",
                  w.up() ? absl::StrCat("up (pid ", w.pid(), ")") : "down", "   restarts ",
                  w.restarts(), "   ", absl::FormatTime("%H:%M:%S", cur.at, absl::UTCTimeZone()),
                  " UTC\n");
  absl::StrAppend(&out, "requests   running ", m.requests_running(), "   waiting ",
                  m.requests_waiting(), "\n");
  absl::StrAppend(
      &out, "tokens/s   streamed ",
      Fixed(Rate(prev, cur, prev ? StreamedTokens(*prev) : 0, StreamedTokens(cur)), 1),
      "   prompt ",
      Fixed(Rate(prev, cur, prev ? prev->metrics.prompt_tokens_total() : 0,
                 m.prompt_tokens_total()),
            1),
      " (of finished requests)\n");
  AppendLatency(&out, prev, cur, "TTFT       ", "sluice_time_to_first_token_seconds");
  AppendLatency(&out, prev, cur, "ITL        ", "sluice_inter_token_latency_seconds");
  AppendExperts(&out, prev, cur);
  absl::StrAppend(&out, "memory     device dense ",
                  Bytes(Series(cur, "sluice_device_memory_bytes{kind=\"dense\"}")), ", arena ",
                  Bytes(Series(cur, "sluice_device_memory_bytes{kind=\"expert_arena\"}")),
                  ", kv ", Bytes(Series(cur, "sluice_device_memory_bytes{kind=\"kv_state\"}")),
                  ", workspace ",
                  Bytes(Series(cur, "sluice_device_memory_bytes{kind=\"workspace\"}")), "\n");
  absl::StrAppend(&out, "           worker rss anon ", Bytes(w.rss_anon_bytes()), ", file ",
                  Bytes(w.rss_file_bytes()), ", swap ", Bytes(w.swap_bytes()), "\n");
  return out;
}

std::string LoadProgressLine(const v1::LoadProgress& p, bool bar) {
  std::string line;
  const double fraction =
      p.total_bytes() > 0 ? std::min(1.0, double(p.done_bytes()) / p.total_bytes()) : -1;
  if (bar) {
    const int filled = fraction < 0 ? 0 : static_cast<int>(fraction * 20 + 0.5);
    absl::StrAppend(&line, "[", std::string(filled, '#'), std::string(20 - filled, '.'), "] ");
  }
  absl::StrAppend(&line, p.phase());
  if (fraction >= 0) {
    absl::StrAppend(&line, " ", Bytes(p.done_bytes()), " / ", Bytes(p.total_bytes()),
                    absl::StrFormat(" (%.0f%%)", 100 * fraction));
  }
  if (p.bytes_per_second() > 0) {
    absl::StrAppend(&line, absl::StrFormat("  %.2f GB/s", p.bytes_per_second() / 1e9));
  }
  if (p.seconds_left() > 0) absl::StrAppend(&line, absl::StrFormat("  %.0f s left", p.seconds_left()));
  absl::StrAppend(&line, absl::StrFormat("  (%.1f s)", p.elapsed_seconds()));
  return line;
}

}  // namespace sluice::ctl
