#include "memory/miss_split.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::memory {

PathEstimate::PathEstimate(Options options) : o_(options) {
  o_.window = std::max(o_.window, 1);
  if (!(o_.keep_fraction > 0) || o_.keep_fraction > 1) o_.keep_fraction = 1;
  o_.max_observation_ratio = std::max(o_.max_observation_ratio, 1.0);
  calls_.reserve(o_.window);
}

double PathEstimate::Seconds(uint64_t bytes) const {
  if (bytes == 0) return 0;
  return SecondsMb(static_cast<double>(bytes) / 1e6);
}

void PathEstimate::Observe(uint64_t bytes, double seconds) {
  if (bytes == 0 || !(seconds > 0)) return;
  const Call c{static_cast<double>(bytes) / 1e6,
               std::min(seconds, o_.max_observation_ratio * Seconds(bytes))};
  if (calls_.size() < static_cast<size_t>(o_.window)) {
    calls_.push_back(c);
  } else {
    calls_[next_] = c;
    next_ = (next_ + 1) % calls_.size();
  }
  ++observed_;
  // The second pass selects the faster calls by the first pass's line,
  // which fits the window better than the estimate before this call.
  Fit();
  Fit();
}

void PathEstimate::Fit() {
  const size_t n = calls_.size();
  ratio_.resize(n);
  order_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    ratio_[i] = calls_[i].seconds / SecondsMb(calls_[i].mb);
    order_[i] = i;
  }
  const size_t kept = std::max<size_t>(
      1, static_cast<size_t>(std::ceil(o_.keep_fraction * static_cast<double>(n))));
  // Exactly `kept` calls however many tie: equal ratios in window order.
  std::nth_element(order_.begin(), order_.begin() + (kept - 1), order_.end(),
                   [&](size_t a, size_t b) {
                     return std::pair(ratio_[a], a) < std::pair(ratio_[b], b);
                   });
  double w = 0, x = 0, y = 0, xx = 0, xy = 0, work = 0;
  double fastest = std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < kept; ++j) {
    const Call& c = calls_[order_[j]];
    w += 1;
    x += c.mb;
    y += c.seconds;
    xx += c.mb * c.mb;
    xy += c.mb * c.seconds;
    work += std::max(c.seconds - o_.fixed_s, o_.fixed_s / 10);
    fastest = std::min(fastest, c.seconds);
  }
  if (o_.fit_fixed && w >= 2) {
    const double mx = x / w, my = y / w;
    const double var = xx / w - mx * mx;
    const double cov = xy / w - mx * my;
    // Sizes spread by at least a tenth of their mean, and seconds growing
    // with bytes: the line.
    if (var > 0.01 * mx * mx && cov > 0) {
      const double slope = cov / var;  // seconds per MB
      o_.bytes_per_s = 1e6 / slope;
      o_.fixed_s = std::clamp(my - slope * mx, 0.0, fastest);
      return;
    }
  }
  // What the kept calls took beyond the fixed cost is the rate; a call
  // faster than the fixed cost says the rate is at least what a tenth of it
  // would give.
  o_.bytes_per_s = x * 1e6 / work;
}

namespace {

PathEstimate::Options EstimateOptions(const MissSplitOptions& o,
                                      double bytes_per_s, double fixed_s,
                                      bool fit_fixed) {
  return {.bytes_per_s = bytes_per_s,
          .fixed_s = fixed_s,
          .fit_fixed = fit_fixed,
          .window = o.window,
          .keep_fraction = o.keep_fraction,
          .max_observation_ratio = o.max_observation_ratio};
}

}  // namespace

MissSplitter::MissSplitter(MissSplitOptions options)
    : o_(options),
      // A copy batch's fixed cost is small beside its bytes (one batched
      // call per layer); the host's hand-off to its threads is not.
      device_(EstimateOptions(options, options.device_bytes_per_s, 0,
                              /*fit_fixed=*/false)),
      host_(EstimateOptions(options, options.host_bytes_per_s,
                            options.host_fixed_s, /*fit_fixed=*/true)),
      host_path_(options.policy != MissPolicy::kCopy),
      on_(host_path_) {}

std::pair<int, double> MissSplitter::Best(int misses, int reachable,
                                         uint64_t bytes) const {
  int best = 0;
  double best_s = DeviceSeconds(static_cast<uint64_t>(misses) * bytes);
  for (int n = 1; n <= reachable; ++n) {
    const double s =
        std::max(DeviceSeconds(static_cast<uint64_t>(misses - n) * bytes),
                 HostSeconds(static_cast<uint64_t>(n) * bytes));
    if (s < best_s) {
      best_s = s;
      best = n;
    }
  }
  return {best, best_s};
}

double MissSplitter::Saving(int misses, int host_reachable,
                            uint64_t bytes) const {
  if (o_.policy == MissPolicy::kCopy || misses <= 0) return 0;
  const int reachable = std::clamp(host_reachable, 0, misses);
  const double all_device = DeviceSeconds(static_cast<uint64_t>(misses) * bytes);
  return all_device - Best(misses, reachable, bytes).second;
}

int MissSplitter::HostShare(int misses, int host_reachable, uint64_t bytes) {
  const int reachable = std::clamp(host_reachable, 0, std::max(misses, 0));
  step_saving_s_ += Saving(misses, reachable, bytes);
  if (!host_path_) return 0;
  switch (o_.policy) {
    case MissPolicy::kCopy:
      return 0;
    case MissPolicy::kHost:
      return reachable;
    case MissPolicy::kCost:
      break;
  }
  return CostShare(misses, reachable, bytes);
}

int MissSplitter::CostShare(int misses, int reachable, uint64_t bytes) {
  const int best = Best(misses, reachable, bytes).first;
  if (best > 0 || reachable == 0) {
    declined_ = 0;
    return best;
  }
  if (exploring_ || (o_.explore_every > 0 && ++declined_ >= o_.explore_every)) {
    declined_ = 0;
    return 1;
  }
  return 0;
}

bool MissSplitter::EndStep(int n_layers) {
  const double saving = std::exchange(step_saving_s_, 0.0);
  exploring_ = false;
  if (o_.policy != MissPolicy::kCost) {
    host_path_ = on_ = o_.policy == MissPolicy::kHost;
    return host_path_;
  }
  smoothed_saving_s_ =
      steps_++ == 0 ? saving
                    : smoothed_saving_s_ +
                          o_.saving_weight * (saving - smoothed_saving_s_);
  const double cost = o_.host_path_cost_s * std::max(n_layers, 0);
  if (on_ && smoothed_saving_s_ < o_.off_ratio * cost) {
    on_ = false;
  } else if (!on_ && smoothed_saving_s_ > o_.on_ratio * cost) {
    on_ = true;
  }
  if (on_) {
    off_steps_ = 0;
  } else if (o_.explore_steps > 0 && ++off_steps_ >= o_.explore_steps) {
    off_steps_ = 0;
    exploring_ = true;
  }
  host_path_ = on_ || exploring_;
  return host_path_;
}

}  // namespace sluice::memory
