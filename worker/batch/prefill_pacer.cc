#include "worker/batch/prefill_pacer.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace sluice::worker {

int PrefillPacer::BucketOf(int64_t decodes) {
  const auto d = static_cast<uint64_t>(std::max<int64_t>(decodes, 1));
  return std::min(kBuckets - 1, static_cast<int>(std::bit_width(d - 1)));
}

double PrefillPacer::decode_seconds(int64_t decodes) const {
  const int b = BucketOf(decodes);
  for (int away = 0; away < kBuckets; ++away) {
    for (int at : {b - away, b + away}) {
      if (at >= 0 && at < kBuckets && buckets_[at].fastest > 0) return buckets_[at].fastest;
    }
  }
  return 0;
}

void PrefillPacer::Observe(int64_t decodes, int64_t prompt_tokens, double seconds) {
  if (seconds <= 0 || (decodes == 0 && prompt_tokens == 0)) return;
  if (prompt_tokens == 0) {
    // The fastest of the recent decodes-only steps of this batch size: slow
    // ones (the first steps, a stall, a client's process starting beside
    // the worker) must not hold the cap high, which would let prompt
    // chunks stretch the gaps beyond the ratio of a typical step.
    Bucket& k = buckets_[BucketOf(decodes)];
    k.recent[k.next++ % k.recent.size()] = seconds;
    k.fastest = 0;
    for (double r : k.recent) {
      if (r > 0 && (k.fastest == 0 || r < k.fastest)) k.fastest = r;
    }
    return;
  }
  if (decodes == 0) {
    // A prompt-only step's fixed cost counts as its tokens' (it is paid
    // once per step either way).
    if (prompt_tokens >= kTimedPromptOnly) {
      token_s_ = Blend(token_s_, seconds / static_cast<double>(prompt_tokens), o_.weight);
    }
    return;
  }
  // Beside decodes, what the decodes alone take is taken off first;
  // before a decodes-only step is timed there is nothing to take off.
  const double base = decode_seconds(decodes);
  if (base <= 0) return;
  const double extra = std::max(0.0, seconds - base);
  const double p = static_cast<double>(prompt_tokens);
  token_s_ = Blend(token_s_, extra / p, o_.weight);
  // What the chunks add as a line in their tokens, the older steps weighing
  // less: a step with a chunk may cost a fixed amount beyond the decodes
  // (another code path: on the GPU a lone decode runs the fused program, a
  // chunk beside it the batch pass).
  const double keep = 1 - o_.line_weight;
  for (double* x : {&sw_, &sp_, &ss_, &spp_, &sps_}) *x *= keep;
  sw_ += 1;
  ++mixed_steps_;
  sp_ += p;
  ss_ += extra;
  spp_ += p * p;
  sps_ += p * extra;
}

bool PrefillPacer::MixedLine(double* fixed_s, double* per_token_s) const {
  const double det = sw_ * spp_ - sp_ * sp_;
  // Chunks of (nearly) one size say nothing of the slope.
  if (mixed_steps_ < 3 || det <= 1e-9 * sw_ * spp_) return false;
  *per_token_s = (sw_ * sps_ - sp_ * ss_) / det;
  *fixed_s = (ss_ - *per_token_s * sp_) / sw_;
  return true;
}

int64_t PrefillPacer::Cap(int64_t decodes) const {
  const double decode_s = decode_seconds(decodes);
  if (decode_s <= 0) return o_.unmeasured_tokens;
  const double room = (o_.ratio - 1) * decode_s;  // what a chunk may add
  double fixed = 0, per_token = 0;
  double tokens = 0;
  if (MixedLine(&fixed, &per_token) && per_token > 0) {
    // A chunk beside the decodes costs `fixed` however small it is. The
    // chunks keep the ratio where they can, but never fall below a quarter
    // of the fixed part's worth of tokens: with the fixed part near or past
    // the room, the chunks that keep the ratio shrink to a token a step (a
    // prompt that never ends), where these cost decode_s + 1.25 x fixed
    // (2.875 decode steps with the fixed part at the room, at 2.5). The
    // same rule on both sides of the room: a fixed part just past it once
    // doubled the chunks' cost (each step within twice decode_s + fixed),
    // and on the H100 (2026-12-06) the streams' p99 over median swung
    // between ~2 and ~7.7 from run to run as the fitted part fell either
    // side.
    tokens = std::max((room - fixed) / per_token, 0.25 * fixed / per_token);
  } else if (token_s_ > 0) {
    tokens = room / token_s_;
  } else {
    return o_.unmeasured_tokens;
  }
  // In double before the cast: a cap past int64's range is the largest.
  if (!(tokens < static_cast<double>(o_.max_tokens))) return o_.max_tokens;
  return std::max<int64_t>(static_cast<int64_t>(tokens), o_.min_tokens);
}

}  // namespace sluice::worker
