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
// MissSplitter chooses the split per layer from a cost model of the two
// paths, each a measured seconds-per-byte (plus a fixed cost per host call),
// and learns both from what the caller observes (exponentially weighted).
// Plain C++: no CUDA; the CUDA expert stream feeds it timings.
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

#include "absl/status/statusor.h"

namespace sluice::memory {

enum class MissPolicy {
  kCopy,  // every miss is copied into a slot (bit-identical; the default)
  kHost,  // every miss the host can reach is computed by the host CPU
  kCost,  // per layer, the split the cost model predicts finishes first
};

// "copy", "host", "cost"; InvalidArgument naming the valid names otherwise.
absl::StatusOr<MissPolicy> ParseMissPolicy(std::string_view name);
std::string MissPolicyName(MissPolicy p);

struct MissSplitOptions {
  MissPolicy policy = MissPolicy::kCopy;
  // Starting estimates, replaced by observations as they come in.
  double device_bytes_per_s = 40e9;  // PCIe copies into slots
  double host_bytes_per_s = 30e9;    // CPU products from host RAM
  // Per host call: handing the work to the thread pool, the input and
  // output crossing the bus, the graph launch it adds.
  double host_fixed_s = 30e-6;
  // Weight of a new observation in the running estimates, (0, 1].
  double learning_rate = 0.1;
  // kCost: after this many splits in a row that gave the host nothing
  // although it could have taken a miss, the next gives it one, so that
  // an estimate spoilt by a slow call (threads that had gone to sleep, a
  // cold cache) is measured again instead of keeping the host idle for
  // good. 0: never.
  int explore_every = 32;
};

class MissSplitter {
 public:
  explicit MissSplitter(MissSplitOptions options) : o_(options) {}

  // How many of `misses` missed experts of `bytes` each (of which
  // `host_reachable` can be computed by the host) the host should compute:
  // 0 for kCopy; every reachable one for kHost; for kCost the n in
  // [0, host_reachable] minimising max(device time of misses - n, host
  // time of n), the smaller n on a tie (the device path keeps the arena
  // warm and the arithmetic of a resident run), except for the exploring
  // split of MissSplitOptions::explore_every.
  int HostShare(int misses, int host_reachable, uint64_t bytes);

  // Seconds the best split of such a layer would save over copying every
  // miss (0 when the host should take none), by the current estimates; no
  // exploration, nothing counted. A backend weighs it against what keeping
  // the host path ready costs per layer.
  double Saving(int misses, int host_reachable, uint64_t bytes) const;

  // Predicted seconds for the device to copy `bytes`, and for the host to
  // compute experts totalling `bytes` in one call.
  double DeviceSeconds(uint64_t bytes) const;
  double HostSeconds(uint64_t bytes) const;

  // A completed batch of copies / host products: `bytes` took `seconds`.
  // Ignored when bytes or seconds are not positive. A call slower than four
  // times the prediction counts as four times the prediction (one stall
  // does not undo what many calls taught). The device's rate is a running
  // average. The host's fixed cost and rate are the weighted least-
  // squares line through its recent calls (seconds against bytes) once
  // their sizes differ enough to fit one (a call of one expert costs more
  // per byte than one of four: the fixed part is real, and larger when the
  // host's threads had gone to sleep); before that, the fixed cost stays as
  // given and only the rate moves.
  void ObserveDevice(uint64_t bytes, double seconds);
  void ObserveHost(uint64_t bytes, double seconds);

  double device_bytes_per_s() const { return o_.device_bytes_per_s; }
  double host_bytes_per_s() const { return o_.host_bytes_per_s; }
  double host_fixed_s() const { return o_.host_fixed_s; }
  MissPolicy policy() const { return o_.policy; }

 private:
  // The n in [0, reachable] with the least predicted time, and that time.
  std::pair<int, double> Best(int misses, int reachable, uint64_t bytes) const;

  MissSplitOptions o_;
  // Exponentially weighted sums over the host's calls: weight, bytes,
  // seconds, bytes^2, bytes x seconds (bytes in MB to keep them small).
  double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;
  int declined_ = 0;  // kCost splits in a row that could have used the host
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_MISS_SPLIT_H_
