#include "sched/scheduler.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::sched {

absl::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kContext:
      return "context";
    case FinishReason::kStopped:
      return "stopped";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kDeadline:
      return "deadline";
  }
  return "unknown";
}

int64_t StepPlan::tokens() const {
  int64_t n = static_cast<int64_t>(decodes.size());
  for (const Chunk& c : prefills) n += c.tokens();
  return n;
}

absl::StatusOr<Scheduler> Scheduler::Create(const SchedulerOptions& o) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("scheduler: ", parts...));
  };
  if (o.max_sequences < 1) return bad("max_sequences = ", o.max_sequences, ": must be >= 1");
  if (o.token_budget < o.max_sequences) {
    return bad("token_budget = ", o.token_budget, ": must be >= max_sequences (",
               o.max_sequences, "), so that every running sequence decodes every step");
  }
  if (o.context_per_sequence < 1) {
    return bad("context_per_sequence = ", o.context_per_sequence, ": must be >= 1");
  }
  if (o.block_tokens < 1) return bad("block_tokens = ", o.block_tokens, ": must be >= 1");
  const int64_t one_context = (o.context_per_sequence + o.block_tokens - 1) / o.block_tokens;
  if (o.kv_blocks < one_context) {
    return bad("kv_blocks = ", o.kv_blocks, ": one sequence of ", o.context_per_sequence,
               " tokens needs ", one_context, " blocks of ", o.block_tokens, " tokens");
  }
  if (o.state_slots < 0 || o.state_slots > o.max_sequences) {
    return bad("state_slots = ", o.state_slots, ": must be in [0, max_sequences = ",
               o.max_sequences, "] (0: max_sequences)");
  }
  if (o.decode_headroom_tokens < 0) {
    return bad("decode_headroom_tokens = ", o.decode_headroom_tokens, ": must be >= 0");
  }
  if (o.watermark_blocks < 0 || o.watermark_blocks > o.kv_blocks - one_context) {
    return bad("watermark_blocks = ", o.watermark_blocks, ": must be in [0, ",
               o.kv_blocks - one_context,
               "] (kv_blocks less one context's blocks), or a sequence alone could not start");
  }
  if (o.max_waiting < 0) return bad("max_waiting = ", o.max_waiting, ": must be >= 0");
  absl::StatusOr<KvBlockPool> blocks = KvBlockPool::Create(o.kv_blocks, o.block_tokens);
  if (!blocks.ok()) return blocks.status();
  absl::StatusOr<StateSlots> slots =
      StateSlots::Create(o.state_slots == 0 ? o.max_sequences : o.state_slots);
  if (!slots.ok()) return slots.status();
  SchedulerOptions options = o;
  if (options.state_slots == 0) options.state_slots = o.max_sequences;
  return Scheduler(options, *std::move(blocks), *std::move(slots));
}

Scheduler::Scheduler(const SchedulerOptions& options, KvBlockPool blocks, StateSlots slots)
    : options_(options), blocks_(std::move(blocks)), slots_(std::move(slots)) {}

bool Scheduler::Decoding(const Sequence& s) {
  return s.running && s.max_new > 0 && s.computed == s.known() - 1;
}

int64_t Scheduler::MaxPositions(const Sequence& s) const {
  const int64_t fed = s.max_new > 0 ? s.prompt + s.max_new - 1 : s.prompt;
  return std::min(fed, options_.context_per_sequence);
}

absl::Status Scheduler::Add(const SequenceRequest& r) {
  if (r.prompt_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", r.id, ": prompt_tokens = ",
                                                   r.prompt_tokens, ": must be >= 1"));
  }
  if (r.max_new_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", r.id, ": max_new_tokens = ",
                                                   r.max_new_tokens, ": must be >= 0"));
  }
  if (seqs_.count(r.id) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", r.id, " is already queued or running"));
  }
  if (in_flight_.has_value()) {
    for (const Chunk& c : *in_flight_) {
      if (c.id == r.id) {
        return absl::FailedPreconditionError(absl::StrCat(
            "sequence ", r.id, " was cancelled but is still in the step in flight"));
      }
    }
  }
  if (r.prompt_tokens > options_.context_per_sequence) {
    return absl::OutOfRangeError(absl::StrCat("sequence ", r.id, ": a prompt of ", r.prompt_tokens,
                                              " tokens does not fit in a context of ",
                                              options_.context_per_sequence, " tokens"));
  }
  if (options_.max_waiting > 0 &&
      waiting_.size() >= static_cast<size_t>(options_.max_waiting)) {
    return absl::ResourceExhaustedError(absl::StrCat("sequence ", r.id, ": ", waiting_.size(),
                                                     " sequences are waiting already (at most ",
                                                     options_.max_waiting, ")"));
  }
  Sequence s;
  s.id = r.id;
  s.arrival = next_arrival_++;
  s.prompt = r.prompt_tokens;
  s.max_new = r.max_new_tokens;
  s.deadline = r.deadline;
  seqs_.emplace(r.id, s);
  waiting_.push_back(r.id);
  return absl::OkStatus();
}

