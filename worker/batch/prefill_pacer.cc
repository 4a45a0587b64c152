#include "worker/batch/prefill_pacer.h"

#include <algorithm>
#include <cmath>

namespace sluice::worker {

void PrefillPacer::Observe(int64_t decodes, int64_t prompt_tokens, double seconds) {
  if (seconds <= 0 || (decodes == 0 && prompt_tokens == 0)) return;
  if (prompt_tokens == 0) {
    // The fastest of the recent decodes-only steps: slow ones (the first
    // steps, a stall, a client's process starting beside the worker) must
    // not hold the cap high, which would let prompt chunks stretch the
    // gaps beyond the ratio of a typical step.
    recent_[next_++ % recent_.size()] = seconds;
    decode_s_ = 0;
    for (double r : recent_) {
      if (r > 0 && (decode_s_ == 0 || r < decode_s_)) decode_s_ = r;
    }
    return;
  }
  // A prompt-only step's fixed cost counts as prompt tokens' (it is paid
  // once per step either way); beside decodes, what the decodes alone take
  // is taken off first.
  const double prompt_s = decodes > 0 && decode_s_ > 0 ? std::max(0.0, seconds - decode_s_)
                          : decodes == 0 && prompt_tokens >= kTimedPromptOnly ? seconds
                                                                             : -1;
  if (prompt_s >= 0) {
    token_s_ = Blend(token_s_, prompt_s / static_cast<double>(prompt_tokens), o_.weight);
  }
  if (decodes > 0) {
    // The mixed steps' time as a line in their prompt tokens, the older
    // steps weighing less: a step with a chunk may cost a fixed amount
    // beyond the decodes (another code path: on the GPU a lone decode runs
    // the fused program, a chunk beside it the batch pass).
    const double p = static_cast<double>(prompt_tokens);
    const double keep = 1 - o_.line_weight;
    for (double* x : {&sw_, &sp_, &ss_, &spp_, &sps_}) *x *= keep;
    sw_ += 1;
    ++mixed_steps_;
    sp_ += p;
    ss_ += seconds;
    spp_ += p * p;
    sps_ += p * seconds;
  }
}

bool PrefillPacer::MixedLine(double* fixed_s, double* per_token_s) const {
  const double det = sw_ * spp_ - sp_ * sp_;
  // Chunks of (nearly) one size say nothing of the slope.
  if (mixed_steps_ < 3 || det <= 1e-9 * sw_ * spp_) return false;
  *per_token_s = (sw_ * sps_ - sp_ * ss_) / det;
  *fixed_s = (ss_ - *per_token_s * sp_) / sw_;
  return true;
}

int64_t PrefillPacer::Cap() const {
  if (decode_s_ <= 0) return o_.unmeasured_tokens;
  const double budget = o_.ratio * decode_s_;  // a mixed step may take this long
  double fixed = 0, per_token = 0;
  double tokens = 0;
  if (MixedLine(&fixed, &per_token) && per_token > 0) {
    // A chunk beside the decodes costs `fixed` however small it is. When
    // that alone breaks the budget, every mixed step does: chunks whose
    // tokens cost as much as the fixed part keep each such step within
    // twice what it cannot avoid, in half as many steps as the smallest.
    // (A fixed part only just over the budget is as likely noise: the
    // chunks grow to fixed / per_token only past 1.5x the budget.)
    tokens = fixed < budget         ? (budget - fixed) / per_token
             : fixed < 1.5 * budget ? static_cast<double>(o_.min_tokens)
                                    : fixed / per_token;
  } else if (token_s_ > 0) {
    tokens = (o_.ratio - 1) * decode_s_ / token_s_;
  } else {
    return o_.unmeasured_tokens;
  }
  if (!std::isfinite(tokens)) return o_.max_tokens;
  return std::clamp<int64_t>(static_cast<int64_t>(tokens), o_.min_tokens, o_.max_tokens);
}

}  // namespace sluice::worker
