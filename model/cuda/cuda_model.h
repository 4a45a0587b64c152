// The CUDA backend: an ArchDesc computed on one GPU.
//
// Every tensor of the checkpoint is copied once from the read-only mapping
// into one device allocation (each tensor 256-byte aligned); no host copy is
// made or kept. Routed experts are reached through per-layer device tables
// of per-expert pointers (gate, up, down), so the expert slot cache can
// point them at device slots instead (today they point at the resident
// copy). Decode steps are captured once per sequence state as a CUDA graph
// and replayed; the graph reads the position and the token from device
// memory, so pointer-table changes and new positions need no re-capture.
//
// Linking this library registers the backend with the engine
// (EngineOptions::backend = Backend::kCuda); it is built only where CUDA is
// (--config=nocuda leaves it out).
//
// Thread-safety: Forward calls are serialized by the model (one stream and
// one workspace per model).
#ifndef SLUICE_MODEL_CUDA_CUDA_MODEL_H_
#define SLUICE_MODEL_CUDA_CUDA_MODEL_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "config/expert_config.h"
#include "memory/expert_profile.h"
#include "model/arch.h"
#include "model/model.h"
#include "model/moe.h"

namespace sluice {

class ModelFiles;

struct CudaModelOptions {
  int device = 0;
  // Capture decode steps as a CUDA graph (off: every step launches its
  // kernels one by one; for profiling).
  bool decode_graph = true;
  // Time each section of the forward pass with events (turns the decode
  // graph off); see BackendStats::profile.
  bool profile = false;
  // Routed experts (config/expert_config.h), as EngineOptions::experts:
  // through a device slot cache (model/cuda/expert_stream.h) when slots >= 0
  // or arena_fraction > 0 (slots = ceil(fraction x layers x experts)); -1
  // with no fraction: all resident (decode as one graph); 0 slots: every
  // expert read in place. host_tier_bytes 0 registers the mapping's expert
  // pages (they must fit in RAM); prefetch and a miss policy other than copy
  // apply to streaming decode only.
  config::ExpertConfig experts;
  // Sees each layer's routing (read back from the device; costs a
  // synchronisation per layer, so decode then runs without its graph).
  RoutingObserver* routing_observer = nullptr;
  // Chooses the experts in place of the router (EngineOptions::
  // routing_source): bound at load, asked before each pass.
  RoutingSource* routing_source = nullptr;
  // EngineOptions::expert_warm: warms the arena at load when streaming.
  const memory::ExpertProfile* expert_warm = nullptr;
  // EngineOptions::kv_on_demand: states keep KV in device pages mapped as
  // each sequence grows (model/cuda/device_state.h).
  bool kv_on_demand = false;
  // EngineOptions::load_progress.
  std::function<void(std::string_view phase, uint64_t done, uint64_t total)> load_progress;
};

// Describes the model in `files` and loads it onto the device.
// UNAVAILABLE when there is no such device; RESOURCE_EXHAUSTED when the
// weights do not fit (the message gives the bytes needed and free);
// InvalidArgument for a tensor type the device kernels do not handle (names
// the tensor and type), for shapes past the kernels' limits and for the
// description's errors. deepseek2 runs through the batch pass
// (batch_pass.h), decode steps too, in either K_b layout.
absl::StatusOr<std::unique_ptr<Model>> LoadCudaModel(
    const ModelFiles& files, const CudaModelOptions& options = {});

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_CUDA_MODEL_H_
