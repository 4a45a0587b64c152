// Seeded random operation sequences (add, cancel, cancel mid-step, clock
// moves, steps with random stops) against the scheduler's invariants and a
// shadow of what each sequence's caller sees: chunks continue where the
// backend's state ends, every decoding sequence gets its token every step,
// the oldest is never preempted, tokens are sampled once each, every
// sequence ends exactly once for the right reason, and a drained scheduler
// holds no memory. Deterministic: std::mt19937 with fixed seeds, used only
// through operator() and %, and a fake clock.
#include <cstdint>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sched/scheduler.h"

namespace sluice::sched {
namespace {

struct Shadow {
  int64_t prompt = 0;
  int64_t max_new = 0;
  absl::Time deadline = absl::InfiniteFuture();
  int64_t generated = 0;
  int64_t computed = 0;
  bool running = false;
  bool ended = false;
  int64_t known() const { return prompt + generated; }
};

class Fuzz {
 public:
  explicit Fuzz(uint32_t seed) : rng_(seed), seed_(seed) {}

  // Random options within the rules (Create must accept them).
  SchedulerOptions Options() {
    SchedulerOptions o;
    o.max_sequences = 1 + R(8);
    o.token_budget = o.max_sequences + R(48);
    o.context_per_sequence = 4 + R(120);
    o.block_tokens = 1 + R(16);
    const int32_t one = (o.context_per_sequence + o.block_tokens - 1) / o.block_tokens;
    o.kv_blocks = one + R(one * o.max_sequences);
    o.state_slots = R(2) == 0 ? 0 : 1 + R(o.max_sequences);
    o.decode_headroom_tokens = R(3) == 0 ? 0 : R(40);
    o.watermark_blocks = R(3) == 0 ? R(o.kv_blocks - one + 1) : 0;
    o.max_waiting = R(3) == 0 ? 1 + R(12) : 0;
    return o;
  }

  // Runs `ops` random operations, then drains. Returns a trace of every
  // plan, for the determinism check.
  std::string Run(int ops) {
    const SchedulerOptions o = Options();
    absl::StatusOr<Scheduler> made = Scheduler::Create(o);
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return "";
    Scheduler s = *std::move(made);
    opts_ = s.options();
    for (int op = 0; op < ops && !::testing::Test::HasFailure(); ++op) {
      const uint32_t r = R(100);
      if (r < 30) {
        Add(s);
      } else if (r < 38) {
        Cancel(s);
      } else if (r < 43) {
        now_ += absl::Seconds(R(5));
      } else {
        Step(s, /*may_cancel=*/true);
      }
      Check(s, op);
    }
    // Drain: nothing new; everything must end, and soon.
    for (int step = 0; !s.idle() && !::testing::Test::HasFailure(); ++step) {
      ASSERT_LT_RETURN(step, 200000);
      Step(s, /*may_cancel=*/false);
      Check(s, -1);
    }
    for (const auto& [id, sh] : shadow_) {
      EXPECT_TRUE(sh.ended) << Where() << "sequence " << id << " never ended";
    }
    counts_.preemptions += s.Stats().preemptions;
    counts_.steps += s.Stats().steps;
    EXPECT_EQ(s.kv_blocks().free_blocks(), s.kv_blocks().num_blocks()) << Where();
    EXPECT_EQ(s.state_slots().free_slots(), s.state_slots().num_slots()) << Where();
    return trace_;
  }

  struct Counts {
    uint64_t steps = 0;
    uint64_t preemptions = 0;
    uint64_t deadlines = 0;
    uint64_t cancels_in_flight = 0;
    uint64_t by_reason[5] = {};
  };
  const Counts& counts() const { return counts_; }

 private:
  // A test failure inside a helper that returns a value.
  void ASSERT_LT_RETURN(int a, int b) { ASSERT_LT(a, b) << Where() << "did not drain"; }

  uint32_t R(uint32_t n) { return n == 0 ? 0 : rng_() % n; }
  std::string Where() const { return absl::StrCat("seed ", seed_, ": "); }

  size_t Waiting() const {
    size_t n = 0;
    for (const auto& [id, sh] : shadow_) n += !sh.ended && !sh.running;
    return n;
  }