void Scheduler::Drop(SeqId id) {
  blocks_.Release(id);
  slots_.Release(id);
  if (auto it = std::find(running_.begin(), running_.end(), id); it != running_.end()) {
    running_.erase(it);
  }
  if (auto it = std::find(waiting_.begin(), waiting_.end(), id); it != waiting_.end()) {
    waiting_.erase(it);
  }
}

absl::Status Scheduler::Cancel(SeqId id) {
  if (seqs_.count(id) == 0) {
    return absl::NotFoundError(absl::StrCat("sequence ", id, " is not queued or running"));
  }
  Drop(id);
  seqs_.erase(id);
  return absl::OkStatus();
}

SeqId Scheduler::PreemptNewest() {
  const SeqId id = running_.back();
  Sequence& s = seqs_.at(id);
  blocks_.Release(id);
  slots_.Release(id);
  running_.pop_back();
  s.running = false;
  s.computed = 0;
  ++s.preemptions;
  ++preemptions_;
  // It arrived after every sequence still running and before every waiting
  // one (admission is in arrival order), so the front keeps the queue sorted.
  waiting_.push_front(id);
  return id;
}

bool Scheduler::TryAdmit(Sequence& s) {
  if (running_.size() >= static_cast<size_t>(options_.max_sequences)) return false;
  if (slots_.free_slots() == 0) return false;
  const int64_t reserve =
      std::min(s.known() + options_.decode_headroom_tokens, MaxPositions(s));
  const int64_t need = blocks_.BlocksNeeded(s.id, reserve);
  if (need + options_.watermark_blocks > blocks_.free_blocks()) return false;
  // Both succeed: checked just above.
  slots_.Acquire(s.id);
  (void)blocks_.Reserve(s.id, reserve);
  s.running = true;
  s.computed = 0;
  running_.push_back(s.id);
  return true;
}

void Scheduler::ExpireDeadlines(absl::Time now, StepPlan& plan) {
  std::vector<SeqId> expired;
  for (SeqId id : running_) {
    if (seqs_.at(id).deadline <= now) expired.push_back(id);
  }
  for (SeqId id : waiting_) {
    if (seqs_.at(id).deadline <= now) expired.push_back(id);
  }
  for (SeqId id : expired) {
    plan.finished.push_back({id, FinishReason::kDeadline, seqs_.at(id).generated});
    Drop(id);
    seqs_.erase(id);
  }
}

absl::Status Scheduler::ScheduleDecodes(StepPlan& plan, int64_t& budget) {
  const std::vector<SeqId> order = running_;
  for (SeqId id : order) {
    Sequence& s = seqs_.at(id);
    if (!Decoding(s)) continue;  // prefilling, or preempted just now
    const int64_t need = s.computed + 1;
    bool self = false;
    while (!blocks_.CanHold(id, need)) {
      const SeqId victim = PreemptNewest();
      plan.preempted.push_back(victim);
      if (victim == id) {
        self = true;
        break;
      }
    }
    if (self) break;  // everything newer is preempted already
    if (absl::Status st = blocks_.Reserve(id, need); !st.ok()) return st;
    plan.decodes.push_back({id, *slots_.SlotOf(id), s.computed, need, /*samples=*/true});
    --budget;
  }
  return absl::OkStatus();
}

