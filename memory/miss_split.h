// The miss policy: where a decode step's missed experts are computed.
//
// A routed expert that is not in a device slot can be copied into one over
// PCIe (then computed by the device), or computed by the host CPU straight
// from host RAM (the registered mapping or the pinned host tier), with only
// the token's input and the expert's output crossing the bus. Both read the
// expert's bytes once from host RAM, through different engines, so they can
// run at the same time: splitting a layer's misses between them finishes
// sooner than either alone (issue 13: "PCIe, CPU and disk all work at
// once").
//
// MissSplitter owns the whole decision, at two levels:
//   - per layer, how many of its misses the host computes (HostShare), from
//     a cost model of the two paths (PathEstimate: seconds = fixed + bytes /
//     rate, learnt from measured calls);
//   - per decode step, whether the next step runs the host path at all
//     (EndStep): a step with the host path pays for an extra graph segment,
//     a copy of the input back and of the host's rows over and an add in
//     every layer, whatever the host computes, so the path is kept only
//     while the splits are predicted to save more than that.
// Plain C++: no CUDA; the CUDA expert stream feeds it timings and asks it.
//
//   for each decode step:
//     for each layer:  n = splitter.HostShare(misses, reachable, bytes);
//                      ... copies (ObserveDevice), host products (ObserveHost)
//     const bool host_path = splitter.EndStep(n_layers);  // the next step's
//
// Host-computed experts give different rounding than the device's products
// (other kernels, other summation order): only the copy policy keeps the
// logits bit-identical to an all-resident run. The policy is therefore
// opt-in.
//
// Thread-safety: none; one forward pass drives it.
#ifndef SLUICE_MEMORY_MISS_SPLIT_H_
#define SLUICE_MEMORY_MISS_SPLIT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "config/expert_config.h"

namespace sluice::memory {

// The policies and their names are the expert configuration's
// (config/expert_config.h: --expert_miss_policy).
using config::MissPolicy;
using config::MissPolicyName;
using config::ParseMissPolicy;

// One path's time for a call of `bytes`: fixed_s + bytes / bytes_per_s,
// learnt from its recent calls so that a few slow ones cannot drag it down.
//
// Estimator. The last `window` calls (bytes, seconds) are kept. Slow calls
// are the noise here (the host's threads had gone to sleep, page faults, a
// copy queued behind a prefetch): nothing makes a call faster than the
// hardware allows, so the estimate follows the fast calls. After each call:
//   1. the call's seconds are capped at max_observation_ratio times the
//      prediction (so a lone call, the window's first, moves the estimate
//      down by that factor at most);
//   2. the faster part of the window is selected: the keep_fraction share
//      of its calls (rounded up) with the lowest seconds over the current
//      prediction (dividing by the prediction compares calls of different
//      sizes fairly; equal ratios by position in the window);
//   3. with fit_fixed and calls of sizes spread by at least a tenth of their
//      mean, the least-squares line through those calls (seconds against
//      bytes) gives the fixed cost (clamped to [0, the fastest kept call])
//      and the rate; otherwise the fixed cost stays and the rate is what the
//      kept calls' bytes took beyond it (at least a tenth of the fixed cost
//      per call);
//   4. steps 2-3 run twice, the second selecting by the first's line.
// So fewer than (1 - keep_fraction) x window stalls in the window do not
// move the estimate at all, and a lasting slowdown is followed once it fills
// more than that share of the window (64 calls: about one decode step of a
// 48-layer model). A window not yet full trusts what it has: five stalled
// calls of 20x as its first take the estimate to 1/12, and as many normal
// calls after them restore it. Cost: O(window) per call.
class PathEstimate {
 public:
  struct Options {
    double bytes_per_s = 1e9;  // starting estimates, until calls come in
    double fixed_s = 0;
    bool fit_fixed = false;  // learn fixed_s too (else it stays as given)
    int window = 64;            // at least 1
    double keep_fraction = 0.5;  // in (0, 1]
    double max_observation_ratio = 4;  // at least 1
  };
  explicit PathEstimate(Options options);

  // Predicted seconds for a call of `bytes`; 0 for none.
  double Seconds(uint64_t bytes) const;
  // A completed call: `bytes` took `seconds`. Ignored when either is not
  // positive.
  void Observe(uint64_t bytes, double seconds);

  double bytes_per_s() const { return o_.bytes_per_s; }
  double fixed_s() const { return o_.fixed_s; }
  int64_t observations() const { return observed_; }

 private:
  struct Call {
    double mb;  // bytes in MB keeps the fit's sums small
    double seconds;
  };
  double SecondsMb(double mb) const { return o_.fixed_s + mb * 1e6 / o_.bytes_per_s; }
  // Steps 2 and 3 of the estimator, once.
  void Fit();

  Options o_;
  std::vector<Call> calls_;  // a ring of the last o_.window calls
  size_t next_ = 0;
  std::vector<double> ratio_;  // Fit's scratch
  std::vector<size_t> order_;
  int64_t observed_ = 0;
};

struct MissSplitOptions {
  MissPolicy policy = MissPolicy::kCopy;
  // Starting estimates, replaced by observations as they come in.
  double device_bytes_per_s = 40e9;  // PCIe copies into slots
  double host_bytes_per_s = 30e9;    // CPU products from host RAM
  // Per host call: handing the work to the thread pool, the input and
  // output crossing the bus, the graph launch it adds.
  double host_fixed_s = 30e-6;
  // Both paths' PathEstimate: calls kept, the faster share of them that
  // sets the estimate, and the cap on one call (see PathEstimate).
  int window = 64;
  double keep_fraction = 0.5;
  double max_observation_ratio = 4;

