#include "model/cuda/device_state.h"

#include "base/status_macros.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<DeviceState>> DeviceState::Create(
    const void* owner, int capacity, std::vector<BlockStateShape> shapes,
    cuda::Stream stream) {
  auto st = std::unique_ptr<DeviceState>(new DeviceState(owner, capacity, stream));
  ASSIGN_OR_RETURN(st->buffer_, cuda::DeviceBuffer::Create(
                                    State::BytesFor(capacity, shapes)));
  float* p = st->buffer_.as<float>();
  for (const BlockStateShape& s : shapes) {
    Block b;
    const int64_t kv = static_cast<int64_t>(capacity) * s.kv_dim;
    b.k = p;
    p += kv;
    // A latent-attention block keeps one row per position and no values.
    if (!s.latent) {
      b.v = p;
      p += kv;
    }
    b.conv = p;
    if (s.conv_channels > 0) p += (s.conv_kernel - 1) * s.conv_channels;
    b.ssm = p;
    p += s.v_heads * s.state_size * s.state_size;
    st->blocks_.push_back(b);
  }
  st->Reset();
  RETURN_IF_ERROR(cuda::Synchronize(stream));
  return st;
}

void DeviceState::Reset() {
  set_position(0);
  cuda::Memset(buffer_.data(), 0, buffer_.bytes(), stream_).IgnoreError();
}

}  // namespace sluice
