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
}

int64_t PrefillPacer::Cap() const {
  if (decode_s_ <= 0 || token_s_ <= 0) return o_.unmeasured_tokens;
  const double tokens = (o_.ratio - 1) * decode_s_ / token_s_;
  if (!std::isfinite(tokens)) return o_.max_tokens;
  return std::clamp<int64_t>(static_cast<int64_t>(tokens), o_.min_tokens, o_.max_tokens);
}

}  // namespace sluice::worker
