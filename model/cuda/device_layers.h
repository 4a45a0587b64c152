// The device side of an ArchDesc's layers: every matrix's device view and
// the pointer tables the grouped and paired products read (the routed
// experts' tables are what the slot cache repoints).
#ifndef SLUICE_MODEL_CUDA_DEVICE_LAYERS_H_
#define SLUICE_MODEL_CUDA_DEVICE_LAYERS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/device.h"
#include "model/arch.h"
#include "kernels/cuda/mla_ops.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/route_ops.h"
#include "model/cuda/device_weights.h"
#include "model/cuda/workspace.h"

namespace sluice {

struct DeviceAttention {
  DeviceMatrix wq, wk, wv, wo;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  cuda::DeviceBuffer kv_table;  // {wk, wv}: one decode launch for both
};

struct DeviceDeltaNet {
  DeviceMatrix qkv, gate, beta, alpha, out;
  const float *conv = nullptr, *dt_bias = nullptr, *a = nullptr, *norm = nullptr;
  cuda::DeviceBuffer beta_alpha_table;  // {beta, alpha}
};

// Multi-head latent attention (model/mla.h). The per-head K_b and V_b
// matrices are read through tables of per-head pointers (the grouped
// products' groups are the heads).
struct DeviceMla {
  DeviceMatrix wq_a, wq_b, wq, wkv_a, wo;
  const float* q_a_norm = nullptr;
  const float* kv_a_norm = nullptr;
  GgmlType k_b_type = GgmlType::kF32, v_b_type = GgmlType::kF32;
  cuda::DeviceBuffer k_b_table, v_b_table;  // [n_head] each
  // The fused attn_kv_b's K_b, unfused to f32 (model/mla.h UnfusedKb);
  // empty for the split layout, whose K_b is the file's.
  cuda::DeviceBuffer k_b_owned;
};

// deepseek2's dense lead blocks: one SwiGLU.
struct DeviceDenseFfn {
  DeviceMatrix gate, up, down;
  cuda::DeviceBuffer gate_up_table;  // {gate, up}: one launch of both
};

struct DeviceMoe {
  // This layer's index among the expert stream's layers (the blocks with
  // routed experts, in order); -1 without routed experts.
  int stream_layer = -1;
  DeviceMatrix router;
  const float* selection_bias = nullptr;  // exp_probs_b, or null
  GgmlType gate_type, up_type, down_type;
  // Per-expert pointer tables on the device: what the grouped products read,
  // so a cache can repoint them. gate_up holds [n_expert] gate pointers then
  // [n_expert] up pointers (a decode step multiplies both in one launch when
  // they share a type); down [n_expert].
  cuda::DeviceBuffer gate_up_table, down_table;
  int n_expert = 0;
  const void* const* gate_table() const { return gate_up_table.as<const void*>(); }
  const void* const* up_table() const { return gate_table() + n_expert; }
  // The shared expert's gate and up pointers, for one launch of both.
  cuda::DeviceBuffer shared_gate_up_table;
  const float* shared_gate_inp = nullptr;  // null: the shared expert is ungated
  DeviceMatrix shared_gate, shared_up, shared_down;
};

struct DeviceLayer {
  MixerKind mixer;
  FfnKind ffn = FfnKind::kMoe;
  const float* mixer_norm = nullptr;
  const float* ffn_norm = nullptr;
  DeviceAttention attn;
  DeviceDeltaNet delta;
  DeviceMla mla;
  DeviceMoe moe;
  DeviceDenseFfn dense;
};

// What every pass over the model reads: the description, the bound layers,
// the head, the kernels' shapes and the shared workspace (owned by the
// model; batch_pass.h and decode_step.h extend it).
struct ModelView {
  const ArchDesc* desc = nullptr;
  const std::vector<DeviceLayer>* layers = nullptr;
  DeviceMatrix token_embd, output;
  const float* output_norm = nullptr;
  cuda::AttentionShape attn;  // kv_capacity set per state
  cuda::DeltaNetShape ssm;
  cuda::MlaShape mla;      // kv_capacity set per state
  cuda::RouteShape route;  // used where routing is not plain (route_ops.h)
  bool plain_routing = true;  // qwen's softmax top-k: ops.h TopK
  Workspace* ws = nullptr;
};

// A device table of the given host views' device addresses, in order.
absl::StatusOr<cuda::DeviceBuffer> PointerTable(
    const DeviceWeights& w, const std::vector<const uint8_t*>& views,
    cuda::Stream stream);
// A device table of the given device addresses, in order.
absl::StatusOr<cuda::DeviceBuffer> DeviceTable(const std::vector<const void*>& ptrs,
                                               cuda::Stream stream);

// Binds layer `l` to its device copies. With `stream_experts` the routed
// experts' tables are allocated but left for the ExpertStream to fill.
// InvalidArgument for a routed-expert type the device kernels do not handle.
// The fused attn_kv_b layout of latent attention gets its K_b unfused to f32
// (the grouped products do not apply a matrix transposed).
absl::Status BindLayer(const DeviceWeights& w, const LayerDesc& l,
                       int64_t shared_ff, bool stream_experts,
                       cuda::Stream stream, DeviceLayer& d);

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_DEVICE_LAYERS_H_
