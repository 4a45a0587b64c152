// How many prompt tokens a step may evaluate beside running streams (issue
// 19: while a long prompt is admitted, the running streams' p99 time between
// tokens stays within 3x their median). Plain bookkeeping over measured step
// times, no clock of its own: the caller reports each step's decodes, prompt
// tokens and seconds, and asks for the next step's cap
// (sched::Scheduler::Schedule's prefill_cap).
//
// The model: decode_s(d), a step of d decodes alone (the fastest of the
// last kRecent steps of about as many decodes: d is bucketed by powers of
// two, since a step of 32 decodes costs more than one of 2 and a cap sized
// by the smaller starves new prompts), and what a prompt chunk adds beside
// the decodes, extra = the step's time - decode_s(d), as a line in the
// chunk's tokens, fixed + per_token x tokens (least squares, older steps
// weighing less). The cap keeps such a step within ratio x decode_s(d):
// ((ratio - 1) x decode_s(d) - fixed) / per_token tokens, but at least
// fixed / (4 per_token), so a fixed part near or past the room (a chunk
// beside decodes runs a slower code path, as on the GPU) does not shrink
// the chunks to a token a step: such a step costs decode_s(d) + 1.25 x
// fixed (2.875 decode steps with the fixed part at the room, at 2.5), the
// same rule on both sides of the room (no step in the cap where the fitted
// fixed part crosses it). Until
// the line is known (three mixed steps of more than one chunk size), the
// cap is (ratio - 1) x decode_s(d) / token_s, token_s a moving average of
// the time a prompt token adds. A batch size not timed yet borrows the
// nearest timed one's decode_s (the smaller on a tie). The cap is at least
// min_tokens (a chunk must make progress) and at most max_tokens (the
// scheduler's budget). Until a decode step is timed it is
// unmeasured_tokens. A prompt-only step times prompt tokens only when it
// has at least kTimedPromptOnly of them (a step's fixed cost would swamp
// a few). The price: a prompt evaluated beside streams takes about ratio /
// (ratio - 1) times as long as alone (1.67x at 2.5), plus the steps it
// shares; a prompt shorter than the cap is not slowed.
//
// Thread-safety: none (the worker's batch thread).
#ifndef SLUICE_WORKER_BATCH_PREFILL_PACER_H_
#define SLUICE_WORKER_BATCH_PREFILL_PACER_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace sluice::worker {

class PrefillPacer {
 public:
  struct Options {
    double ratio = 2.5;       // a step with prompt tokens / one without
    int64_t min_tokens = 1;   // the smallest chunk beside decodes
    int64_t unmeasured_tokens = 64;  // the cap before the step is timed
    int64_t max_tokens = 512;
    double weight = 0.25;     // of the newest measurement in the averages
    double line_weight = 0.1;  // of the newest mixed step in the line's sums
  };
  explicit PrefillPacer(const Options& options) : o_(options) {}

  // A step ran `decodes` one-token decodes and `prompt_tokens` prompt
  // tokens in `seconds`.
  void Observe(int64_t decodes, int64_t prompt_tokens, double seconds);
  // The prefill cap of a next step with `decodes` decodes (Schedule's
  // prefill_cap; it applies only where the step has decodes).
  int64_t Cap(int64_t decodes) const;

  // The figures so far (0: not measured yet): decode_s of a step of
  // `decodes` (borrowed from the nearest timed batch size), token_s.
  double decode_seconds(int64_t decodes) const;
  double token_seconds() const { return token_s_; }

 private:
  static double Blend(double avg, double x, double w) { return avg == 0 ? x : avg + w * (x - avg); }
  // The mixed steps' line (false while their chunks were of one size).
  bool MixedLine(double* fixed_s, double* per_token_s) const;
  static constexpr std::size_t kRecent = 32;
  static constexpr int64_t kTimedPromptOnly = 32;
  // Batch sizes 1, 2, 3-4, 5-8, ..., the last also every larger one.
  static constexpr int kBuckets = 12;
  static int BucketOf(int64_t decodes);
  // Decodes-only steps per bucket; 0: none yet.
  struct Bucket {
    std::array<double, kRecent> recent{};
    std::size_t next = 0;
    double fastest = 0;
  };
  Options o_;
  std::array<Bucket, kBuckets> buckets_{};
  double token_s_ = 0;
  // Weighted sums over the mixed steps: weights, tokens, extra seconds,
  // tokens^2, tokens x extra seconds.
  double sw_ = 0, sp_ = 0, ss_ = 0, spp_ = 0, sps_ = 0;
  int64_t mixed_steps_ = 0;
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_BATCH_PREFILL_PACER_H_
