#include "memory/miss_split.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sluice::memory {

absl::StatusOr<MissPolicy> ParseMissPolicy(std::string_view name) {
  if (name == "copy") return MissPolicy::kCopy;
  if (name == "host") return MissPolicy::kHost;
  if (name == "cost") return MissPolicy::kCost;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown expert miss policy \"", std::string(name),
      "\" (copy, host or cost)"));
}

std::string MissPolicyName(MissPolicy p) {
  switch (p) {
    case MissPolicy::kCopy:
      return "copy";
    case MissPolicy::kHost:
      return "host";
    case MissPolicy::kCost:
      return "cost";
  }
  return "copy";
}

double MissSplitter::DeviceSeconds(uint64_t bytes) const {
  return static_cast<double>(bytes) / o_.device_bytes_per_s;
}

double MissSplitter::HostSeconds(uint64_t bytes) const {
  if (bytes == 0) return 0;
  return o_.host_fixed_s + static_cast<double>(bytes) / o_.host_bytes_per_s;
}

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
  switch (o_.policy) {
    case MissPolicy::kCopy:
      return 0;
    case MissPolicy::kHost:
      return reachable;
    case MissPolicy::kCost:
      break;
  }
  const int best = Best(misses, reachable, bytes).first;
  if (best > 0 || reachable == 0) {
    declined_ = 0;
  } else if (o_.explore_every > 0 && ++declined_ >= o_.explore_every) {
    declined_ = 0;
    return 1;
  }
  return best;
}

void MissSplitter::ObserveDevice(uint64_t bytes, double seconds) {
  if (bytes == 0 || seconds <= 0) return;
  const double rate = static_cast<double>(bytes) / seconds;
  o_.device_bytes_per_s += o_.learning_rate * (rate - o_.device_bytes_per_s);
}

void MissSplitter::ObserveHost(uint64_t bytes, double seconds) {
  if (bytes == 0 || seconds <= 0) return;
  seconds = std::min(seconds, 4 * HostSeconds(bytes));
  const double mb = static_cast<double>(bytes) / 1e6;
  const double keep = 1 - o_.learning_rate;
  w_ = w_ * keep + 1;
  x_ = x_ * keep + mb;
  y_ = y_ * keep + seconds;
  xx_ = xx_ * keep + mb * mb;
  xy_ = xy_ * keep + mb * seconds;
  const double mx = x_ / w_, my = y_ / w_;
  const double var = xx_ / w_ - mx * mx;
  const double cov = xy_ / w_ - mx * my;
  // Sizes spread by at least a tenth of their mean, and seconds growing
  // with bytes: fit the line.
  if (var > 0.01 * mx * mx && cov > 0) {
    const double slope = cov / var;  // seconds per MB
    o_.host_bytes_per_s = 1e6 / slope;
    o_.host_fixed_s = std::clamp(my - slope * mx, 0.0, my);
    return;
  }
  // What is left after the fixed cost is the rate; a call faster than the
  // fixed cost says the rate is at least what a tenth of it would give.
  const double work = std::max(seconds - o_.host_fixed_s, o_.host_fixed_s / 10);
  const double rate = static_cast<double>(bytes) / work;
  o_.host_bytes_per_s += o_.learning_rate * (rate - o_.host_bytes_per_s);
}

}  // namespace sluice::memory