  void Add(Scheduler& s) {
    SequenceRequest r;
    r.id = next_id_++;
    const uint32_t kind = R(20);
    r.prompt_tokens = kind == 0 ? 0 : kind == 1 ? opts_.context_per_sequence + 1 + R(10)
                                                : 1 + R(opts_.context_per_sequence);
    r.max_new_tokens = R(10) == 0 ? 0 : R(60);
    if (R(4) == 0) r.deadline = now_ + absl::Seconds(R(30));
    const absl::Status st = s.Add(r);
    if (r.prompt_tokens < 1) {
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << Where() << st;
    } else if (r.prompt_tokens > opts_.context_per_sequence) {
      EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << Where() << st;
    } else if (opts_.max_waiting > 0 && Waiting() >= static_cast<size_t>(opts_.max_waiting)) {
      EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << Where() << st;
    } else {
      EXPECT_TRUE(st.ok()) << Where() << st;
      Shadow sh;
      sh.prompt = r.prompt_tokens;
      sh.max_new = r.max_new_tokens;
      sh.deadline = r.deadline;
      shadow_[r.id] = sh;
    }
  }

  void CancelOne(Scheduler& s, SeqId id) {
    const auto it = shadow_.find(id);
    const bool live = it != shadow_.end() && !it->second.ended;
    const absl::Status st = s.Cancel(id);
    if (live) {
      EXPECT_TRUE(st.ok()) << Where() << st;
      it->second.ended = true;
    } else {
      EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << Where() << "cancel " << id;
    }
  }

  void Cancel(Scheduler& s) {
    if (next_id_ == 1) return;
    CancelOne(s, 1 + R(static_cast<uint32_t>(next_id_)));  // live, ended or unknown
  }

