// A sequence's KV cache and DeltaNet state in device memory (the CUDA
// backend's SequenceState), plus its decode program.
//
// Layout per block as the CPU's State (model/state.h): k and v
// [capacity][kv_dim] (a latent-attention block: k only, one row of
// kv_lora_rank + n_rot per position; v is null); conv
// [conv_kernel-1][channels]; ssm [v_heads][S][S].
#ifndef SLUICE_MODEL_CUDA_DEVICE_STATE_H_
#define SLUICE_MODEL_CUDA_DEVICE_STATE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/device.h"
#include "model/cuda/decode_program.h"
#include "model/model.h"
#include "model/state.h"

namespace sluice {

class DeviceState final : public SequenceState {
 public:
  // Zeroed buffers for `capacity` tokens. `owner` identifies the model the
  // state belongs to (checked by its Forward).
  static absl::StatusOr<std::unique_ptr<DeviceState>> Create(
      const void* owner, int capacity, std::vector<BlockStateShape> shapes,
      cuda::Stream stream);

  static uint64_t BytesFor(int capacity,
                           const std::vector<BlockStateShape>& shapes) {
    return State::BytesFor(capacity, shapes);
  }

  void Reset() override;
  uint64_t bytes() const override { return buffer_.bytes(); }

  const void* owner() const { return owner_; }
  float* k(int64_t il) const { return blocks_[il].k; }
  float* v(int64_t il) const { return blocks_[il].v; }
  float* conv(int64_t il) const { return blocks_[il].conv; }
  float* ssm(int64_t il) const { return blocks_[il].ssm; }

  // The decode step's program (decode_step.h), built at the first decode:
  // variant 0, or 1 with the host's share of the misses. Null until built.
  std::unique_ptr<DecodeProgram>& decode_program(int variant) {
    return programs_[variant];
  }

 private:
  struct Block {
    float *k = nullptr, *v = nullptr, *conv = nullptr, *ssm = nullptr;
  };
  DeviceState(const void* owner, int capacity, cuda::Stream stream)
      : SequenceState(capacity), owner_(owner), stream_(stream) {}

  const void* owner_;
  cuda::Stream stream_;
  cuda::DeviceBuffer buffer_;
  std::vector<Block> blocks_;
  std::unique_ptr<DecodeProgram> programs_[2];
};

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_DEVICE_STATE_H_
