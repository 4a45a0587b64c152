#include "model/engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/thread_pool.h"
#include "loader/model_files.h"
#include "model/tokenizer_gguf.h"

namespace sluice {

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
  if (options.backend == Backend::kCuda) {
    // Until the CUDA forward pass lands (issue 9), say so instead of quietly
    // running a CUDA worker's request on the CPU.
    return absl::UnimplementedError(
        "engine: backend cuda: this binary has no CUDA backend (use --worker_kind=cpu)");
  }
  std::unique_ptr<Engine> engine(new Engine());
  engine->options_ = options;
  ASSIGN_OR_RETURN(engine->model_, LoadModel(files));
  ASSIGN_OR_RETURN(engine->tokenizer_, TokenizerFromGguf(files.metadata()));
  if (engine->tokenizer_->n_vocab() != engine->model_->info().n_vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        files.shard(0).path, ": tokenizer has ", engine->tokenizer_->n_vocab(),
        " tokens but the model ", engine->model_->info().n_vocab));
  }
  engine->pool_ = std::make_unique<kernels::ThreadPool>(options.threads);
  return engine;
}

Engine::~Engine() = default;

std::unique_ptr<Session> Engine::NewSession() const {
  return std::unique_ptr<Session>(
      new Session(*this, model_->CreateState(options_.context_length)));
}

uint64_t Engine::SessionStateBytes() const {
  return model_->StateBytes(options_.context_length);
}

Session::Session(const Engine& engine, std::unique_ptr<State> state)
    : engine_(engine), state_(std::move(state)) {}

Session::~Session() = default;

int Session::position() const { return state_->position(); }
int Session::context_length() const { return state_->capacity(); }
void Session::Reset() { state_->Reset(); }

absl::Status Session::Prefill(absl::Span<const int32_t> ids,
                              std::vector<float>* last_logits) {
  return engine_.model_->Forward(ids, *state_, LogitRows::kLast, last_logits,
                                 engine_.pool_.get());
}

absl::Status Session::PrefillAll(absl::Span<const int32_t> ids,
                                 std::vector<float>* all_logits) {
  return engine_.model_->Forward(ids, *state_, LogitRows::kAll, all_logits,
                                 engine_.pool_.get());
}

absl::Status Session::Decode(int32_t id, std::vector<float>* logits) {
  return engine_.model_->Forward(absl::MakeConstSpan(&id, 1), *state_,
                                 LogitRows::kLast, logits,
                                 engine_.pool_.get());
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