  void Step(Scheduler& s, bool may_cancel) {
    // What the step must respect, seen before it.
    std::set<SeqId> decoding, was_waiting, expiring;
    SeqId oldest = 0;
    bool have_oldest = false;
    for (const SequenceView& v : s.Sequences()) {
      const Shadow& sh = shadow_.at(v.id);
      if (sh.deadline <= now_) {
        expiring.insert(v.id);
        continue;
      }
      if (v.phase == SeqPhase::kDecoding) decoding.insert(v.id);
      if (v.phase == SeqPhase::kWaiting) was_waiting.insert(v.id);
      if (v.phase != SeqPhase::kWaiting && !have_oldest) {
        oldest = v.id;
        have_oldest = true;
      }
    }
    absl::StatusOr<StepPlan> plan = s.Schedule(now_);
    ASSERT_TRUE(plan.ok()) << Where() << plan.status();
    absl::StrAppend(&trace_, plan->step, ":", plan->tokens(), "/", plan->batch_size(), "/",
                    plan->preempted.size(), ";");

    // Deadlines: exactly the expired ones, first.
    std::set<SeqId> ended_by_deadline;
    for (const Finished& f : plan->finished) {
      EXPECT_EQ(f.reason, FinishReason::kDeadline) << Where();
      EXPECT_EQ(f.generated, shadow_.at(f.id).generated) << Where();
      ended_by_deadline.insert(f.id);
      ++counts_.deadlines;
      shadow_.at(f.id).ended = true;
    }
    EXPECT_EQ(ended_by_deadline, expiring) << Where();

    // Preemption: newest first, never the oldest; the victims hold nothing.
    std::set<SeqId> preempted(plan->preempted.begin(), plan->preempted.end());
    EXPECT_EQ(preempted.size(), plan->preempted.size()) << Where();
    if (have_oldest) {
      EXPECT_EQ(preempted.count(oldest), 0u) << Where() << "oldest preempted";
    }
    for (SeqId id : plan->preempted) {
      Shadow& sh = shadow_.at(id);
      EXPECT_TRUE(sh.running) << Where();
      sh.running = false;
      sh.computed = 0;
      const std::optional<SequenceView> v = s.Find(id);
      ASSERT_TRUE(v.has_value()) << Where();
      EXPECT_EQ(v->phase, SeqPhase::kWaiting) << Where();
      EXPECT_EQ(v->kv_blocks, 0) << Where();
    }
    if (!preempted.empty()) {
      for (const Chunk& c : plan->prefills) {
        EXPECT_EQ(was_waiting.count(c.id), 0u) << Where() << "admitted in a preempting step";
      }
    }

    // Every decoding sequence not preempted decodes.
    std::set<SeqId> decoded;
    for (const Chunk& c : plan->decodes) {
      decoded.insert(c.id);
      EXPECT_EQ(c.end, c.begin + 1) << Where();
      EXPECT_TRUE(c.samples) << Where();
    }
    for (SeqId id : decoding) {
      if (preempted.count(id) == 0) {
        EXPECT_EQ(decoded.count(id), 1u) << Where() << id;
      }
    }

    // Budget, batch bound, one chunk per sequence, distinct slots.
    EXPECT_LE(plan->tokens(), opts_.token_budget) << Where();
    EXPECT_LE(plan->batch_size(), static_cast<size_t>(opts_.max_sequences)) << Where();
    std::set<SeqId> ids;
    std::set<int32_t> slots;
    std::vector<Chunk> chunks = plan->decodes;
    chunks.insert(chunks.end(), plan->prefills.begin(), plan->prefills.end());
    for (const Chunk& c : chunks) {
      EXPECT_TRUE(ids.insert(c.id).second) << Where() << "two chunks for " << c.id;
      EXPECT_TRUE(slots.insert(c.state_slot).second) << Where() << "slot shared";
      EXPECT_EQ(preempted.count(c.id), 0u) << Where();
      Shadow& sh = shadow_.at(c.id);
      EXPECT_FALSE(sh.ended) << Where();
      if (was_waiting.count(c.id) != 0) {
        EXPECT_FALSE(sh.running) << Where();
        EXPECT_EQ(c.begin, 0) << Where() << "a (re)admitted sequence starts at 0";
        sh.running = true;
      }
      EXPECT_EQ(c.begin, sh.computed) << Where() << "chunk of " << c.id << " skips or repeats";
      EXPECT_GT(c.end, c.begin) << Where();
      EXPECT_LE(c.end, sh.known()) << Where();
      EXPECT_EQ(c.samples, c.end == sh.known() && sh.max_new > 0)
          << Where() << "chunk " << c.id << " [" << c.begin << "," << c.end << ") known "
          << sh.known() << " generated " << sh.generated << " max_new " << sh.max_new;
      EXPECT_GE(s.kv_blocks().TokensHeld(c.id), c.end) << Where();
      EXPECT_EQ(s.Find(c.id)->state_slot, c.state_slot) << Where();
    }
    // A scheduler with work always schedules some.
    if (plan->empty()) {
      EXPECT_TRUE(s.idle()) << Where() << "an empty plan with work left";
      return;
    }
    const absl::Status inv = s.CheckInvariants();
    ASSERT_TRUE(inv.ok()) << Where() << inv;

    // A client may go away while the step runs.
    if (may_cancel && R(10) == 0) {
      CancelOne(s, chunks[R(chunks.size())].id);
      ++counts_.cancels_in_flight;
    }

    std::vector<Sampled> sampled;
    std::map<SeqId, bool> stops;
    for (const Chunk& c : chunks) {
      if (!c.samples) continue;
      const bool stop = R(25) == 0;
      stops[c.id] = stop;
      // A cancelled sequence's token may still be reported: ignored.
      if (!shadow_.at(c.id).ended || R(2) == 0) sampled.push_back({c.id, stop});
    }
    // Any order.
    for (size_t i = sampled.size(); i > 1; --i) std::swap(sampled[i - 1], sampled[R(i)]);
    absl::StatusOr<std::vector<Finished>> done = s.Complete(sampled);
    ASSERT_TRUE(done.ok()) << Where() << done.status();

    std::map<SeqId, FinishReason> expect;
    for (const Chunk& c : chunks) {
      Shadow& sh = shadow_.at(c.id);
      if (sh.ended) continue;  // cancelled mid-step
      sh.computed = c.end;
      if (c.samples) {
        ++sh.generated;
        if (stops.at(c.id)) {
          expect[c.id] = FinishReason::kStopped;
        } else if (sh.generated >= sh.max_new) {
          expect[c.id] = FinishReason::kLength;
        } else if (sh.known() > opts_.context_per_sequence) {
          expect[c.id] = FinishReason::kContext;
        }
      } else if (sh.computed == sh.known()) {
        expect[c.id] = FinishReason::kLength;
      }
    }
    std::map<SeqId, FinishReason> got;
    for (const Finished& f : *done) {
      got[f.id] = f.reason;
      ++counts_.by_reason[static_cast<int>(f.reason)];
      EXPECT_EQ(f.generated, shadow_.at(f.id).generated) << Where();
      shadow_.at(f.id).ended = true;
    }
    EXPECT_EQ(got, expect) << Where();
  }