absl::Status Scheduler::SchedulePrefills(StepPlan& plan, int64_t& budget) {
  auto chunk_of = [&](const Sequence& s) {
    const int64_t n = std::min(budget, s.known() - s.computed);
    const int64_t end = s.computed + n;
    budget -= n;
    return Chunk{s.id, *slots_.SlotOf(s.id), s.computed, end,
                 /*samples=*/end == s.known() && s.max_new > 0};
  };
  for (SeqId id : running_) {
    if (budget == 0) break;
    const Sequence& s = seqs_.at(id);
    if (Decoding(s)) continue;
    // Admission reserved every known token.
    if (blocks_.TokensHeld(id) < s.known()) {
      return absl::InternalError(absl::StrCat("scheduler: prefilling sequence ", id, " holds ",
                                              blocks_.TokensHeld(id), " positions of ",
                                              s.known()));
    }
    plan.prefills.push_back(chunk_of(s));
  }
  // Admissions in arrival order, none in a step that preempted (the memory
  // just freed is what the running sequences lacked).
  if (!plan.preempted.empty()) return absl::OkStatus();
  while (budget > 0 && !waiting_.empty()) {
    Sequence& s = seqs_.at(waiting_.front());
    if (!TryAdmit(s)) break;
    waiting_.pop_front();
    plan.prefills.push_back(chunk_of(s));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepPlan> Scheduler::Schedule(absl::Time now, int64_t prefill_cap) {
  if (in_flight_.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("scheduler: step ", steps_, " is still in flight (call Complete first)"));
  }
  StepPlan plan;
  ExpireDeadlines(now, plan);
  int64_t budget = options_.token_budget;
  if (absl::Status s = ScheduleDecodes(plan, budget); !s.ok()) return s;
  if (prefill_cap > 0 && !plan.decodes.empty()) budget = std::min(budget, prefill_cap);
  if (absl::Status s = SchedulePrefills(plan, budget); !s.ok()) return s;
  if (!plan.empty()) {
    plan.step = ++steps_;
    tokens_scheduled_ += static_cast<uint64_t>(plan.tokens());
    last_batch_size_ = plan.batch_size();
    std::vector<Chunk> chunks = plan.decodes;
    chunks.insert(chunks.end(), plan.prefills.begin(), plan.prefills.end());
    in_flight_ = std::move(chunks);
  }
  return plan;
}

absl::StatusOr<std::vector<Finished>> Scheduler::Complete(absl::Span<const Sampled> sampled) {
  if (!in_flight_.has_value()) {
    return absl::InvalidArgumentError("scheduler: Complete without a step in flight");
  }
  const std::vector<Chunk>& chunks = *in_flight_;
  std::unordered_map<SeqId, bool> stop;
  for (const Sampled& e : sampled) {
    if (seqs_.count(e.id) == 0) continue;  // cancelled since Schedule
    const bool sampling = std::any_of(chunks.begin(), chunks.end(), [&](const Chunk& c) {
      return c.id == e.id && c.samples;
    });
    if (!sampling) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scheduler: a token was sampled for sequence ", e.id, ", which did not sample in step ",
          steps_));
    }
    if (!stop.emplace(e.id, e.stop).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scheduler: two tokens were sampled for sequence ", e.id, " in step ", steps_));
    }
  }
  for (const Chunk& c : chunks) {
    if (c.samples && seqs_.count(c.id) != 0 && stop.count(c.id) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("scheduler: sequence ", c.id,
                                                     " sampled in step ", steps_,
                                                     " but no token was reported"));
    }
  }
  std::vector<Finished> finished;
  for (const Chunk& c : chunks) {
    const auto it = seqs_.find(c.id);
    if (it == seqs_.end()) continue;
    Sequence& s = it->second;
    s.computed = c.end;
    std::optional<FinishReason> reason;
    if (c.samples) {
      ++s.generated;
      if (stop.at(c.id)) {
        reason = FinishReason::kStopped;
      } else if (s.generated >= s.max_new) {
        reason = FinishReason::kLength;
      } else if (s.known() > options_.context_per_sequence) {
        // The token just sampled would take position context.
        reason = FinishReason::kContext;
      }
    } else if (s.computed == s.known()) {
      reason = FinishReason::kLength;  // max_new_tokens 0: the prompt alone
    }
    if (reason.has_value()) {
      finished.push_back({c.id, *reason, s.generated});
      Drop(c.id);
      seqs_.erase(it);
    }
  }
  in_flight_.reset();
  return finished;
}

SequenceView Scheduler::View(const Sequence& s) const {
  SequenceView v;
  v.id = s.id;
  v.phase = !s.running                      ? SeqPhase::kWaiting
            : Decoding(s)               ? SeqPhase::kDecoding
                                            : SeqPhase::kPrefilling;
  v.arrival = s.arrival;
  v.prompt_tokens = s.prompt;
  v.generated = s.generated;
  v.known = s.known();
  v.computed = s.computed;
  v.preemptions = s.preemptions;
  v.state_slot = slots_.SlotOf(s.id);
  v.kv_blocks = static_cast<int64_t>(blocks_.Table(s.id).size());
  return v;
}

std::optional<SequenceView> Scheduler::Find(SeqId id) const {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return std::nullopt;
  return View(it->second);
}

std::vector<SequenceView> Scheduler::Sequences() const {
  std::vector<SequenceView> out;
  for (SeqId id : running_) out.push_back(View(seqs_.at(id)));
  for (SeqId id : waiting_) out.push_back(View(seqs_.at(id)));
  return out;
}

