// Records every MoE block's routing into a routing trace file
// (memory/routing_trace.h), for tools/slotsim. Pass it to the engine as
// EngineOptions::routing_observer (or CpuModelOptions::routing_observer).
//
//   ASSIGN_OR_RETURN(auto rec, RoutingTraceRecorder::Create(path));
//   options.routing_observer = rec.get();
//   ASSIGN_OR_RETURN(auto engine, Engine::Create(files, options));
//   RETURN_IF_ERROR(rec->Start(engine->info()));
//   ... generate ...
//   RETURN_IF_ERROR(rec->Close());
//
// The header needs the model's shape, known only once the engine is built,
// hence Start: routing seen before it (a backend's warm-up pass) is not
// recorded, only counted in dropped(). A record's token index is the
// token's position among those its layer has routed since Start.
//
// Thread-safety: OnRouting may be called from several forward passes at
// once (a mutex serialises the writes); their records then interleave.
// Errors in OnRouting (which cannot return one) are kept, the first one
// wins, and Close returns it.
#ifndef SLUICE_MODEL_ROUTING_TRACE_RECORDER_H_
#define SLUICE_MODEL_ROUTING_TRACE_RECORDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "memory/routing_trace.h"
#include "model/model.h"
#include "model/moe.h"

namespace sluice {

class RoutingTraceRecorder : public RoutingObserver {
 public:
  // Nothing is opened yet: Start creates the file.
  static std::unique_ptr<RoutingTraceRecorder> Create(std::string path) {
    return std::unique_ptr<RoutingTraceRecorder>(
        new RoutingTraceRecorder(std::move(path)));
  }

  // Creates the file with the model's shape. Errors: those of
  // memory::RoutingTraceWriter::Create; FailedPrecondition when started
  // twice.
  absl::Status Start(const ModelInfo& info);

  void OnRouting(int64_t layer, int64_t n_expert_used,
                 absl::Span<const Routing> routes) override;

  // Closes the file; the first error of recording, if any. Later routing
  // is dropped.
  absl::Status Close();

  uint64_t records() const;
  uint64_t dropped() const;

 private:
  explicit RoutingTraceRecorder(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  mutable absl::Mutex mu_;
  std::unique_ptr<memory::RoutingTraceWriter> writer_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> next_token_ ABSL_GUARDED_BY(mu_);  // per layer
  uint64_t records_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_ROUTING_TRACE_RECORDER_H_
