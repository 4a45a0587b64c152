// The CPU backend: an ArchDesc computed on the host, weights read in place
// from the read-only mapping, kernels split over a thread pool.
#ifndef SLUICE_MODEL_CPU_MODEL_H_
#define SLUICE_MODEL_CPU_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/arch.h"
#include "model/model.h"

namespace sluice {

class ExpertResidency;  // model/expert_skip.h
class ModelFiles;

struct CpuModelOptions {
  // Threads taking part in every kernel (the caller's thread included); 1
  // runs everything inline.
  int threads = 1;
  // Receives every MoE block's routing; not owned, may be null, must
  // outlive the model.
  RoutingObserver* routing_observer = nullptr;
  // Chooses every MoE block's experts in place of its router (bound at
  // build: the model's errors are the source's); not owned, may be null.
  RoutingSource* routing_source = nullptr;
  // The lossy mode (model/expert_skip.h; config::ExpertConfig::
  // skip_threshold): 0 is off.
  double expert_skip = 0;
  // Whether an expert's bytes are in RAM, for expert_skip; null: the page
  // cache, asked with mincore (PageCacheResidency). Not owned, must outlive
  // the model.
  const ExpertResidency* expert_residency = nullptr;
};

// Describes the model in `files` (DescribeModel) and builds it on the CPU.
// Errors: those of DescribeModel; InvalidArgument when threads < 1.
absl::StatusOr<std::unique_ptr<Model>> LoadCpuModel(
    const ModelFiles& files, const CpuModelOptions& options = {});

// Builds a described model on the CPU (the description's views must stay
// valid as long as the model).
absl::StatusOr<std::unique_ptr<Model>> MakeCpuModel(
    ArchDesc desc, const CpuModelOptions& options = {});

}  // namespace sluice

#endif  // SLUICE_MODEL_CPU_MODEL_H_
