// The host CPU's share of a decode step's missed experts (the host and
// cost miss policies, memory/miss_split.h): the token's MoE input comes
// back to pinned memory, the host computes the experts ExpertStream::Acquire
// handed it with the CPU kernels, and their output rows go to the device,
// where the down product adds them before the routing weights apply.
//
// Thread-safety: none; the model runs one step at a time.
#ifndef SLUICE_MODEL_CUDA_HOST_MISSES_H_
#define SLUICE_MODEL_CUDA_HOST_MISSES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "base/thread_pool.h"
#include "kernels/cuda/device.h"
#include "model/cuda/expert_stream.h"
#include "model/moe.h"

namespace sluice {

class HostMisses {
 public:
  // Rows of n_embd for k routed slots, on `threads` threads (0: one per
  // hardware thread; the decode thread takes part).
  static absl::StatusOr<std::unique_ptr<HostMisses>> Create(int64_t n_embd,
                                                            int k, int threads);

  // Where the step's MoE input lands (pinned, n_embd floats).
  void* x() const { return x_.data(); }
  // The host's experts of the layer in flight (filled by Acquire).
  std::vector<HostExpert>* experts() { return &experts_; }
  // The rows the device adds: [k][n_embd], zero for the device's experts.
  const float* device_y() const { return device_y_.as<float>(); }

  // The host's share of this layer is coming (the device is computing up
  // to the routing): wakes the pool's sleeping threads now, so that the
  // share does not pay their wake-up, nor does the cost model measure it.
  void Wake() { pool_->Wake(); }

  // Calls of Run that computed something and their product seconds, by
  // how many experts: 1, 2-3, 4 or more.
  const int64_t* calls() const { return calls_; }
  const double* call_seconds() const { return call_s_; }

  // Computes experts() from x() into the pinned rows (zeros elsewhere),
  // tells `stream` how long it took, and enqueues the rows' copy to
  // device_y() on `compute` (none when device_y() already holds them).
  absl::Status Run(ExpertStream& stream, cuda::Stream compute);

 private:
  HostMisses() = default;

  int64_t n_embd_ = 0;
  int k_ = 0;
  std::unique_ptr<ThreadPool> pool_;
  cuda::PinnedBuffer x_, y_;
  cuda::DeviceBuffer device_y_;
  std::vector<HostExpert> experts_;
  int64_t calls_[3] = {0, 0, 0};
  double call_s_[3] = {0, 0, 0};
  bool y_dirty_ = false;      // y_ holds rows of an earlier step
  bool device_zero_ = false;  // device_y_ holds zeros (after a copy of them)
  // Scratch kept between layers (Run runs once per layer).
  std::vector<ExpertWeights> weights_;
  std::vector<float> out_;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_HOST_MISSES_H_
