// The inference engine over either backend (CPU or CUDA): the API the worker
// process and the tools (generate, parity) drive.
//
// An Engine owns one loaded model on one backend (EngineOptions::backend:
// the CPU reads weights in place from the read-only mapping held by
// ModelFiles; CUDA keeps the dense weights on the device) and the tokenizer
// built from the GGUF vocabulary. A Session is one sequence: its KV cache and
// recurrent (DeltaNet) state, where the backend computes, and the position
// reached so far.
//
//   ASSIGN_OR_RETURN(auto files, ModelFiles::Open(path));
//   ASSIGN_OR_RETURN(auto engine, Engine::Create(*files, {.threads = 2}));
//   auto session = engine->NewSession();
//   ASSIGN_OR_RETURN(GenerateResult r,
//                    Generate(*session, params, [](int32_t id, std::string_view piece) {
//                      std::cout << piece;
//                      return true;  // keep going
//                    }));
//
// Lifetimes: the ModelFiles passed to Engine::Create must outlive the Engine
// (weights point into its mapping); an Engine must outlive its Sessions.
//
// Thread-safety: Engine's const methods may be called concurrently. A
// Session is not thread-safe: one thread at a time. Several sessions of one
// engine may run on different threads; their kernels share the engine's
// thread pool (CPU) or device (CUDA), so they are correct but do not run
// faster together.
#ifndef SLUICE_MODEL_ENGINE_H_
#define SLUICE_MODEL_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "config/expert_config.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/tokenizer.h"

namespace sluice {

class ExpertResidency;  // model/expert_skip.h
class ModelFiles;
class RoutingObserver;  // model/moe.h
class RoutingSource;    // model/moe.h
namespace memory {
class ExpertProfile;  // memory/expert_profile.h
}  // namespace memory

// Where the forward pass runs.
enum class Backend { kCpu, kCuda };

// "cpu", "cuda".
std::string_view BackendName(Backend backend);
// The backend named `name` ("cpu", "cuda"); nullopt for any other.
std::optional<Backend> ParseBackend(std::string_view name);

struct EngineOptions {
  Backend backend = Backend::kCpu;
  // The CUDA device ordinal (kCuda only).
  int device = 0;
  // CUDA only: time every section of the forward pass with events (decode
  // then runs without its CUDA graph); BackendStats::profile has the sums.
  bool profile = false;
  // Threads taking part in every kernel (the caller's thread included).
  int threads = 1;
  // Tokens one session can hold (prompt plus generated). The KV cache of
  // every session is sized for it up front.
  int context_length = 4096;
  // Sees every MoE block's routing (e.g. a RoutingTraceRecorder); not
  // owned, may be null, must outlive the engine. Called on the forward
  // pass's thread, concurrently when sessions run on several threads.
  RoutingObserver* routing_observer = nullptr;
  // Chooses every MoE block's experts in place of its router (a benchmark
  // replaying a routing trace, model/trace_routing.h; the router's weights
  // are kept). Not owned, may be null, must outlive the engine. Checked
  // against the model when the engine is built.
  RoutingSource* routing_source = nullptr;
  // A usage profile (memory/expert_profile.h) whose most used experts fill
  // the expert arena at load (CUDA, streaming experts; ignored otherwise).
  // Not owned, may be null; read during Create only.
  const memory::ExpertProfile* expert_warm = nullptr;
  // Told how far the load has come (sluice.v1.LoadProgress lists the
  // phases): the CUDA backend reports "dense" and "experts" bytes copied to
  // the device. Called on the loading thread; may be empty.
  std::function<void(std::string_view phase, uint64_t done, uint64_t total)> load_progress;

  // Whether a routed expert's bytes are in RAM, for experts.skip_threshold
  // (the CPU backend); null: the page cache (mincore). A test or a quality
  // measurement gives its own. Not owned, must outlive the engine.
  const ExpertResidency* expert_residency = nullptr;

  // Where routed experts live (CUDA only; the CPU reads them in place),
  // and the lossy mode's skip_threshold (the CPU only; CUDA refuses it).
  // Built as given: slots -1 with no fraction keeps every expert resident.
  // The CUDA worker and the tools run the fit planner on it first
  // (memory/expert_plan.h), which turns what is left to it into numbers.
  config::ExpertConfig experts;
  // KV memory on demand: a sequence's KV cache is backed only for the
  // positions it holds (CUDA: device pages mapped as it grows and given
  // back when it ends, kernels/cuda/device_pages.h; the CPU always keeps
  // KV in demand pages). Set where a KV pool bounds the positions held
  // (sluiced --kv_cache_tokens) and the fit planner counts the pool, not
  // sequences x context.
  bool kv_on_demand = false;
};

class Session;

class Engine {
 public:
  // Reads the architecture's hyper-parameters, binds and shape-checks every
  // tensor, builds the tokenizer. Errors: InvalidArgument for an unsupported
  // general.architecture, a missing or malformed key, a tensor of the wrong
  // shape or type (messages name the file, the key or tensor and the value);
  // InvalidArgument when options.threads < 1 or options.context_length < 1.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const ModelFiles& files, EngineOptions options);

  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ModelInfo& info() const { return model_->info(); }
  const Model& model() const { return *model_; }
  const EngineOptions& options() const { return options_; }

  // A fresh sequence at position 0 with zeroed state, allocated where the
  // backend computes (RESOURCE_EXHAUSTED when device memory runs out).
  absl::StatusOr<std::unique_ptr<Session>> NewSession() const;

