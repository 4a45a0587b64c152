// Turning a LoadModelRequest into what the supervisor needs: the opened and
// validated shards, the public ModelInfo, and the worker's Hello (config,
// shard list, tensor table).
#ifndef SLUICE_DAEMON_MODEL_DESC_H_
#define SLUICE_DAEMON_MODEL_DESC_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "config/expert_config.h"
#include "daemon/config.h"
#include "daemon/defaults.h"
#include "loader/model_files.h"
#include "proto/sluice/v1/sluice.pb.h"
#include "proto/sluice/worker/v1/worker.pb.h"

namespace sluice::daemon {

struct LoadSettings {
  int threads = DefaultThreads();  // used where the request leaves threads at 0
  int context_length = kDefaultContextLength;
  // Used where the request leaves worker_kind UNSPECIFIED (--backend).
  v1::WorkerKind kind = v1::WORKER_KIND_CPU;
  int device = 0;           // CUDA device of a CUDA worker (--device)
  config::ExpertConfig experts;  // --expert_*, --host_tier_bytes (CUDA workers)
  // Checks each opened shard (LoadModel over the API: the --model_dir
  // confinement); its errors are returned unchanged.
  ModelFiles::OpenedCheck check_opened;
  BatchSettings batch;  // --max_sequences, --kv_cache_tokens, --prefill_pacing
};

struct ModelDesc {
  std::unique_ptr<ModelFiles> files;
  v1::ModelInfo info;  // state UNSPECIFIED
  worker::v1::Hello hello;
};

// "qwen3-30b" for ".../qwen3-30b-00001-of-00004.gguf" or ".../qwen3-30b.gguf".
std::string DefaultModelId(const std::string& path);

// Validates the request fields, opens the shards (ModelFiles::Open) and
// reads general.architecture. (Named apart from model/arch.h's
// DescribeModel, which turns a GGUF into an architecture description.) Every error is InvalidArgument whose message
// starts "LoadModel" and names the field or file and the value; a corrupt
// or truncated GGUF reports the loader's message.
absl::StatusOr<ModelDesc> PrepareLoad(const v1::LoadModelRequest& request,
                                        const LoadSettings& defaults);

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_MODEL_DESC_H_