SchedulerStats Scheduler::Stats() const {
  SchedulerStats s;
  s.running = static_cast<int32_t>(running_.size());
  for (SeqId id : running_) s.decoding += Decoding(seqs_.at(id)) ? 1 : 0;
  s.waiting = static_cast<int32_t>(waiting_.size());
  s.kv_blocks_total = blocks_.num_blocks();
  s.kv_blocks_used = blocks_.used_blocks();
  s.state_slots_used = slots_.num_slots() - slots_.free_slots();
  s.steps = steps_;
  s.preemptions = preemptions_;
  s.tokens_scheduled = tokens_scheduled_;
  s.last_batch_size = last_batch_size_;
  return s;
}

absl::Status Scheduler::CheckSequence(const Sequence& s) const {
  const SeqId id = s.id;
  auto broken = [](auto&&... parts) {
    return absl::InternalError(absl::StrCat("scheduler: ", parts...));
  };
  if (s.computed < 0 || s.computed > s.known() - 1) {
    return broken("sequence ", id, ": computed ", s.computed, " outside [0, known ", s.known(),
                  " - 1]");
  }
  if (s.max_new > 0 ? s.generated >= s.max_new : s.generated != 0) {
    return broken("sequence ", id, ": ", s.generated, " generated of at most ", s.max_new,
                  " is live");
  }
  if (s.known() > options_.context_per_sequence) {
    return broken("sequence ", id, ": ", s.known(), " known tokens exceed the context ",
                  options_.context_per_sequence);
  }
  const int64_t held = blocks_.TokensHeld(id);
  if (!s.running) {
    if (s.computed != 0 || blocks_.Has(id) || slots_.SlotOf(id).has_value()) {
      return broken("waiting sequence ", id, " holds memory or computed positions");
    }
    return absl::OkStatus();
  }
  if (!slots_.SlotOf(id).has_value()) return broken("running sequence ", id, " has no slot");
  if (held < s.computed) {
    return broken("running sequence ", id, " holds ", held, " positions but computed ",
                  s.computed);
  }
  if (!Decoding(s) && held < s.known()) {
    return broken("prefilling sequence ", id, " holds ", held, " positions of ", s.known(),
                  " known");
  }
  if (blocks_.BlocksFor(held) > blocks_.BlocksFor(MaxPositions(s))) {
    return broken("sequence ", id, " holds ", held, " positions, more than the ",
                  MaxPositions(s), " it can ever use");
  }
  return absl::OkStatus();
}

absl::Status Scheduler::CheckInvariants() const {
  auto broken = [](auto&&... parts) {
    return absl::InternalError(absl::StrCat("scheduler: ", parts...));
  };
  if (absl::Status s = blocks_.CheckInvariants(); !s.ok()) return s;
  if (absl::Status s = slots_.CheckInvariants(); !s.ok()) return s;
  if (running_.size() > static_cast<size_t>(options_.max_sequences)) {
    return broken(running_.size(), " running > max_sequences ", options_.max_sequences);
  }
  if (running_.size() + waiting_.size() != seqs_.size()) {
    return broken(running_.size(), " running + ", waiting_.size(), " waiting != ", seqs_.size(),
                  " live sequences");
  }
  std::unordered_set<SeqId> seen;
  uint64_t last_arrival = 0;
  bool first = true;
  auto in_order = [&](SeqId id) -> absl::Status {
    if (!seen.insert(id).second) return broken("sequence ", id, " is listed twice");
    const auto it = seqs_.find(id);
    if (it == seqs_.end()) return broken("listed sequence ", id, " is not live");
    // Running oldest first, then waiting in arrival order: one sorted run.
    if (!first && it->second.arrival <= last_arrival) {
      return broken("sequence ", id, " (arrival ", it->second.arrival,
                    ") is out of arrival order");
    }
    first = false;
    last_arrival = it->second.arrival;
    return absl::OkStatus();
  };
  for (SeqId id : running_) {
    if (absl::Status st = in_order(id); !st.ok()) return st;
  }
  for (SeqId id : waiting_) {
    if (absl::Status st = in_order(id); !st.ok()) return st;
  }
  for (const auto& [id, s] : seqs_) {
    if (absl::Status st = CheckSequence(s); !st.ok()) return st;
  }
  if (blocks_.num_tables() != running_.size() ||
      static_cast<size_t>(slots_.num_slots() - slots_.free_slots()) != running_.size()) {
    return broken(blocks_.num_tables(), " block tables and ",
                  slots_.num_slots() - slots_.free_slots(), " slots held for ", running_.size(),
                  " running sequences");
  }
  if (in_flight_.has_value()) {
    for (const Chunk& c : *in_flight_) {
      const auto it = seqs_.find(c.id);
      if (it == seqs_.end()) continue;
      if (c.begin != it->second.computed || blocks_.TokensHeld(c.id) < c.end) {
        return broken("chunk [", c.begin, ", ", c.end, ") of sequence ", c.id,
                      " disagrees with its ", it->second.computed, " computed and ",
                      blocks_.TokensHeld(c.id), " held positions");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::sched
