#include "model/cuda/device_state.h"

#include <utility>

#include "base/status_macros.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<DeviceState>> DeviceState::Create(
    const void* owner, int capacity, std::vector<BlockStateShape> shapes,
    cuda::Stream stream, std::shared_ptr<cuda::DevicePagePool> pages) {
  auto st = std::unique_ptr<DeviceState>(new DeviceState(owner, capacity, stream));
  st->bytes_ = State::BytesFor(capacity, shapes);
  const bool paged = pages != nullptr;
  // With pages the one allocation is the recurrent state alone: the bytes
  // of a state of no positions.
  ASSIGN_OR_RETURN(st->buffer_, cuda::DeviceBuffer::Create(
                                    paged ? State::BytesFor(0, shapes) : st->bytes_));
  float* p = st->buffer_.as<float>();
  // A KV buffer of `floats`: carved from the one allocation, or a range.
  auto kv = [&](int64_t kv_dim) -> absl::StatusOr<float*> {
    const uint64_t floats = static_cast<uint64_t>(capacity) * kv_dim;
    if (!paged) {
      float* at = p;
      p += floats;
      return at;
    }
    ASSIGN_OR_RETURN(cuda::DeviceRange r, cuda::DeviceRange::Reserve(pages, floats * sizeof(float)));
    st->kv_.push_back(std::move(r));
    st->kv_row_bytes_.push_back(static_cast<uint64_t>(kv_dim) * sizeof(float));
    return static_cast<float*>(st->kv_.back().data());
  };
  for (const BlockStateShape& s : shapes) {
    Block b;
    if (!paged || s.kv_dim > 0) {  // (no range for a block without KV)
      ASSIGN_OR_RETURN(b.k, kv(s.kv_dim));
      // A latent-attention block keeps one row per position and no values.
      if (!s.latent) {
        ASSIGN_OR_RETURN(b.v, kv(s.kv_dim));
      }
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

absl::Status DeviceState::Commit(int tokens) {
  for (size_t i = 0; i < kv_.size(); ++i) {
    RETURN_IF_ERROR(kv_[i].Commit(static_cast<uint64_t>(tokens) * kv_row_bytes_[i], stream_));
  }
  return absl::OkStatus();
}

uint64_t DeviceState::resident_bytes() const {
  if (kv_.empty()) return bytes_;
  uint64_t n = buffer_.bytes();
  for (const cuda::DeviceRange& r : kv_) n += r.committed();
  return n;
}

void DeviceState::Reset() {
  set_position(0);
  if (!kv_.empty()) {
    // No kernel may read a page while it is unmapped.
    cuda::Synchronize(stream_).IgnoreError();
    for (cuda::DeviceRange& r : kv_) r.Release();
  }
  cuda::Memset(buffer_.data(), 0, buffer_.bytes(), stream_).IgnoreError();
}

}  // namespace sluice
