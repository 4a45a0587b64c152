// Token sampling from a row of logits.
//
// The chain follows llama.cpp's default order: repetition penalty -> top-k
// -> top-p -> min-p -> temperature -> a draw from the remaining softmax.
// top-p and min-p judge probabilities at temperature 1, before temperature
// reshapes the distribution (as llama.cpp does). temperature == 0 is greedy:
// the argmax of the penalized logits, ties to the lowest id.
//
// Determinism: the draw uses our own generator (SplitMix64 seeded from
// `seed`) and our own uniform-to-double conversion, never std::
// distributions (whose output is implementation-defined), and candidates
// are ordered by (logit descending, id ascending) before the draw. A seed
// gives the same token sequence on every platform whose exp() rounds the
// same; equal logits always resolve to the lower id.
//
// Constrained decoding: with SamplerParams::grammar set, each Sample() draws
// only among the tokens the grammar allows next (model/grammar.h; the rest
// count as -inf, before the penalty and the chain), and commits the token it
// returns to the sequence's grammar state, which the Sampler owns. A
// Sampler is thus one sequence's state, also inside a batch.
//
// Thread-safety: none; one Sampler per generation stream.
#ifndef SLUICE_MODEL_SAMPLER_H_
#define SLUICE_MODEL_SAMPLER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "model/grammar.h"

namespace sluice {

struct SamplerParams {
  float temperature = 0;          // 0 = greedy; must be >= 0
  int top_k = 0;                  // 0 = off; must be >= 0
  float top_p = 1;                // in (0, 1]; 1 = off
  float min_p = 0;                // in [0, 1]; 0 = off
  float repetition_penalty = 1;   // > 0; 1 = off
  int repetition_window = 64;     // last N accepted tokens; >= 0
  uint64_t seed = 0;
  // Null: unconstrained. Its vocabulary must be the logits' (one entry per
  // logit).
  std::shared_ptr<const TokenGrammar> grammar;
};

// OK, or InvalidArgument naming the first field out of range and its value,
// e.g. "sampler: top_p = 1.5 is outside (0, 1]". NaN is out of range.
absl::Status ValidateSamplerParams(const SamplerParams& params);

class Sampler {
 public:
  // Precondition: ValidateSamplerParams(params).ok().
  explicit Sampler(const SamplerParams& params);

  // Picks a token id from `logits` (one per vocabulary entry). NaN logits
  // count as -inf. Does not record the token: call Accept() for that.
  // Returns -1 when `logits` is empty, or when a grammar allows no token
  // (it has nothing left but an end the vocabulary lacks).
  int32_t Sample(absl::Span<const float> logits);

  // With a grammar: the output so far is complete and nothing but the end
  // may follow (or an end token was drawn). False without a grammar.
  bool GrammarFinished() const { return matcher_ != nullptr && matcher_->Finished(); }

  // Records a token for the repetition penalty (each generated token, and
  // prompt tokens if they should count too).
  void Accept(int32_t token);

  const SamplerParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };
  // The draw itself (Sample() minus committing to the grammar).
  int32_t Draw(absl::Span<const float> logits);
  void ApplyRepetitionPenalty(std::vector<Candidate>& candidates) const;
  // The same for candidates in id order that are not every token.
  void ApplySparsePenalty(std::vector<Candidate>& candidates) const;
  // Positive logits shrink and negative ones grow: the penalty always lowers.
  float Penalize(float logit) const {
    return logit <= 0 ? logit * params_.repetition_penalty : logit / params_.repetition_penalty;
  }
  // How many of the sorted candidates top-p and min-p keep.
  size_t KeepByProbability(const std::vector<Candidate>& candidates) const;
  // Uniform double in [0, 1), advancing the generator.
  double NextUniform();

  SamplerParams params_;
  std::unique_ptr<GrammarMatcher> matcher_;  // with params_.grammar
  std::vector<uint64_t> mask_;
  uint64_t rng_state_;
  std::deque<int32_t> history_;  // at most repetition_window tokens
};

}  // namespace sluice

#endif  // SLUICE_MODEL_SAMPLER_H_
