// The continuous-batching scheduler of a worker (issue 19), as plain data
// structures: no device code, no threads, no clock of its own (the caller
// passes `now`). It knows token counts, not tokens: the caller keeps each
// request's token ids, sampler and stream, and maps the ranges a step names
// onto them.
//
// A sequence is a prompt of P tokens that may grow by up to max_new_tokens
// sampled ones. Its *known* tokens are the prompt and what was sampled so
// far; its *computed* tokens are those whose KV (and recurrent state) the
// backend holds. A sequence is
//   waiting  queued, holding nothing (new, or preempted);
//   running  holding a recurrent-state slot (StateSlots) and KV blocks
//            (KvBlockPool) for every position it has computed or is about
//            to, and either
//              prefilling: computed < known - 1 (after admission or
//                          resumption), evaluated in chunks, or
//              decoding:   computed == known - 1 (and max_new_tokens
//                          > 0): one token a step.
//
// One step (Schedule, run by the caller, then Complete):
//   1. Sequences whose deadline has passed end (kDeadline), freeing their
//      memory.
//   2. Every decoding sequence, oldest first, decodes one token. One that
//      needs a new block and finds none free preempts the newest running
//      sequence (recompute: its blocks and slot are freed and it goes back
//      to the front of the waiting queue with computed = 0; the tokens it
//      has streamed are kept and re-evaluated, never sampled again). When
//      the newest is itself, it preempts itself.
//   3. What is left of the token budget (token_budget minus one per decode)
//      goes to prefilling sequences, oldest first, in chunks up to the
//      budget, then to admitting waiting sequences in arrival order: the
//      head is admitted when a slot is free, running < max_sequences and
//      the pool has blocks for all its known tokens plus
//      decode_headroom_tokens (capped at what it can ever hold) with
//      watermark_blocks to spare. Admission is strictly in order (a head
//      that does not fit blocks the ones behind it: no starvation), and
//      nothing is admitted in a step that preempted.
//   A chunk that reaches the sequence's last known token "samples": the
//   caller samples one token from its logits and reports it to Complete,
//   which appends it and ends the sequence at max_new_tokens (kLength),
//   at the context limit (kContext: the token just sampled would not fit)
//   or when the caller says it stopped (kStopped: end-of-generation token
//   or stop string).
//
// Consequences the tests pin down: every decoding sequence gets a token
// every step (token_budget >= max_sequences is required), so a long prompt
// is cut into chunks between decode steps rather than stalling them; the
// oldest running sequence is never preempted by a newer one; a sequence
// alone always fits (kv_blocks must hold one full context), so everything
// admitted finishes.
#ifndef SLUICE_SCHED_SCHEDULER_H_
#define SLUICE_SCHED_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "sched/kv_blocks.h"

