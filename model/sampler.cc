#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "base/sampling_ranges.h"

namespace sluice {
namespace {

absl::Status OutOfRange(const char* field, double value, const char* range) {
  return SamplingOutOfRange("", field, value, range);
}

float Finite(float x) { return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x; }

bool Before(float a_logit, int32_t a_id, float b_logit, int32_t b_id) {
  return a_logit > b_logit || (a_logit == b_logit && a_id < b_id);
}

}  // namespace

absl::Status ValidateSamplerParams(const SamplerParams& p) {
  if (const char* r = TemperatureOutside(p.temperature)) {
    return OutOfRange("temperature", p.temperature, r);
  }
  if (const char* r = CountOutside(p.top_k)) return OutOfRange("top_k", p.top_k, r);
  if (const char* r = TopPOutside(p.top_p)) return OutOfRange("top_p", p.top_p, r);
  if (const char* r = MinPOutside(p.min_p)) return OutOfRange("min_p", p.min_p, r);
  if (const char* r = RepetitionPenaltyOutside(p.repetition_penalty)) {
    return OutOfRange("repetition_penalty", p.repetition_penalty, r);
  }
  if (const char* r = CountOutside(p.repetition_window)) {
    return OutOfRange("repetition_window", p.repetition_window, r);
  }
  return absl::OkStatus();
}

Sampler::Sampler(const SamplerParams& params)
    : params_(params),
      matcher_(params.grammar ? std::make_unique<GrammarMatcher>(params.grammar) : nullptr),
      rng_state_(params.seed) {}

void Sampler::Accept(int32_t token) {
  if (params_.repetition_window == 0) return;
  history_.push_back(token);
  while (history_.size() > static_cast<size_t>(params_.repetition_window)) {
    history_.pop_front();
  }
}

double Sampler::NextUniform() {
  // SplitMix64 (Steele, Lea, Flood 2014): a full-period 64-bit generator.
  uint64_t z = (rng_state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

void Sampler::ApplySparsePenalty(std::vector<Candidate>& candidates) const {
  if (params_.repetition_penalty == 1 || history_.empty()) return;
  const absl::flat_hash_set<int32_t> seen(history_.begin(), history_.end());
  for (const int32_t id : seen) {
    auto it = std::lower_bound(candidates.begin(), candidates.end(), id,
                               [](const Candidate& c, int32_t x) { return c.id < x; });
    if (it == candidates.end() || it->id != id) continue;
    it->logit = Penalize(it->logit);
  }
}

void Sampler::ApplyRepetitionPenalty(std::vector<Candidate>& candidates) const {
  if (params_.repetition_penalty == 1 || history_.empty()) return;
  // Each distinct recent token once, however often it occurred; positive
  // logits shrink and negative ones grow, so the penalty always lowers.
  const absl::flat_hash_set<int32_t> seen(history_.begin(), history_.end());
  for (const int32_t id : seen) {
    if (id < 0 || id >= static_cast<int32_t>(candidates.size())) continue;
    float& logit = candidates[id].logit;
    logit = Penalize(logit);
  }
}

size_t Sampler::KeepByProbability(const std::vector<Candidate>& c) const {
  // Probabilities at temperature 1, unnormalized with the first (largest)
  // at exactly 1; c is sorted, so top-p and min-p both keep a prefix of at
  // least one candidate.
  const double max_logit = c.front().logit;
  std::vector<double> p(c.size());
  double sum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    p[i] = std::exp(static_cast<double>(c[i].logit) - max_logit);
    sum += p[i];
  }
  size_t keep = c.size();
  if (params_.top_p < 1) {
    double cumulative = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      cumulative += p[i] / sum;
      if (cumulative >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0) {
    size_t n = 1;
    while (n < keep && p[n] >= params_.min_p) ++n;
    keep = n;
  }
  return keep;
}

int32_t Sampler::Sample(absl::Span<const float> logits) {
  if (logits.empty()) return -1;
  if (matcher_ == nullptr) return Draw(logits);
  const int32_t id = Draw(logits);
  if (id >= 0) matcher_->Accept(id);
  return id;
}

int32_t Sampler::Draw(absl::Span<const float> logits) {
  std::vector<Candidate> c;
  if (matcher_ == nullptr) {
    c.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) c[i] = {static_cast<int32_t>(i), Finite(logits[i])};
    ApplyRepetitionPenalty(c);
  } else {
    // Only the allowed tokens become candidates (in id order), so a narrow
    // mask makes the rest of the chain cheaper, not dearer.
    matcher_->FillMask(&mask_);
    c.reserve(logits.size());
    for (size_t w = 0; w < mask_.size(); ++w) {
      for (uint64_t bits = mask_[w]; bits != 0; bits &= bits - 1) {
        const size_t id = w * 64 + static_cast<size_t>(__builtin_ctzll(bits));
        if (id >= logits.size()) break;
        c.push_back({static_cast<int32_t>(id), Finite(logits[id])});
      }
    }
    if (c.empty()) return -1;
    ApplySparsePenalty(c);
  }
  const auto before = [](const Candidate& a, const Candidate& b) {
    return Before(a.logit, a.id, b.logit, b.id);
  };
  if (params_.temperature == 0) {
    return std::min_element(c.begin(), c.end(), before)->id;
  }
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < c.size()) {
    std::partial_sort(c.begin(), c.begin() + params_.top_k, c.end(), before);
    c.resize(params_.top_k);
  } else {
    std::sort(c.begin(), c.end(), before);
  }
  const double max_logit = c.front().logit;
  if (std::isinf(max_logit)) return c.front().id;  // nothing is finite
  c.resize(KeepByProbability(c));

  std::vector<double> weight(c.size());
  double total = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    weight[i] = std::exp((static_cast<double>(c[i].logit) - max_logit) /
                         params_.temperature);
    total += weight[i];
  }
  const double target = NextUniform() * total;
  double cumulative = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    cumulative += weight[i];
    if (target < cumulative) return c[i].id;
  }
  return c.back().id;  // rounding left target == total
}

}  // namespace sluice
