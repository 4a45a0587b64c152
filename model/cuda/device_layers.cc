#include "model/cuda/device_layers.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/quant_matmul.h"

namespace sluice {

absl::StatusOr<cuda::DeviceBuffer> PointerTable(
    const DeviceWeights& w, const std::vector<const uint8_t*>& views,
    cuda::Stream stream) {
  std::vector<const void*> ptrs(views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    ASSIGN_OR_RETURN(ptrs[i], w.Translate(views[i]));
  }
  ASSIGN_OR_RETURN(cuda::DeviceBuffer table,
                   cuda::DeviceBuffer::Create(ptrs.size() * sizeof(void*)));
  RETURN_IF_ERROR(cuda::CopyToDevice(table.data(), ptrs.data(),
                                     ptrs.size() * sizeof(void*), stream));
  RETURN_IF_ERROR(cuda::Synchronize(stream));
  return table;
}

absl::Status BindLayer(const DeviceWeights& w, const LayerDesc& l,
                       int64_t shared_ff, bool stream_experts, cuda::Stream stream,
                       DeviceLayer& d) {
  d.mixer = l.mixer;
  ASSIGN_OR_RETURN(d.mixer_norm, w.Floats(l.mixer_norm));
  ASSIGN_OR_RETURN(d.ffn_norm, w.Floats(l.ffn_norm));
  if (l.mixer == MixerKind::kAttention) {
    ASSIGN_OR_RETURN(d.attn.wq, w.Matrix(l.attn.wq));
    ASSIGN_OR_RETURN(d.attn.wk, w.Matrix(l.attn.wk));
    ASSIGN_OR_RETURN(d.attn.wv, w.Matrix(l.attn.wv));
    ASSIGN_OR_RETURN(d.attn.wo, w.Matrix(l.attn.wo));
    ASSIGN_OR_RETURN(d.attn.q_norm, w.Floats(l.attn.q_norm));
    ASSIGN_OR_RETURN(d.attn.k_norm, w.Floats(l.attn.k_norm));
    ASSIGN_OR_RETURN(d.attn.kv_table,
                     PointerTable(w, {l.attn.wk.data, l.attn.wv.data}, stream));
  } else {
    ASSIGN_OR_RETURN(d.delta.qkv, w.Matrix(l.delta.qkv));
    ASSIGN_OR_RETURN(d.delta.gate, w.Matrix(l.delta.gate));
    ASSIGN_OR_RETURN(d.delta.beta, w.Matrix(l.delta.beta));
    ASSIGN_OR_RETURN(d.delta.alpha, w.Matrix(l.delta.alpha));
    ASSIGN_OR_RETURN(d.delta.out, w.Matrix(l.delta.out));
    ASSIGN_OR_RETURN(d.delta.conv, w.Floats(l.delta.conv));
    ASSIGN_OR_RETURN(d.delta.dt_bias, w.Floats(l.delta.dt_bias));
    ASSIGN_OR_RETURN(d.delta.a, w.Floats(l.delta.a));
    ASSIGN_OR_RETURN(d.delta.norm, w.Floats(l.delta.norm));
    ASSIGN_OR_RETURN(d.delta.beta_alpha_table,
                     PointerTable(w, {l.delta.beta.data, l.delta.alpha.data}, stream));
  }
  const MoeWeights& m = l.moe;
  ASSIGN_OR_RETURN(d.moe.router, w.Matrix(m.router));
  for (const ExpertMatrix* e : {&m.gate, &m.up, &m.down}) {
    if (!cuda::MatMulSupported(e->type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cuda backend: no device kernel for routed experts of type ",
          std::string(TraitsOf(e->type).name)));
    }
  }
  d.moe.gate_type = m.gate.type;
  d.moe.up_type = m.up.type;
  d.moe.down_type = m.down.type;
  std::vector<const uint8_t*> gate_up, down;
  for (int64_t e = 0; e < m.gate.n_expert; ++e) gate_up.push_back(m.gate.expert(e).data);
  for (int64_t e = 0; e < m.up.n_expert; ++e) gate_up.push_back(m.up.expert(e).data);
  for (int64_t e = 0; e < m.down.n_expert; ++e) down.push_back(m.down.expert(e).data);
  d.moe.n_expert = static_cast<int>(m.gate.n_expert);
  if (stream_experts) {
    ASSIGN_OR_RETURN(d.moe.gate_up_table,
                     cuda::DeviceBuffer::Create(gate_up.size() * sizeof(void*)));
    ASSIGN_OR_RETURN(d.moe.down_table,
                     cuda::DeviceBuffer::Create(down.size() * sizeof(void*)));
  } else {
    ASSIGN_OR_RETURN(d.moe.gate_up_table, PointerTable(w, gate_up, stream));
    ASSIGN_OR_RETURN(d.moe.down_table, PointerTable(w, down, stream));
  }
  if (shared_ff > 0) {
    ASSIGN_OR_RETURN(d.moe.shared_gate_inp, w.Floats(m.shared_gate_inp));
    ASSIGN_OR_RETURN(d.moe.shared_gate, w.Matrix(m.shared_gate));
    ASSIGN_OR_RETURN(d.moe.shared_up, w.Matrix(m.shared_up));
    ASSIGN_OR_RETURN(d.moe.shared_down, w.Matrix(m.shared_down));
    ASSIGN_OR_RETURN(d.moe.shared_gate_up_table,
                     PointerTable(w, {m.shared_gate.data, m.shared_up.data}, stream));
  }
  return absl::OkStatus();
}

}  // namespace sluice