namespace sluice::sched {

struct SchedulerOptions {
  // Running sequences at most (each holds a state slot and KV blocks).
  int32_t max_sequences = 8;
  // Tokens evaluated per step: one per decode plus the prefill chunks.
  // Must be >= max_sequences (every decode fits in every step).
  int64_t token_budget = 512;
  // Tokens one sequence may hold (prompt plus generated).
  int64_t context_per_sequence = 4096;
  // The KV pool: kv_blocks blocks of block_tokens positions. Must hold one
  // full context (kv_blocks >= ceil(context_per_sequence / block_tokens)).
  int32_t kv_blocks = 256;
  int32_t block_tokens = 16;
  // Recurrent-state slots; 0: max_sequences. At most max_sequences.
  int32_t state_slots = 0;
  // Positions reserved beyond a sequence's known tokens at admission, so
  // that its first decode steps need no new block.
  int64_t decode_headroom_tokens = 16;
  // Blocks an admission must leave free (for running sequences' growth).
  // At most kv_blocks - ceil(context_per_sequence / block_tokens).
  int32_t watermark_blocks = 0;
  // Waiting sequences at most; 0: no bound. Add beyond it is
  // RESOURCE_EXHAUSTED.
  int32_t max_waiting = 0;
};

struct SequenceRequest {
  SeqId id = 0;
  int64_t prompt_tokens = 0;   // >= 1
  int64_t max_new_tokens = 0;  // >= 0; 0 evaluates the prompt only
  // The sequence ends with kDeadline at the first step scheduled at or
  // after this time.
  absl::Time deadline = absl::InfiniteFuture();
};

enum class FinishReason {
  kLength,     // max_new_tokens sampled (or the prompt alone, for 0)
  kContext,    // the context is full
  kStopped,    // the caller ended it (end-of-generation token, stop string)
  kCancelled,  // Cancel
  kDeadline,   // its deadline passed
};

// "length", "context", "stopped", "cancelled", "deadline".
absl::string_view FinishReasonName(FinishReason reason);

struct Finished {
  SeqId id = 0;
  FinishReason reason = FinishReason::kLength;
  int64_t generated = 0;  // tokens sampled over its life
};

// One sequence's part of a step: evaluate known tokens [begin, end) at
// positions begin .. end - 1 in state slot `state_slot`, whose KV lives in
// the blocks of its table (KvBlockPool::Table). begin == 0: the slot was
// (re)assigned, so its recurrent state must start from zero.
struct Chunk {
  SeqId id = 0;
  int32_t state_slot = 0;
  int64_t begin = 0;
  int64_t end = 0;
  // end is the last known token: the caller samples the next token from
  // the logits of position end - 1 and reports it to Complete.
  bool samples = false;

  int64_t tokens() const { return end - begin; }
};

struct StepPlan {
  uint64_t step = 0;  // 1, 2, ...
  // One token each (end == begin + 1, samples), oldest first.
  std::vector<Chunk> decodes;
  // Prefill chunks, oldest first.
  std::vector<Chunk> prefills;
  // Sent back to the waiting queue by this step (memory freed).
  std::vector<SeqId> preempted;
  // Ended by this step before anything ran (deadline).
  std::vector<Finished> finished;

  int64_t tokens() const;
  // Sequences evaluated in this step.
  size_t batch_size() const { return decodes.size() + prefills.size(); }
  bool empty() const { return decodes.empty() && prefills.empty(); }
};

// What the caller sampled for a chunk that samples.
struct Sampled {
  SeqId id = 0;
  // The token ends generation (end-of-generation token or stop string).
  bool stop = false;
};

enum class SeqPhase { kWaiting, kPrefilling, kDecoding };

// A live sequence as the scheduler sees it.
struct SequenceView {
  SeqId id = 0;
  SeqPhase phase = SeqPhase::kWaiting;
  uint64_t arrival = 0;       // 0, 1, ... in Add order
  int64_t prompt_tokens = 0;
  int64_t generated = 0;      // sampled so far
  int64_t known = 0;          // prompt_tokens + generated
  int64_t computed = 0;       // positions whose state the backend holds
  int64_t preemptions = 0;
  std::optional<int32_t> state_slot;  // while running
  int64_t kv_blocks = 0;              // blocks held
};

struct SchedulerStats {
  int32_t running = 0;
  int32_t decoding = 0;  // running sequences the next step decodes a token of
  int32_t waiting = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;
  int32_t state_slots_used = 0;
  uint64_t steps = 0;
  uint64_t preemptions = 0;      // since creation
  uint64_t tokens_scheduled = 0; // decode + prefill tokens, since creation
  size_t last_batch_size = 0;    // sequences in the last step
};

class Scheduler {
 public:
  // INVALID_ARGUMENT naming the option when the options break a rule above.
  static absl::StatusOr<Scheduler> Create(const SchedulerOptions& options);

  const SchedulerOptions& options() const { return options_; }
  const KvBlockPool& kv_blocks() const { return blocks_; }
  const StateSlots& state_slots() const { return slots_; }

  // Queues a sequence behind every one queued before it. Errors:
  // INVALID_ARGUMENT for prompt_tokens < 1, max_new_tokens < 0 or an id
  // already live; OUT_OF_RANGE when the prompt exceeds
  // context_per_sequence (it could never run); RESOURCE_EXHAUSTED when
  // max_waiting sequences wait already.
  absl::Status Add(const SequenceRequest& request);

