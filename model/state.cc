#include "model/state.h"

#include <algorithm>
#include <utility>

namespace sluice {
namespace {

struct Sizes {
  uint64_t kv;
  uint64_t conv;
  uint64_t ssm;
};

Sizes SizesOf(int capacity, const BlockStateShape& s) {
  Sizes z;
  z.kv = static_cast<uint64_t>(capacity) * s.kv_dim;
  z.conv = s.conv_channels > 0
               ? static_cast<uint64_t>(s.conv_kernel - 1) * s.conv_channels
               : 0;
  z.ssm = static_cast<uint64_t>(s.v_heads) * s.state_size * s.state_size;
  return z;
}

}  // namespace

State::State(int capacity, std::vector<BlockStateShape> shapes)
    : SequenceState(capacity), shapes_(std::move(shapes)) {
  blocks_.resize(shapes_.size());
  for (size_t i = 0; i < shapes_.size(); ++i) {
    const Sizes z = SizesOf(capacity, shapes_[i]);
    blocks_[i].k = DemandPages<float>(z.kv);
    blocks_[i].v = DemandPages<float>(shapes_[i].latent ? 0 : z.kv);
    blocks_[i].conv.assign(z.conv, 0.0f);
    blocks_[i].ssm.assign(z.ssm, 0.0f);
  }
}

void State::Reset() {
  set_position(0);
  for (BlockState& b : blocks_) {
    b.k.Release();
    b.v.Release();
    std::fill(b.conv.begin(), b.conv.end(), 0.0f);
    std::fill(b.ssm.begin(), b.ssm.end(), 0.0f);
  }
}

uint64_t State::bytes() const { return BytesFor(capacity(), shapes_); }

uint64_t State::resident_bytes() const {
  uint64_t n = 0;
  for (const BlockState& b : blocks_) {
    n += b.k.resident_bytes() + b.v.resident_bytes() +
         (b.conv.size() + b.ssm.size()) * sizeof(float);
  }
  return n;
}

uint64_t State::BytesFor(int capacity,
                         const std::vector<BlockStateShape>& shapes) {
  uint64_t floats = 0;
  for (const BlockStateShape& s : shapes) {
    const Sizes z = SizesOf(capacity, s);
    floats += (s.latent ? 1 : 2) * z.kv + z.conv + z.ssm;
  }
  return floats * sizeof(float);
}

}  // namespace sluice
