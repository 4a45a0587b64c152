// Generate(): the prefill / sample / decode loop; OutputText: its text
// (detokenizer, stop strings), shared with the worker's batched path.
#include <algorithm>
#include <chrono>
#include <memory>
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

bool IsEndOfGeneration(const Tokenizer& tok, int32_t id) {
  if (id == tok.eos()) return true;
  if (!tok.IsControl(id)) return false;
  const std::string& text = tok.TokenText(id);
  return text == "<|im_end|>" || text == "<|endoftext|>" ||
         text == "<|eot_id|>";
}

}  // namespace

// Text held back because it could be the start of a stop string, and the
// test for a complete one.
class OutputText::StopMatcher {
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

  const std::vector<std::string> stops_;
  std::string pending_;
};

OutputText::OutputText(const Tokenizer& tokenizer, const GenerateParams& params)
    : tokenizer_(tokenizer),
      stop_at_eos_(params.stop_at_eos),
      decoder_(std::make_unique<TokenStreamDecoder>(tokenizer, /*render_special=*/false)),
      stops_(std::make_unique<StopMatcher>(params.stop)) {}

OutputText::~OutputText() = default;
OutputText::OutputText(OutputText&&) = default;

OutputText::Piece OutputText::Push(int32_t id, bool grammar_finished, bool last) {
  Piece piece;
  const bool eog = stop_at_eos_ && IsEndOfGeneration(tokenizer_, id);
  bool stopped = false;
  if (!eog) piece.text = stops_->Push(decoder_->Push(id), &stopped);
  // A grammar that allows nothing more ends the output like a stop string.
  if ((eog || grammar_finished || last) && !stopped) {
    piece.text += stops_->Push(decoder_->Flush(), &stopped);
    if (!stopped) piece.text += stops_->Flush();
  }
  if (eog) {
    piece.finish = FinishReason::kEos;
  } else if (stopped || grammar_finished) {
    piece.finish = FinishReason::kStop;
  }
  return piece;
}

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
  OutputText output(tok, params);
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
    const bool last = result.generated_tokens == params.max_tokens ||
                      session.position() >= session.context_length();
    const OutputText::Piece piece = output.Push(id, sampler.GrammarFinished(), last);
    if (!on_token(id, piece.text)) {
      result.finish_reason = FinishReason::kCancelled;
      break;
    }
    if (piece.finish.has_value()) {
      result.finish_reason = *piece.finish;
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