  // Ends a waiting or running sequence now, freeing its blocks and slot.
  // Allowed while a step is in flight (Complete then ignores it). NOT_FOUND
  // for an id that is not live.
  absl::Status Cancel(SeqId id);

  // The next step. FAILED_PRECONDITION while the previous step has not been
  // completed. An empty plan (nothing to run) needs no Complete.
  // prefill_cap > 0: in a step with decodes, the prefill chunks and
  // admissions together take at most this many tokens (so that a long
  // prompt does not stretch the running streams' time between tokens; the
  // caller paces it, worker/batch/prefill_pacer.h); a step without decodes
  // takes the whole budget.
  absl::StatusOr<StepPlan> Schedule(absl::Time now, int64_t prefill_cap = 0);

  // Applies the step in flight: every chunk's positions become computed,
  // and `sampled` (one entry per sampling chunk of a sequence still live,
  // any order) appends a token each. Returns the sequences that ended.
  // INVALID_ARGUMENT (nothing applied) when no step is in flight, when an
  // entry names a live sequence that did not sample in that step (or twice),
  // or when a live sampling sequence has no entry; entries for sequences
  // cancelled since Schedule are ignored.
  absl::StatusOr<std::vector<Finished>> Complete(absl::Span<const Sampled> sampled);

  bool in_flight() const { return in_flight_.has_value(); }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  std::optional<SequenceView> Find(SeqId id) const;
  // Running sequences oldest first, then waiting ones in queue order.
  std::vector<SequenceView> Sequences() const;
  SchedulerStats Stats() const;

  // OK when the bookkeeping agrees with itself (the rules above); INTERNAL
  // naming the first broken rule otherwise. For tests and debug checks.
  absl::Status CheckInvariants() const;

 private:
  struct Sequence {
    SeqId id = 0;
    uint64_t arrival = 0;
    int64_t prompt = 0;
    int64_t max_new = 0;
    absl::Time deadline = absl::InfiniteFuture();
    int64_t generated = 0;
    int64_t computed = 0;
    int64_t preemptions = 0;
    bool running = false;

    int64_t known() const { return prompt + generated; }
  };

  Scheduler(const SchedulerOptions& options, KvBlockPool blocks, StateSlots slots);

  // One token a step, sampling each: the last known token is next (and
  // tokens are to be sampled; a prompt-only sequence prefills to its end).
  static bool Decoding(const Sequence& s);
  // Positions `s` can ever hold: its prompt and every sampled token but the
  // last (which is never evaluated), at most the context.
  int64_t MaxPositions(const Sequence& s) const;
  // Frees `s`'s memory and drops it from running/waiting (not from seqs_).
  void Drop(SeqId id);
  // Frees the newest running sequence's memory and requeues it.
  SeqId PreemptNewest();
  bool TryAdmit(Sequence& s);
  // The three parts of Schedule (the comment at the top of this file).
  void ExpireDeadlines(absl::Time now, StepPlan& plan);
  absl::Status ScheduleDecodes(StepPlan& plan, int64_t& budget);
  absl::Status SchedulePrefills(StepPlan& plan, int64_t& budget);
  absl::Status CheckSequence(const Sequence& s) const;
  SequenceView View(const Sequence& s) const;

  SchedulerOptions options_;
  KvBlockPool blocks_;
  StateSlots slots_;
  std::unordered_map<SeqId, Sequence> seqs_;
  // Ids, oldest arrival first (both stay sorted by arrival).
  std::vector<SeqId> running_;
  std::deque<SeqId> waiting_;
  uint64_t next_arrival_ = 0;
  uint64_t steps_ = 0;
  uint64_t preemptions_ = 0;
  uint64_t tokens_scheduled_ = 0;
  size_t last_batch_size_ = 0;
  // The chunks of the step in flight.
  std::optional<std::vector<Chunk>> in_flight_;
};

}  // namespace sluice::sched

#endif  // SLUICE_SCHED_SCHEDULER_H_
