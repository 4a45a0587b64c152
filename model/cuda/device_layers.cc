#include "model/cuda/device_layers.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/quant_matmul.h"
#include "model/mla.h"

namespace sluice {

absl::StatusOr<cuda::DeviceBuffer> PointerTable(
    const DeviceWeights& w, const std::vector<const uint8_t*>& views,
    cuda::Stream stream) {
  std::vector<const void*> ptrs(views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    ASSIGN_OR_RETURN(ptrs[i], w.Translate(views[i]));
  }
  return DeviceTable(ptrs, stream);
}

absl::StatusOr<cuda::DeviceBuffer> DeviceTable(const std::vector<const void*>& ptrs,
                                               cuda::Stream stream) {
  ASSIGN_OR_RETURN(cuda::DeviceBuffer table,
                   cuda::DeviceBuffer::Create(ptrs.size() * sizeof(void*)));
  RETURN_IF_ERROR(cuda::CopyToDevice(table.data(), ptrs.data(),
                                     ptrs.size() * sizeof(void*), stream));
  RETURN_IF_ERROR(cuda::Synchronize(stream));
  return table;
}

namespace {

absl::Status BindAttention(const DeviceWeights& w, const AttentionWeights& a,
                           cuda::Stream stream, DeviceAttention& d) {
  ASSIGN_OR_RETURN(d.wq, w.Matrix(a.wq));
  ASSIGN_OR_RETURN(d.wk, w.Matrix(a.wk));
  ASSIGN_OR_RETURN(d.wv, w.Matrix(a.wv));
  ASSIGN_OR_RETURN(d.wo, w.Matrix(a.wo));
  ASSIGN_OR_RETURN(d.q_norm, w.Floats(a.q_norm));
  ASSIGN_OR_RETURN(d.k_norm, w.Floats(a.k_norm));
  ASSIGN_OR_RETURN(d.kv_table, PointerTable(w, {a.wk.data, a.wv.data}, stream));
  return absl::OkStatus();
}

absl::Status BindDeltaNet(const DeviceWeights& w, const DeltaNetWeights& n,
                          cuda::Stream stream, DeviceDeltaNet& d) {
  ASSIGN_OR_RETURN(d.qkv, w.Matrix(n.qkv));
  ASSIGN_OR_RETURN(d.gate, w.Matrix(n.gate));
  ASSIGN_OR_RETURN(d.beta, w.Matrix(n.beta));
  ASSIGN_OR_RETURN(d.alpha, w.Matrix(n.alpha));
  ASSIGN_OR_RETURN(d.out, w.Matrix(n.out));
  ASSIGN_OR_RETURN(d.conv, w.Floats(n.conv));
  ASSIGN_OR_RETURN(d.dt_bias, w.Floats(n.dt_bias));
  ASSIGN_OR_RETURN(d.a, w.Floats(n.a));
  ASSIGN_OR_RETURN(d.norm, w.Floats(n.norm));
  ASSIGN_OR_RETURN(d.beta_alpha_table, PointerTable(w, {n.beta.data, n.alpha.data}, stream));
  return absl::OkStatus();
}

// The per-head tables of an ExpertMatrix whose "experts" are heads.
absl::StatusOr<cuda::DeviceBuffer> HeadTable(const DeviceWeights& w, const ExpertMatrix& m,
                                             cuda::Stream stream) {
  if (!cuda::MatMulSupported(m.type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: no device kernel for latent-attention heads of type ",
        std::string(TraitsOf(m.type).name)));
  }
  std::vector<const uint8_t*> heads;
  for (int64_t h = 0; h < m.n_expert; ++h) heads.push_back(m.expert(h).data);
  return PointerTable(w, heads, stream);
}

// The fused attn_kv_b's K_b in the split layout's orientation, f32, in a
// device buffer of its own (UnfusedKb), and its per-head table.
absl::Status BindUnfusedKb(const MlaWeights& m, cuda::Stream stream, DeviceMla& d) {
  ASSIGN_OR_RETURN(const std::vector<float> k_b, UnfusedKb(m));
  const uint64_t head_bytes = static_cast<uint64_t>(m.k_b.rows * m.k_b.cols) * sizeof(float);
  ASSIGN_OR_RETURN(d.k_b_owned, cuda::DeviceBuffer::Create(k_b.size() * sizeof(float)));
  RETURN_IF_ERROR(
      cuda::CopyToDevice(d.k_b_owned.data(), k_b.data(), k_b.size() * sizeof(float), stream));
  std::vector<const void*> heads;
  for (int64_t h = 0; h < m.k_b.n_expert; ++h) {
    heads.push_back(d.k_b_owned.as<uint8_t>() + h * head_bytes);
  }
  d.k_b_type = GgmlType::kF32;
  ASSIGN_OR_RETURN(d.k_b_table, DeviceTable(heads, stream));  // synchronizes
  return absl::OkStatus();
}

absl::Status BindMla(const DeviceWeights& w, const MlaWeights& m, cuda::Stream stream,
                     DeviceMla& d) {
  if (m.wq_a.data != nullptr) {
    ASSIGN_OR_RETURN(d.wq_a, w.Matrix(m.wq_a));
    ASSIGN_OR_RETURN(d.q_a_norm, w.Floats(m.q_a_norm));
    ASSIGN_OR_RETURN(d.wq_b, w.Matrix(m.wq_b));
  } else {
    ASSIGN_OR_RETURN(d.wq, w.Matrix(m.wq));
  }
  ASSIGN_OR_RETURN(d.wkv_a, w.Matrix(m.wkv_a));
  ASSIGN_OR_RETURN(d.kv_a_norm, w.Floats(m.kv_a_norm));
  ASSIGN_OR_RETURN(d.wo, w.Matrix(m.wo));
  d.v_b_type = m.v_b.type;
  if (m.k_b_transposed) {
    RETURN_IF_ERROR(BindUnfusedKb(m, stream, d));
  } else {
    d.k_b_type = m.k_b.type;
    ASSIGN_OR_RETURN(d.k_b_table, HeadTable(w, m.k_b, stream));
  }
  ASSIGN_OR_RETURN(d.v_b_table, HeadTable(w, m.v_b, stream));
  return absl::OkStatus();
}

absl::Status BindDense(const DeviceWeights& w, const DenseFfnWeights& f, cuda::Stream stream,
                       DeviceDenseFfn& d) {
  ASSIGN_OR_RETURN(d.gate, w.Matrix(f.gate));
  ASSIGN_OR_RETURN(d.up, w.Matrix(f.up));
  ASSIGN_OR_RETURN(d.down, w.Matrix(f.down));
  ASSIGN_OR_RETURN(d.gate_up_table, PointerTable(w, {f.gate.data, f.up.data}, stream));
  return absl::OkStatus();
}

absl::Status BindMoe(const DeviceWeights& w, const MoeWeights& m, int64_t shared_ff,
                     bool stream_experts, cuda::Stream stream, DeviceMoe& d) {
  ASSIGN_OR_RETURN(d.router, w.Matrix(m.router));
  if (m.selection_bias != nullptr) {
    ASSIGN_OR_RETURN(d.selection_bias, w.Floats(m.selection_bias));
  }
  for (const ExpertMatrix* e : {&m.gate, &m.up, &m.down}) {
    if (!cuda::MatMulSupported(e->type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cuda backend: no device kernel for routed experts of type ",
          std::string(TraitsOf(e->type).name)));
    }
  }
  d.gate_type = m.gate.type;
  d.up_type = m.up.type;
  d.down_type = m.down.type;
  std::vector<const uint8_t*> gate_up, down;
  for (int64_t e = 0; e < m.gate.n_expert; ++e) gate_up.push_back(m.gate.expert(e).data);
  for (int64_t e = 0; e < m.up.n_expert; ++e) gate_up.push_back(m.up.expert(e).data);
  for (int64_t e = 0; e < m.down.n_expert; ++e) down.push_back(m.down.expert(e).data);
  d.n_expert = static_cast<int>(m.gate.n_expert);
  if (stream_experts) {
    ASSIGN_OR_RETURN(d.gate_up_table, cuda::DeviceBuffer::Create(gate_up.size() * sizeof(void*)));
    ASSIGN_OR_RETURN(d.down_table, cuda::DeviceBuffer::Create(down.size() * sizeof(void*)));
  } else {
    ASSIGN_OR_RETURN(d.gate_up_table, PointerTable(w, gate_up, stream));
    ASSIGN_OR_RETURN(d.down_table, PointerTable(w, down, stream));
  }
  if (shared_ff > 0) {
    if (m.shared_gate_inp != nullptr) {
      ASSIGN_OR_RETURN(d.shared_gate_inp, w.Floats(m.shared_gate_inp));
    }
    ASSIGN_OR_RETURN(d.shared_gate, w.Matrix(m.shared_gate));
    ASSIGN_OR_RETURN(d.shared_up, w.Matrix(m.shared_up));
    ASSIGN_OR_RETURN(d.shared_down, w.Matrix(m.shared_down));
    ASSIGN_OR_RETURN(d.shared_gate_up_table,
                     PointerTable(w, {m.shared_gate.data, m.shared_up.data}, stream));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BindLayer(const DeviceWeights& w, const LayerDesc& l,
                       int64_t shared_ff, bool stream_experts, cuda::Stream stream,
                       DeviceLayer& d) {
  d.mixer = l.mixer;
  d.ffn = l.ffn;
  ASSIGN_OR_RETURN(d.mixer_norm, w.Floats(l.mixer_norm));
  ASSIGN_OR_RETURN(d.ffn_norm, w.Floats(l.ffn_norm));
  switch (l.mixer) {
    case MixerKind::kAttention:
      RETURN_IF_ERROR(BindAttention(w, l.attn, stream, d.attn));
      break;
    case MixerKind::kDeltaNet:
      RETURN_IF_ERROR(BindDeltaNet(w, l.delta, stream, d.delta));
      break;
    case MixerKind::kLatentAttention:
      RETURN_IF_ERROR(BindMla(w, l.mla, stream, d.mla));
      break;
  }
  if (l.ffn == FfnKind::kDense) return BindDense(w, l.dense, stream, d.dense);
  return BindMoe(w, l.moe, shared_ff, stream_experts, stream, d.moe);
}

}  // namespace sluice
