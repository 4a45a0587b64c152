#include "model/cuda/workspace.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "base/status_macros.h"
#include "kernels/cuda/decode_ops.h"
#include "kernels/cuda/mla_ops.h"
#include "memory/dense_residency.h"

namespace sluice {
namespace {

// Hands out 256-byte aligned pieces of one allocation: a first pass with no
// base counts the bytes, a second assigns the pointers.
class Carver {
 public:
  explicit Carver(uint8_t* base) : base_(base) {}
  template <typename T>
  void Take(T** p, int64_t count) {
    *p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += memory::AlignUp(static_cast<uint64_t>(std::max<int64_t>(count, 1)) * sizeof(T));
  }
  uint64_t used() const { return used_; }

 private:
  uint8_t* base_;
  uint64_t used_ = 0;
};

// The widest dense FFN of d's blocks (0 without dense blocks).
int64_t DenseFf(const ArchDesc& d) {
  int64_t ff = 0;
  for (const LayerDesc& l : d.layers) {
    if (l.ffn == FfnKind::kDense) ff = std::max(ff, l.dense.gate.rows);
  }
  return ff;
}

bool HasMla(const ArchDesc& d) {
  for (const LayerDesc& l : d.layers) {
    if (l.mixer == MixerKind::kLatentAttention) return true;
  }
  return false;
}

// The latent attention's and the dense FFN's buffers, for models with them
// (a qwen model's workspace is unchanged); the widest of their product
// inputs that act_q8 must hold.
int64_t CarveDeepseek(const ArchDesc& d, int64_t n, Carver& c, Workspace& w) {
  int64_t widest_q8 = 0;
  const auto q8 = [](int64_t rows, int64_t cols) {
    return cuda::DecodeQ8MaxBytes(cols, static_cast<int>(rows));
  };
  if (HasMla(d)) {
    const MlaConfig& m = d.mla;
    const int64_t heads = m.n_head, width = m.cache_width();
    c.Take(&w.mla_qa, n * m.q_lora_rank);
    c.Take(&w.mla_q, n * heads * m.head_k);
    c.Take(&w.mla_ckv, n * width);
    c.Take(&w.mla_q_abs, n * heads * width);
    c.Take(&w.mla_o_lat, n * heads * m.kv_lora_rank);
    c.Take(&w.mla_part, cuda::MlaAttendScratchFloats(static_cast<int>(heads),
                                                     static_cast<int>(m.kv_lora_rank), n));
    c.Take(&w.mla_o_heads, n * heads * m.head_v);
    c.Take(&w.mla_o, n * heads * m.head_v);
    c.Take(&w.mla_head_begin, heads + 1);
    c.Take(&w.mla_x_row, n * heads);
    widest_q8 = std::max({widest_q8, q8(n, m.q_lora_rank), q8(n, heads * m.head_v)});
  }
  if (const int64_t ff = DenseFf(d); ff > 0) {
    c.Take(&w.dense_g, n * ff);
    c.Take(&w.dense_u, n * ff);
    widest_q8 = std::max(widest_q8, q8(n, ff));
  }
  return widest_q8;
}

// Logits of a batch with every row asked for are capped at this many bytes.
constexpr uint64_t kLogitsBytes = 256ull << 20;

void Carve(const ArchDesc& d, int64_t n, int64_t logits_rows, Carver& c,
           Workspace& w) {
  const int64_t e = d.info.n_embd;
  const int64_t k = d.moe.n_expert_used;
  const int64_t q_width = d.attn.n_head * d.attn.head_dim * (d.attn.gated ? 2 : 1);
  const int64_t kv = d.attn.n_head_kv * d.attn.head_dim;
  c.Take(&w.ids_in, n);
  c.Take(&w.pos0, 1);
  c.Take(&w.seq_rows, n);
  c.Take(&w.row_seq, n);
  c.Take(&w.seq_states, static_cast<int64_t>(d.layers.size()) * n);
  c.Take(&w.x, n * e);
  c.Take(&w.xn, n * e);
  c.Take(&w.y, n * e);
  c.Take(&w.q, n * q_width);
  c.Take(&w.k, n * kv);
  c.Take(&w.v, n * kv);
  c.Take(&w.attn_o, n * d.attn.n_head * d.attn.head_dim);
  c.Take(&w.qkv, n * d.ssm.conv_channels());
  c.Take(&w.z, n * d.ssm.value_dim());
  c.Take(&w.beta, n * d.ssm.n_v_heads);
  c.Take(&w.g, n * d.ssm.n_v_heads);
  c.Take(&w.ssm_o, n * d.ssm.value_dim());
  c.Take(&w.router_logits, n * d.moe.n_expert);
  c.Take(&w.ids, n * k);
  c.Take(&w.paired_ids, n * 2 * k);
  c.Take(&w.weights, n * k);
  c.Take(&w.group_begin, d.moe.n_expert + 1);
  c.Take(&w.active_experts, d.moe.n_expert);
  c.Take(&w.active_begin, d.moe.n_expert + 1);
  c.Take(&w.entry_token, n * k);
  c.Take(&w.slot_entry, n * k);
  c.Take(&w.long_group_begin, d.moe.n_expert + 1);
  c.Take(&w.long_active_experts, d.moe.n_expert);
  c.Take(&w.long_active_begin, d.moe.n_expert + 1);
  c.Take(&w.overlap_slots, 4 * k);
  c.Take(&w.zeros, 2 * k);
  c.Take(&w.iota, k);
  c.Take(&w.expert_g, n * k * d.moe.expert_ff);
  c.Take(&w.expert_u, n * k * d.moe.expert_ff);
  c.Take(&w.expert_y, n * k * e);
  c.Take(&w.shared_g, n * d.moe.shared_ff);
  c.Take(&w.shared_u, n * d.moe.shared_ff);
  c.Take(&w.shared_y, n * e);
  const int64_t deepseek_q8 = CarveDeepseek(d, n, c, w);
  c.Take(&w.logits, logits_rows * d.info.n_vocab);
  c.Take(&w.decode_counters, Workspace::DecodeCounters(d));
  c.Take(&w.attn_scratch, Workspace::AttendScratchFloats(d));
  c.Take(&w.shared_logit, 1);
  const int64_t widest = std::max({e, static_cast<int64_t>(d.ssm.value_dim()),
                                   static_cast<int64_t>(d.attn.n_head) * d.attn.head_dim});
  c.Take(&w.decode_q8, cuda::DecodeQ8MaxBytes(widest));
  c.Take(&w.decode_q8_h, cuda::DecodeQ8MaxBytes(d.moe.expert_ff, static_cast<int>(k) + 1));
  const auto q8 = [](int64_t rows, int64_t cols) {
    return cuda::DecodeQ8MaxBytes(cols, static_cast<int>(rows));  // bounds either format
  };
  c.Take(&w.xn_q8[0], q8(n, e));
  c.Take(&w.xn_q8[1], q8(n, e));
  c.Take(&w.act_q8, std::max({q8(n * k, d.moe.expert_ff), q8(n, d.moe.shared_ff),
                              q8(n, d.ssm.value_dim()),
                              q8(n, static_cast<int64_t>(d.attn.n_head) * d.attn.head_dim),
                              deepseek_q8}));
}

}  // namespace

int64_t Workspace::DecodeCounters(const ArchDesc& d) {
  return GateUpCountersAt(d) + d.moe.n_expert_used;
}

int64_t Workspace::GateUpCountersAt(const ArchDesc& d) { return 1 + d.attn.n_head; }

int64_t Workspace::AttendScratchFloats(const ArchDesc& d) {
  // AttendDecode's partials at its most splits.
  return d.attn.n_head * cuda::kAttendDecodeMaxSplits * (d.attn.head_dim + 2);
}

absl::Status Workspace::Allocate(const ArchDesc& desc, int64_t max_tokens) {
  const uint64_t row_bytes = static_cast<uint64_t>(desc.info.n_vocab) * sizeof(float);
  logits_rows = std::clamp<int64_t>(kLogitsBytes / row_bytes, 1, max_tokens);
  Carver count(nullptr);
  Carve(desc, max_tokens, logits_rows, count, *this);
  ASSIGN_OR_RETURN(buffer, cuda::DeviceBuffer::Create(count.used()));
  Carver assign(buffer.as<uint8_t>());
  Carve(desc, max_tokens, logits_rows, assign, *this);
  const int64_t k = desc.moe.n_expert_used;
  std::vector<int32_t> zeros(2 * k, 0), iota_v(k);
  std::iota(iota_v.begin(), iota_v.end(), 0);
  RETURN_IF_ERROR(cuda::CopyToDevice(this->zeros, zeros.data(), 2 * k * sizeof(int32_t), nullptr));
  RETURN_IF_ERROR(cuda::CopyToDevice(iota, iota_v.data(), k * sizeof(int32_t), nullptr));
  // The decode kernels' arrival counters start at zero and are left so.
  RETURN_IF_ERROR(cuda::Memset(decode_counters, 0,
                               DecodeCounters(desc) * sizeof(int32_t), nullptr));
  return cuda::Synchronize(nullptr);
}

}  // namespace sluice
