// From the public request messages to the engine's parameters, with the
// validation the API promises (out-of-range values are InvalidArgument
// naming the field and value, never clamped).
#ifndef SLUICE_WORKER_REQUEST_CONVERT_H_
#define SLUICE_WORKER_REQUEST_CONVERT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/engine.h"
#include "model/grammar.h"
#include "model/sampler.h"
#include "model/tokenizer.h"
#include "proto/sluice/v1/sluice.pb.h"

namespace sluice::worker {

absl::StatusOr<SamplerParams> ToSamplerParams(const sluice::v1::SamplingParams& sampling);

// The prompt as token ids: raw text (no BOS), ids checked against the
// vocabulary, or chat messages formatted with ChatML.
absl::StatusOr<std::vector<int32_t>> PromptIds(const Tokenizer& tokenizer,
                                               const sluice::v1::GenerateRequest& request);

// The grammar of `format` bound to `tokenizer`'s vocabulary; null when no
// format is set. Compiled grammars (and their mask caches) are kept for the
// last few distinct formats, so an agent that sends the same schema every
// turn compiles it once. InvalidArgument "GenerateRequest.format: ..." naming
// the rule or JSON Schema keyword it cannot compile.
absl::StatusOr<std::shared_ptr<const TokenGrammar>> OutputGrammar(
    const Tokenizer& tokenizer, const sluice::v1::OutputFormat& format);

// The whole GenerateParams (the grammar of request.format included); max_tokens 0 means "until the context is full".
absl::StatusOr<GenerateParams> ToGenerateParams(const Tokenizer& tokenizer,
                                                int context_length,
                                                const sluice::v1::GenerateRequest& request);

sluice::v1::FinishReason ToProtoFinishReason(FinishReason reason);

// Usage and timings of a finished generation.
sluice::v1::GenerateDone ToGenerateDone(const GenerateResult& result);

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_REQUEST_CONVERT_H_