  // The scheduler's view of every sequence agrees with the shadow.
  void Check(const Scheduler& s, int op) {
    const absl::Status inv = s.CheckInvariants();
    ASSERT_TRUE(inv.ok()) << Where() << "op " << op << ": " << inv;
    size_t live = 0;
    for (const auto& [id, sh] : shadow_) {
      const std::optional<SequenceView> v = s.Find(id);
      ASSERT_EQ(v.has_value(), !sh.ended) << Where() << "op " << op << " sequence " << id;
      if (!v.has_value()) continue;
      ++live;
      EXPECT_EQ(v->generated, sh.generated) << Where();
      EXPECT_EQ(v->known, sh.known()) << Where();
      EXPECT_EQ(v->computed, sh.computed) << Where();
      EXPECT_EQ(v->phase != SeqPhase::kWaiting, sh.running) << Where();
      EXPECT_EQ(v->state_slot.has_value(), sh.running) << Where();
    }
    const SchedulerStats st = s.Stats();
    EXPECT_EQ(static_cast<size_t>(st.running + st.waiting), live) << Where();
    EXPECT_EQ(st.kv_blocks_used, s.kv_blocks().used_blocks()) << Where();
  }

  std::mt19937 rng_;
  const uint32_t seed_;
  SchedulerOptions opts_;
  std::map<SeqId, Shadow> shadow_;
  SeqId next_id_ = 1;
  absl::Time now_ = absl::FromUnixSeconds(1000000);
  std::string trace_;
  Counts counts_;
};

TEST(SchedulerFuzzTest, RandomOperationsKeepEveryRule) {
  Fuzz::Counts total;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    Fuzz f(seed);
    f.Run(1500);
    if (::testing::Test::HasFailure()) break;
    total.steps += f.counts().steps;
    total.preemptions += f.counts().preemptions;
    total.deadlines += f.counts().deadlines;
    total.cancels_in_flight += f.counts().cancels_in_flight;
    for (int r = 0; r < 5; ++r) total.by_reason[r] += f.counts().by_reason[r];
  }
  // The run reached every path it means to test.
  std::cout << "steps " << total.steps << ", preemptions " << total.preemptions
            << ", deadlines " << total.deadlines << ", cancels in flight "
            << total.cancels_in_flight << ", ended by length " << total.by_reason[0]
            << ", context " << total.by_reason[1] << ", stopped " << total.by_reason[2] << "\n";
  EXPECT_GT(total.preemptions, 100u);
  EXPECT_GT(total.deadlines, 100u);
  EXPECT_GT(total.cancels_in_flight, 100u);
  EXPECT_GT(total.by_reason[static_cast<int>(FinishReason::kLength)], 100u);
  EXPECT_GT(total.by_reason[static_cast<int>(FinishReason::kContext)], 100u);
  EXPECT_GT(total.by_reason[static_cast<int>(FinishReason::kStopped)], 100u);
}

// The same seed gives the same steps.
TEST(SchedulerFuzzTest, SameSeedSameSteps) {
  for (uint32_t seed : {7u, 77u, 777u}) {
    const std::string a = Fuzz(seed).Run(800);
    const std::string b = Fuzz(seed).Run(800);
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, b) << "seed " << seed;
  }
}

}  // namespace
}  // namespace sluice::sched
