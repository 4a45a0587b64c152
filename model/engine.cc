#include "model/engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "config/expert_config.h"
#include "model/cpu_model.h"
#include "loader/model_files.h"
#include "model/tokenizer_gguf.h"

namespace sluice {

namespace {

BackendFactory& CudaFactory() {
  static BackendFactory factory = nullptr;
  return factory;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadModel(const ModelFiles& files,
                                                 const EngineOptions& o) {
  switch (o.backend) {
    case Backend::kCpu:
      return LoadCpuModel(files, {.threads = o.threads,
                                   .routing_observer = o.routing_observer,
                                   .routing_source = o.routing_source,
                                   .expert_skip = o.experts.skip_threshold,
                                   .expert_residency = o.expert_residency});
    case Backend::kCuda: {
      if (CudaFactory() == nullptr) {
        return absl::UnavailableError(
            "engine: no cuda backend in this binary (it was built without "
            "CUDA, --config=nocuda)");
      }
      return CudaFactory()(files, o);
    }
  }
  return absl::InvalidArgumentError("engine: unknown backend");
}

bool RegisterBackend(Backend backend, BackendFactory factory) {
  if (backend == Backend::kCuda) CudaFactory() = factory;
  return true;
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const ModelFiles& files,
                                                       EngineOptions options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "engine: threads = ", options.threads, " must be >= 1"));
  }
  if (options.context_length < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "engine: context_length = ", options.context_length, " must be >= 1"));
  }
  std::unique_ptr<Engine> engine(new Engine());
  engine->options_ = options;
  ASSIGN_OR_RETURN(engine->model_, LoadModel(files, options));
  ASSIGN_OR_RETURN(engine->tokenizer_, TokenizerFromGguf(files.metadata()));
  if (engine->tokenizer_->n_vocab() != engine->model_->info().n_vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        files.shard(0).path, ": tokenizer has ", engine->tokenizer_->n_vocab(),
        " tokens but the model ", engine->model_->info().n_vocab));
  }
  return engine;
}

Engine::~Engine() = default;

absl::StatusOr<std::unique_ptr<Session>> Engine::NewSession() const {
  ASSIGN_OR_RETURN(std::unique_ptr<SequenceState> state,
                   model_->CreateState(options_.context_length));
  return std::unique_ptr<Session>(new Session(*this, std::move(state)));
}

uint64_t Engine::SessionStateBytes() const {
  return model_->StateBytes(options_.context_length);
}

Session::Session(const Engine& engine, std::unique_ptr<SequenceState> state)
    : engine_(engine), state_(std::move(state)) {}

Session::~Session() = default;

int Session::position() const { return state_->position(); }
int Session::context_length() const { return state_->capacity(); }
void Session::Reset() { state_->Reset(); }

absl::Status Session::Prefill(absl::Span<const int32_t> ids,
                              std::vector<float>* last_logits) {
  return engine_.model_->Forward(ids, *state_, LogitRows::kLast, last_logits);
}

absl::Status Session::PrefillAll(absl::Span<const int32_t> ids,
                                 std::vector<float>* all_logits) {
  return engine_.model_->Forward(ids, *state_, LogitRows::kAll, all_logits);
}

absl::Status Session::Decode(int32_t id, std::vector<float>* logits) {
  return engine_.model_->Forward(absl::MakeConstSpan(&id, 1), *state_,
                                 LogitRows::kLast, logits);
}

std::string_view BackendName(Backend backend) {
  switch (backend) {
    case Backend::kCpu:
      return "cpu";
    case Backend::kCuda:
      return "cuda";
  }
  return "unknown";
}

std::optional<Backend> ParseBackend(std::string_view name) {
  if (name == "cpu") return Backend::kCpu;
  if (name == "cuda") return Backend::kCuda;
  return std::nullopt;
}

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

}  // namespace sluice
