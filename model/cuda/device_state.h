// A sequence's KV cache and DeltaNet state in device memory (the CUDA
// backend's SequenceState), plus its decode program.
//
// Layout per block as the CPU's State (model/state.h): k and v
// [capacity][kv_dim] (a latent-attention block: k only, one row of
// kv_lora_rank + n_rot per position; v is null); conv
// [conv_kernel-1][channels]; ssm [v_heads][S][S].
//
// Without a page pool every buffer is one allocation of the whole capacity.
// With one (a worker with a KV pool, sluiced --kv_cache_tokens), each k and
// v is a reserved range (kernels/cuda/device_pages.h) that Commit backs with
// pages up to the positions a pass writes, and Reset gives them back: the
// device then holds KV for the positions the sequences hold, as the fit
// planner counts it.
#ifndef SLUICE_MODEL_CUDA_DEVICE_STATE_H_
#define SLUICE_MODEL_CUDA_DEVICE_STATE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_pages.h"
#include "model/cuda/decode_program.h"
#include "model/model.h"
#include "model/state.h"

namespace sluice {

class DeviceState final : public SequenceState {
 public:
  // Zeroed buffers for `capacity` tokens; KV in ranges of `pages` where
  // given. `owner` identifies the model the state belongs to (checked by
  // its Forward).
  static absl::StatusOr<std::unique_ptr<DeviceState>> Create(
      const void* owner, int capacity, std::vector<BlockStateShape> shapes,
      cuda::Stream stream, std::shared_ptr<cuda::DevicePagePool> pages = nullptr);

  static uint64_t BytesFor(int capacity,
                           const std::vector<BlockStateShape>& shapes) {
    return State::BytesFor(capacity, shapes);
  }

  // With a page pool: waits for the stream, then gives every KV page back.
  void Reset() override;
  uint64_t bytes() const override { return bytes_; }
  uint64_t resident_bytes() const override;

  // Backs positions [0, tokens) of every KV range (with a page pool; a
  // no-op otherwise). RESOURCE_EXHAUSTED when the device has no page left.
  absl::Status Commit(int tokens);
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
  // A model without a decode program (deepseek2): its one-token batch pass
  // on this state, captured at the first resident decode step and replayed
  // after (every value that changes a step is in device memory: the token,
  // the position; the caches' addresses are fixed). `pass_graph_failed`:
  // the capture failed once, the steps run eagerly.
  cuda::Graph& pass_graph() { return pass_graph_; }
  bool& pass_graph_failed() { return pass_graph_failed_; }

 private:
  struct Block {
    float *k = nullptr, *v = nullptr, *conv = nullptr, *ssm = nullptr;
  };
  DeviceState(const void* owner, int capacity, cuda::Stream stream)
      : SequenceState(capacity), owner_(owner), stream_(stream) {}

  const void* owner_;
  cuda::Stream stream_;
  uint64_t bytes_ = 0;  // State::BytesFor(capacity, shapes)
  // Everything without a page pool; the recurrent state only with one.
  cuda::DeviceBuffer buffer_;
  std::vector<Block> blocks_;
  // With a page pool: the KV ranges and each one's bytes per position.
  std::vector<cuda::DeviceRange> kv_;
  std::vector<uint64_t> kv_row_bytes_;
  std::unique_ptr<DecodeProgram> programs_[2];
  cuda::Graph pass_graph_;
  bool pass_graph_failed_ = false;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_DEVICE_STATE_H_
