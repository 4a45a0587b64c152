#include "model/cuda/host_misses.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/status_macros.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<HostMisses>> HostMisses::Create(int64_t n_embd,
                                                                int k,
                                                                int threads) {
  auto h = std::unique_ptr<HostMisses>(new HostMisses());
  h->n_embd_ = n_embd;
  h->k_ = k;
  // Measured on the H200 (docs/STATUS.md): handing the share to another
  // thread as soon as the split was known, to overlap it with issuing the
  // copies, was slower (228 vs 289 tok/s, all misses on the host), and
  // again on the H100 with `cost` (run 25, bench35 at 25%: 438 against 485).
  const int n = threads > 0
                    ? threads
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Its loops come once a layer (a few hundred microseconds apart at 25% of
  // bench35's experts), past the default poll before the workers sleep, so
  // every call paid a wake-up: on the H100 (run 18, docs/BENCHMARKS.md) the
  // cost policy, whose host took one miss a layer now and then, measured
  // the host at 6.4 GB/s; the host policy, calling every layer, at 62.8. A
  // poll 16 times as long keeps the workers awake across a step.
  h->pool_ = std::make_unique<ThreadPool>(n, /*poll_scale=*/16);
  const uint64_t row = n_embd * sizeof(float);
  ASSIGN_OR_RETURN(h->x_, cuda::PinnedBuffer::Create(row));
  ASSIGN_OR_RETURN(h->y_, cuda::PinnedBuffer::Create(k * row));
  std::memset(h->y_.data(), 0, h->y_.bytes());
  ASSIGN_OR_RETURN(h->device_y_, cuda::DeviceBuffer::Create(k * row));
  return h;
}

absl::Status HostMisses::Run(ExpertStream& stream, cuda::Stream compute) {
  float* y = y_.as<float>();
  // Nothing to compute and the device's rows already zero: no copy either
  // (most layers of a step whose split gave the host nothing).
  if (experts_.empty() && !y_dirty_ && device_zero_) return absl::OkStatus();
  if (y_dirty_) std::memset(y, 0, y_.bytes());
  y_dirty_ = !experts_.empty();
  device_zero_ = experts_.empty();
  if (!experts_.empty()) {
    weights_.clear();
    uint64_t bytes = 0;
    for (const HostExpert& h : experts_) {
      weights_.push_back(h.weights);
      for (const Matrix* m : {&h.weights.gate, &h.weights.up, &h.weights.down}) {
        bytes += static_cast<uint64_t>(m->rows) * m->row_bytes;
      }
    }
    out_.resize(weights_.size() * n_embd_);
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(ExpertsOneToken(weights_, x_.as<float>(), out_.data(), pool_.get()));
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    stream.ObserveHost(bytes, took.count());
    const size_t n = experts_.size();
    const int bucket = n == 1 ? 0 : n < 4 ? 1 : 2;
    ++calls_[bucket];
    call_s_[bucket] += took.count();
    for (size_t i = 0; i < experts_.size(); ++i) {
      std::memcpy(y + experts_[i].index * n_embd_, out_.data() + i * n_embd_,
                  n_embd_ * sizeof(float));
    }
  }
  return cuda::CopyToDevice(device_y_.data(), y_.data(), y_.bytes(), compute);
}

}  // namespace sluice