  // kCost, per layer: after this many splits in a row that gave the host
  // nothing although it could have taken a miss, the next gives it one, so
  // that the host's estimate keeps being measured while the path is on.
  // 0: never.
  int explore_every = 32;

  // kCost, per decode step. What keeping the host's share ready costs a
  // decode step per layer: the second segment's launch, the input's copy
  // back, the rows' copy over and the add. Measured on the H200 (bench35,
  // locality 0.2, 25%: the cost policy with almost nothing computed on the
  // host ran ~24 us per layer slower than copy).
  double host_path_cost_s = 20e-6;
  // Weight of the newest step's predicted saving in the smoothed saving
  // (0, 1]: one token's routing (how many misses, how many reachable) varies
  // a lot, and switching the graph variant on it would flap.
  double saving_weight = 0.1;
  // Hysteresis: the path turns on when the smoothed saving exceeds
  // on_ratio x the cost, off when it falls below off_ratio x the cost; in
  // between it stays as it is, so a saving near the cost does not switch
  // it every step.
  double on_ratio = 1.5;
  double off_ratio = 1.0;
  // While the path is off, every explore_steps-th step runs it anyway and
  // gives the host at least one miss in every layer that has one it can
  // reach: with the path off the host computes nothing, so an estimate
  // spoilt by stalls would otherwise never be corrected (measured: the host
  // rate stuck at 5 GB/s against ~50 real). One step in 64 costs the path's
  // cost once (about 1 ms for 48 layers). 0: never.
  int explore_steps = 64;
};

class MissSplitter {
 public:
  explicit MissSplitter(MissSplitOptions options);

  // How many of `misses` missed experts of `bytes` each (of which
  // `host_reachable` can be computed by the host) the host should compute,
  // and adds the layer's predicted saving (Saving) to the step's. 0 while
  // host_path() is off; otherwise 0 for kCopy; every reachable one for
  // kHost; for kCost the n in [0, host_reachable] minimising max(device
  // time of misses - n, host time of n), the smaller n on a tie (the device
  // path keeps the arena warm and the arithmetic of a resident run), except
  // that an exploring split gives the host at least one: in a step that
  // EndStep chose to explore, and after explore_every declined splits.
  int HostShare(int misses, int host_reachable, uint64_t bytes);

  // Seconds the best split of such a layer would save over copying every
  // miss (0 when the host should take none, and for kCopy), by the current
  // estimates; no exploration, nothing counted.
  double Saving(int misses, int host_reachable, uint64_t bytes) const;

  // Ends a decode step of `n_layers` layers: whether the next step runs the
  // host path (also host_path() from now). kCopy: never; kHost: always;
  // kCost: the step's predicted saving (summed by HostShare, counted whether
  // the path was on or not) is smoothed (saving_weight; the first step sets
  // it) and compared with n_layers x host_path_cost_s with hysteresis
  // (on_ratio, off_ratio); while off, every explore_steps-th step is on.
  // A caller that never calls it keeps the initial decision: on unless kCopy.
  bool EndStep(int n_layers);
  bool host_path() const { return host_path_; }
  // Whether the step in progress is an exploring one (EndStep turned the
  // path on only to measure the host again).
  bool exploring() const { return exploring_; }

  // The predicted saving summed over this step's HostShare calls so far,
  // and its smoothed value per step (0 before the first EndStep).
  double step_saving_s() const { return step_saving_s_; }
  double smoothed_saving_s() const { return smoothed_saving_s_; }

  // Predicted seconds for the device to copy `bytes`, and for the host to
  // compute experts totalling `bytes` in one call.
  double DeviceSeconds(uint64_t bytes) const { return device_.Seconds(bytes); }
  double HostSeconds(uint64_t bytes) const { return host_.Seconds(bytes); }

  // A completed batch of copies / host products: `bytes` took `seconds`.
  // Ignored when bytes or seconds are not positive. The device is measured
  // by every batch of demand copies that completes (nearly every layer:
  // ties go to the device); the host by every call it makes, which the
  // exploring splits keep coming. Both estimators are PathEstimate; the
  // device's has no fixed cost.
  void ObserveDevice(uint64_t bytes, double seconds) { device_.Observe(bytes, seconds); }
  void ObserveHost(uint64_t bytes, double seconds) { host_.Observe(bytes, seconds); }

  double device_bytes_per_s() const { return device_.bytes_per_s(); }
  double host_bytes_per_s() const { return host_.bytes_per_s(); }
  double host_fixed_s() const { return host_.fixed_s(); }
  MissPolicy policy() const { return o_.policy; }

 private:
  // The n in [0, reachable] with the least predicted time, and that time.
  std::pair<int, double> Best(int misses, int reachable, uint64_t bytes) const;
  // kCost: the split of HostShare once the path is known to be on.
  int CostShare(int misses, int reachable, uint64_t bytes);

  MissSplitOptions o_;
  PathEstimate device_, host_;
  int declined_ = 0;  // kCost splits in a row that could have used the host
  bool host_path_;
  bool on_;  // the hysteresis state (host_path_ also covers exploring steps)
  bool exploring_ = false;
  int off_steps_ = 0;  // steps since the path went off or last explored
  int64_t steps_ = 0;
  double step_saving_s_ = 0;
  double smoothed_saving_s_ = 0;
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_MISS_SPLIT_H_