  // Bytes one session allocates for its KV cache and recurrent state.
  uint64_t SessionStateBytes() const;


 private:
  friend class Session;
  Engine() = default;

  EngineOptions options_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

// A backend other than the CPU is linked into a binary only where it is
// built (the CUDA one under model/cuda); linking it registers its factory.
using BackendFactory = absl::StatusOr<std::unique_ptr<Model>> (*)(
    const ModelFiles& files, const EngineOptions& options);

// The model of `files` on options.backend, as Engine::Create builds it
// (options.threads applies to the CPU). UNAVAILABLE when the backend is not
// in this binary or has no device; the backend's load errors otherwise.
absl::StatusOr<std::unique_ptr<Model>> LoadModel(const ModelFiles& files,
                                                 const EngineOptions& options);

// Registers `factory` for `backend` (call from a static initializer).
// Returns true, so it can initialize a namespace-scope constant.
bool RegisterBackend(Backend backend, BackendFactory factory);

class Session {
 public:
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Evaluates `ids` as one batch at positions position()..position()+n-1 and
  // writes the logits of the last one (n_vocab floats) into *last_logits
  // (resized). Errors: InvalidArgument for an empty batch or an id outside
  // [0, n_vocab); OutOfRange when position() + ids.size() exceeds the
  // context length (the session is left unchanged).
  absl::Status Prefill(absl::Span<const int32_t> ids,
                       std::vector<float>* last_logits);

  // As Prefill, but *all_logits receives every row: ids.size() x n_vocab,
  // row-major.
  absl::Status PrefillAll(absl::Span<const int32_t> ids,
                          std::vector<float>* all_logits);

  // One token at position(); same errors as Prefill.
  absl::Status Decode(int32_t id, std::vector<float>* logits);

  // Tokens evaluated so far (the position the next token takes).
  int position() const;
  int context_length() const;

  // Back to position 0 with zeroed state (reuses the allocation).
  void Reset();

  const Engine& engine() const { return engine_; }
  SequenceState& state() { return *state_; }

 private:
  friend class Engine;
  Session(const Engine& engine, std::unique_ptr<SequenceState> state);

  const Engine& engine_;
  std::unique_ptr<SequenceState> state_;
};

struct GenerateParams {
  // Fed as one prefill batch on top of what the session already holds.
  std::vector<int32_t> prompt;
  SamplerParams sampler;
  // Generated tokens at most (the eos or stop token included).
  int max_tokens = 256;
  // Generation ends when the decoded text contains one of these; the stop
  // string and anything after it are not passed to the callback.
  std::vector<std::string> stop;
  // End at the vocabulary's end-of-generation tokens (eos, eot).
  bool stop_at_eos = true;
};

enum class FinishReason { kLength, kStop, kEos, kCancelled };

// "length", "stop", "eos", "cancelled".
std::string_view FinishReasonName(FinishReason reason);

struct GenerateResult {
  int prompt_tokens = 0;
  int generated_tokens = 0;
  FinishReason finish_reason = FinishReason::kLength;
  // Seconds from the call to the first sampled token (prefill included).
  double ttft_s = 0;
  double prefill_tok_per_s = 0;
  // Decode steps after the first token, per second (0 when fewer than two
  // tokens were generated).
  double decode_tok_per_s = 0;
};

// The text side of one generation, shared by Generate and the worker's
// batched path (worker/batch) so that a sequence streams the same text
// either way: detokenizes sampled tokens into whole UTF-8 characters, holds
// back what could be the start of a stop string, and says when a token ends
// the output (an end-of-generation token, a stop string, a grammar that
// allows nothing more). Copies what it needs of `params`; `tokenizer` must
// outlive it. Not thread-safe.
class OutputText {
 public:
  OutputText(const Tokenizer& tokenizer, const GenerateParams& params);
  ~OutputText();
  OutputText(OutputText&&);
  OutputText& operator=(OutputText&&) = delete;

  struct Piece {
    // Released with this token (see TokenCallback).
    std::string text;
    // Set when this token ends the output: kEos or kStop.
    std::optional<FinishReason> finish;
  };
  // `id` was sampled and accepted. `grammar_finished`: the request's grammar
  // allows nothing more (Sampler::GrammarFinished()); `last`: no token
  // follows whatever this one is (max_tokens, the context), so everything
  // held back is released with it.
  Piece Push(int32_t id, bool grammar_finished, bool last);

 private:
  class StopMatcher;
  const Tokenizer& tokenizer_;
  const bool stop_at_eos_;
  std::unique_ptr<TokenStreamDecoder> decoder_;
  std::unique_ptr<StopMatcher> stops_;
};

// Called once per generated token with its id and the text released with it
// (valid UTF-8; empty while a multi-byte character or a possible start of a
// stop string is held back; an end-of-generation token contributes no text
// of its own, but its call carries whatever was still held back). Return
// false to cancel.
using TokenCallback = std::function<bool(int32_t id, std::string_view piece)>;

// Prefills params.prompt, then samples and decodes until max_tokens, a stop
// string, an end-of-generation token or cancellation. The session keeps
// everything evaluated (the final sampled token is not fed back).
// Errors: those of Prefill/Decode (OutOfRange when the prompt does not fit;
// when generation reaches the context length it ends with kLength instead);
// InvalidArgument for an empty prompt or max_tokens < 0.
absl::StatusOr<GenerateResult> Generate(Session& session,
                                        const GenerateParams& params,
                                        const TokenCallback& on_token);

}  // namespace sluice

#endif  // SLUICE_MODEL_ENGINE_H_
