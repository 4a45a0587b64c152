// Generate(): the prefill / sample / decode loop with stop strings.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/engine.h"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Text held back because it could be the start of a stop string, and the
// test for a complete one.
class StopMatcher {
 public:
  explicit StopMatcher(const std::vector<std::string>& stops) : stops_(stops) {}

  // Adds `piece`; returns the text that can be released now. Sets *stopped
  // when a stop string appeared (the text before it is released, the rest
  // dropped).
  std::string Push(std::string_view piece, bool* stopped) {
    pending_.append(piece);
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) {
      if (s.empty()) continue;
      cut = std::min(cut, pending_.find(s));
    }
    if (cut != std::string::npos) {
      *stopped = true;
      std::string out = pending_.substr(0, cut);
      pending_.clear();
      return out;
    }
    const size_t keep = LongestStopPrefixSuffix();
    std::string out = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return out;
  }

  std::string Flush() { return std::exchange(pending_, std::string()); }

 private:
  // Length of the longest suffix of pending_ that is a proper prefix of a
  // stop string.
  size_t LongestStopPrefixSuffix() const {
    size_t best = 0;
    for (const std::string& s : stops_) {
      const size_t max_len = std::min(pending_.size(), s.size() - 1);
      for (size_t len = max_len; len > best; --len) {
        if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
          best = len;
          break;
        }
      }
    }
    return best;
  }

  const std::vector<std::string>& stops_;
  std::string pending_;
};

bool IsEndOfGeneration(const Tokenizer& tok, int32_t id) {
  if (id == tok.eos()) return true;
  if (!tok.IsControl(id)) return false;
  const std::string& text = tok.TokenText(id);
  return text == "<|im_end|>" || text == "<|endoftext|>" ||
         text == "<|eot_id|>";
}

}  // namespace

absl::StatusOr<GenerateResult> Generate(Session& session,
                                        const GenerateParams& params,
                                        const TokenCallback& on_token) {
  if (params.prompt.empty()) {
    return absl::InvalidArgumentError("generate: empty prompt");
  }
  if (params.max_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "generate: max_tokens = ", params.max_tokens, " must be >= 0"));
  }
  RETURN_IF_ERROR(ValidateSamplerParams(params.sampler));
  const Tokenizer& tok = session.engine().tokenizer();
  GenerateResult result;
  result.prompt_tokens = static_cast<int>(params.prompt.size());

  const Clock::time_point start = Clock::now();
  std::vector<float> logits;
  RETURN_IF_ERROR(session.Prefill(params.prompt, &logits));
  const double prefill_s = Since(start);
  result.prefill_tok_per_s = result.prompt_tokens / std::max(prefill_s, 1e-9);

  Sampler sampler(params.sampler);
  for (int32_t id : params.prompt) sampler.Accept(id);
  TokenStreamDecoder decoder(tok, /*render_special=*/false);
  StopMatcher stops(params.stop);
  Clock::time_point first_token_time = start;
  result.finish_reason = FinishReason::kLength;
  while (result.generated_tokens < params.max_tokens) {
    const int32_t id = sampler.Sample(logits);
    if (id < 0) {  // a grammar allows no token: its output is as long as it gets
      result.finish_reason = FinishReason::kStop;
      break;
    }
    sampler.Accept(id);
    if (++result.generated_tokens == 1) {
      first_token_time = Clock::now();
      result.ttft_s = Since(start);
    }
    const bool eog = params.stop_at_eos && IsEndOfGeneration(tok, id);
    bool stopped = false;
    std::string text = eog ? std::string() : stops.Push(decoder.Push(id), &stopped);
    // A grammar that allows nothing more ends the output like a stop string.
    const bool grammar_done = sampler.GrammarFinished();
    const bool last = eog || stopped || grammar_done ||
                      result.generated_tokens == params.max_tokens ||
                      session.position() >= session.context_length();
    if (last && !stopped) {
      text += stops.Push(decoder.Flush(), &stopped);
      if (!stopped) text += stops.Flush();
    }
    if (!on_token(id, text)) {
      result.finish_reason = FinishReason::kCancelled;
      break;
    }
    if (eog || stopped || grammar_done) {
      result.finish_reason = eog ? FinishReason::kEos : FinishReason::kStop;
      break;
    }
    if (last) break;
    RETURN_IF_ERROR(session.Decode(id, &logits));
  }
  if (result.generated_tokens > 1) {
    result.decode_tok_per_s =
        (result.generated_tokens - 1) / std::max(Since(first_token_time), 1e-9);
  }
  return result;
}

}  // namespace sluice
