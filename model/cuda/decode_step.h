// The decode step of an ArchDesc on the GPU, built as a DecodeProgram from
// the fused decode kernels (kernels/cuda/decode_ops.h). Per block:
//
//   DeltaNet   in (norm + qkv, z, beta, alpha), prep (gates, conv, L2
//              norms), scan, out
//   attention  in (norm + q, k, v), prepare (q/k norm, RoPE, cache row),
//              core (split over the keys), out
//   MoE        route (residual + norm + router + top-k + the shared
//              expert's SwiGLU pair and gate logit), gate_up, down (routed
//              and shared down products, routing weights: the block's
//              output, which the next block's first launch adds)
//
// plus the embedding lookup and the head: 7 launches a block. Where the host
// must see a layer's routing (streaming experts, a routing observer) the
// program is cut after the route op; with the host's share of the misses
// it is cut again after gate_up (the host computes while the device runs
// gate_up, and the down product adds the host's rows), or, with
// HostRowsLateEnabled, after down (the host computes while the device runs
// gate_up and down, and a launch of its own adds the host's rows).
#ifndef SLUICE_MODEL_CUDA_DECODE_STEP_H_
#define SLUICE_MODEL_CUDA_DECODE_STEP_H_

#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"
#include "model/arch.h"
#include "model/cuda/decode_program.h"
#include "model/cuda/device_layers.h"
#include "model/cuda/device_state.h"
#include "model/cuda/workspace.h"

namespace sluice {

class HostMisses;

// What a decode program reads, owned by the model.
struct DecodeContext : ModelView {
  // Cut after each layer's routing: the routing (ids, then weights when
  // observing) is copied to `host_routing` and `routed` recorded.
  bool cut_routing = false;
  bool copy_weights = false;
  // Decode prefetch: the next layer's router on this layer's input; its
  // ids go to host_routing + 2k.
  bool prefetch = false;
  int32_t* host_routing = nullptr;
  cuda::Event routed = nullptr;
  // Forced routing (RoutingSource): pinned [n_layer][k] ids the host
  // writes before each step; the step copies layer il's over the router's
  // choice (its weights stay). Null: the router's.
  const int32_t* forced = nullptr;
};

// Whether the fused kernels handle the model (else decode runs the batch
// path one token at a time); the reason when not.
absl::Status DecodeStepSupported(const DecodeContext& c);

// The program of one decode step on `st`; `host` (not null) adds the host
// share's cut, input copy and rows.
absl::StatusOr<DecodeProgram> BuildDecodeProgram(const DecodeContext& c,
                                                 DeviceState& st,
                                                 HostMisses* host);

// Where the host's rows are added (above): SLUICE_CUDA_HOST_ROWS_LATE=1
// turns the late add on (read once), SetHostRowsLateEnabled at any time
// (tests; programs built after it follow it).
bool HostRowsLateEnabled();
void SetHostRowsLateEnabled(bool enabled);

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_DECODE_STEP_H_
