#include "sched/scheduler.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace sluice::sched {
namespace {

absl::Time T(int64_t seconds) { return absl::FromUnixSeconds(1000000 + seconds); }

// A small pool: blocks of 4 tokens, contexts of 32.
SchedulerOptions Small() {
  SchedulerOptions o;
  o.max_sequences = 4;
  o.token_budget = 16;
  o.context_per_sequence = 32;
  o.block_tokens = 4;
  o.kv_blocks = 16;
  o.decode_headroom_tokens = 4;
  return o;
}

Scheduler Make(const SchedulerOptions& o) {
  absl::StatusOr<Scheduler> s = Scheduler::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

SequenceRequest Req(SeqId id, int64_t prompt, int64_t max_new,
                    absl::Time deadline = absl::InfiniteFuture()) {
  return {id, prompt, max_new, deadline};
}

std::string ChunkText(const Chunk& c) {
  return absl::StrCat(c.id, ":[", c.begin, ",", c.end, ")", c.samples ? "s" : "");
}

// "D 1:[5,6)s 2:[3,4)s | P 3:[0,12) | X 4 | F 5:deadline", parts left out
// when empty.
std::string Text(const StepPlan& p) {
  std::vector<std::string> parts;
  auto chunks = [](const std::vector<Chunk>& cs) {
    std::vector<std::string> t;
    for (const Chunk& c : cs) t.push_back(ChunkText(c));
    return absl::StrJoin(t, " ");
  };
  if (!p.decodes.empty()) parts.push_back("D " + chunks(p.decodes));
  if (!p.prefills.empty()) parts.push_back("P " + chunks(p.prefills));
  if (!p.preempted.empty()) parts.push_back("X " + absl::StrJoin(p.preempted, " "));
  if (!p.finished.empty()) {
    std::vector<std::string> t;
    for (const Finished& f : p.finished) t.push_back(absl::StrCat(f.id, ":", FinishReasonName(f.reason)));
    parts.push_back("F " + absl::StrJoin(t, " "));
  }
  return absl::StrJoin(parts, " | ");
}

std::string Text(const std::vector<Finished>& fs) {
  std::vector<std::string> t;
  for (const Finished& f : fs) {
    t.push_back(absl::StrCat(f.id, ":", FinishReasonName(f.reason), "/", f.generated));
  }
  return absl::StrJoin(t, " ");
}

struct StepOut {
  StepPlan plan;
  std::vector<Finished> finished;  // by Complete
};

// Schedules at `now`, samples a token for every sampling chunk (a stopping
// one for the ids in `stops`), completes, and checks the invariants.
StepOut Step(Scheduler& s, absl::Time now = T(0), const std::set<SeqId>& stops = {}) {
  StepOut out;
  absl::StatusOr<StepPlan> plan = s.Schedule(now);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return out;
  out.plan = *plan;
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
  if (!plan->empty()) {
    std::vector<Sampled> sampled;
    for (const auto* list : {&plan->decodes, &plan->prefills}) {
      for (const Chunk& c : *list) {
        if (c.samples) sampled.push_back({c.id, stops.count(c.id) != 0});
      }
    }
    absl::StatusOr<std::vector<Finished>> f = s.Complete(sampled);
    EXPECT_TRUE(f.ok()) << f.status();
    if (f.ok()) out.finished = *f;
  }
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
  return out;
}

std::string StepText(Scheduler& s, absl::Time now = T(0), const std::set<SeqId>& stops = {}) {
  StepOut o = Step(s, now, stops);
  std::string t = Text(o.plan);
  if (!o.finished.empty()) absl::StrAppend(&t, " => ", Text(o.finished));
  return t;
}

// ---- Options ----

TEST(SchedulerTest, CreateRefusesOptionsThatCannotWork) {
  auto refused = [](SchedulerOptions o) -> std::string {
    absl::StatusOr<Scheduler> s = Scheduler::Create(o);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.status().message());
  };
  SchedulerOptions o = Small();
  o.max_sequences = 0;
  EXPECT_EQ(refused(o), "scheduler: max_sequences = 0: must be >= 1");
  o = Small();
  o.token_budget = 3;
  EXPECT_EQ(refused(o),
            "scheduler: token_budget = 3: must be >= max_sequences (4), so that every running "
            "sequence decodes every step");
  o = Small();
  o.kv_blocks = 7;
  EXPECT_EQ(refused(o),
            "scheduler: kv_blocks = 7: one sequence of 32 tokens needs 8 blocks of 4 tokens");
  o = Small();
  o.state_slots = 5;
  EXPECT_EQ(refused(o), "scheduler: state_slots = 5: must be in [0, max_sequences = 4] (0: "
                        "max_sequences)");
  o = Small();
  o.watermark_blocks = 9;
  EXPECT_EQ(refused(o), "scheduler: watermark_blocks = 9: must be in [0, 8] (kv_blocks less one "
                        "context's blocks), or a sequence alone could not start");
  o = Small();
  o.context_per_sequence = 0;
  refused(o);
  o = Small();
  o.block_tokens = 0;
  refused(o);
  o = Small();
  o.decode_headroom_tokens = -1;
  refused(o);
  o = Small();
  o.max_waiting = -1;
  refused(o);
  Scheduler s = Make(Small());
  EXPECT_EQ(s.options().state_slots, 4);  // 0 means max_sequences
  EXPECT_EQ(s.state_slots().num_slots(), 4);
  EXPECT_EQ(s.kv_blocks().num_blocks(), 16);
}

// ---- Add refusals ----

TEST(SchedulerTest, AddRefusesWhatCanNeverRun) {
  SchedulerOptions o = Small();
  o.max_waiting = 2;
  Scheduler s = Make(o);
  EXPECT_EQ(s.Add(Req(1, 0, 4)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Add(Req(1, 4, -1)).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status too_long = s.Add(Req(1, 33, 4));
  EXPECT_EQ(too_long.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(std::string(too_long.message()),
            "sequence 1: a prompt of 33 tokens does not fit in a context of 32 tokens");
  ASSERT_TRUE(s.Add(Req(1, 32, 4)).ok());  // exactly the context: one token fits
  EXPECT_EQ(s.Add(Req(1, 4, 4)).code(), absl::StatusCode::kInvalidArgument);  // id in use
  ASSERT_TRUE(s.Add(Req(2, 4, 4)).ok());
  const absl::Status full = s.Add(Req(3, 4, 4));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(full.message()),
            "sequence 3: 2 sequences are waiting already (at most 2)");
  EXPECT_EQ(s.Stats().waiting, 2);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

// ---- One sequence ----

// Prompt 5, 3 new tokens: one prefill that samples, then two decodes; the
// third token ends it. Admission reserves the prompt and the headroom,
// capped at the positions it can ever evaluate: min(5 + 4, 5 + 3 - 1) = 7,
// 2 blocks.
TEST(SchedulerTest, OneSequencePrefillsOnceThenDecodes) {
  Scheduler s = Make(Small());
  ASSERT_TRUE(s.Add(Req(1, 5, 3)).ok());
  EXPECT_EQ(s.Find(1)->phase, SeqPhase::kWaiting);
  EXPECT_EQ(s.Stats().decoding, 0);
  EXPECT_EQ(StepText(s), "P 1:[0,5)s");
  EXPECT_EQ(s.Find(1)->phase, SeqPhase::kDecoding);
  EXPECT_EQ(s.Stats().running, 1);
  EXPECT_EQ(s.Stats().decoding, 1);
  EXPECT_EQ(s.Find(1)->kv_blocks, 2);  // min(5 + 4, 7) = 7 positions
  EXPECT_EQ(s.Find(1)->state_slot, 0);
  EXPECT_EQ(StepText(s), "D 1:[5,6)s");
  EXPECT_EQ(StepText(s), "D 1:[6,7)s => 1:length/3");
  EXPECT_FALSE(s.Find(1).has_value());
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.kv_blocks().free_blocks(), 16);
  EXPECT_EQ(s.state_slots().free_slots(), 4);
  // Nothing to do: an empty plan, no Complete needed.
  absl::StatusOr<StepPlan> idle = s.Schedule(T(0));
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle->empty());
  EXPECT_EQ(idle->step, 0u);
  EXPECT_FALSE(s.in_flight());
  EXPECT_EQ(s.Stats().steps, 3u);
  EXPECT_EQ(s.Stats().tokens_scheduled, 7u);
}

TEST(SchedulerTest, ZeroNewTokensEvaluatesThePromptOnly) {
  Scheduler s = Make(Small());
  ASSERT_TRUE(s.Add(Req(1, 20, 0)).ok());
  EXPECT_EQ(StepText(s), "P 1:[0,16)");
  // Running, still prefilling: not decoding.
  EXPECT_EQ(s.Stats().running, 1);
  EXPECT_EQ(s.Stats().decoding, 0);
  EXPECT_EQ(StepText(s), "P 1:[16,20) => 1:length/0");
  EXPECT_TRUE(s.idle());
}

// Like Generate: a prompt of the whole context still samples one token;
// prompt P in context C samples C - P + 1 tokens, then kContext.
TEST(SchedulerTest, ContextLimitEndsGeneration) {
  Scheduler s = Make(Small());
  ASSERT_TRUE(s.Add(Req(1, 32, 10)).ok());
  EXPECT_EQ(StepText(s), "P 1:[0,16)");
  EXPECT_EQ(StepText(s), "P 1:[16,32)s => 1:context/1");
  ASSERT_TRUE(s.Add(Req(2, 30, 10)).ok());
  StepText(s);                                       // [0,16)
  EXPECT_EQ(StepText(s), "P 2:[16,30)s");            // token 1
  EXPECT_EQ(StepText(s), "D 2:[30,31)s");            // token 2
  EXPECT_EQ(StepText(s), "D 2:[31,32)s => 2:context/3");
  EXPECT_TRUE(s.idle());
}

TEST(SchedulerTest, StopReportedByTheCallerEndsIt) {
  Scheduler s = Make(Small());
  ASSERT_TRUE(s.Add(Req(1, 3, 10)).ok());
  EXPECT_EQ(StepText(s), "P 1:[0,3)s");
  EXPECT_EQ(StepText(s, T(0), {1}), "D 1:[3,4)s => 1:stopped/2");
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.kv_blocks().free_blocks(), 16);
}

// ---- Admission ----

// Blocks: 1 and 2 hold 13 of 16 blocks; 3 needs min(20 + 4, 32) = 24
// positions = 6 blocks, so it waits, and 4 behind it (2 blocks, which would
// fit) waits too: admission is in arrival order.
TEST(SchedulerTest, AdmissionWaitsForBlocksInArrivalOrder) {
  Scheduler t = Make(Small());
  ASSERT_TRUE(t.Add(Req(1, 28, 30)).ok());  // min(32, 32) -> 8 blocks
  ASSERT_TRUE(t.Add(Req(2, 14, 30)).ok());  // min(18, 32) -> 5 blocks
  ASSERT_TRUE(t.Add(Req(3, 20, 30)).ok());  // min(24, 32) -> 6 blocks: does not fit
  ASSERT_TRUE(t.Add(Req(4, 1, 30)).ok());   // 2 blocks: would fit, waits behind 3
  EXPECT_EQ(StepText(t), "P 1:[0,16)");
  EXPECT_EQ(StepText(t), "P 1:[16,28)s 2:[0,4)");
  EXPECT_EQ(t.kv_blocks().used_blocks(), 13);
  EXPECT_EQ(StepText(t), "D 1:[28,29)s | P 2:[4,14)s");
  EXPECT_EQ(t.Find(3)->phase, SeqPhase::kWaiting);
  EXPECT_EQ(t.Find(4)->phase, SeqPhase::kWaiting);
  EXPECT_EQ(t.Stats().running, 2);
  EXPECT_EQ(t.Stats().waiting, 2);
}

TEST(SchedulerTest, AdmissionIsBoundedByMaxSequencesAndSlots) {
  SchedulerOptions o = Small();
  o.max_sequences = 2;
  o.token_budget = 16;
  Scheduler s = Make(o);
  for (SeqId id = 1; id <= 3; ++id) ASSERT_TRUE(s.Add(Req(id, 2, 5)).ok());
  EXPECT_EQ(StepText(s), "P 1:[0,2)s 2:[0,2)s");
  EXPECT_EQ(s.Find(3)->phase, SeqPhase::kWaiting);
  EXPECT_EQ(StepText(s), "D 1:[2,3)s 2:[2,3)s");
  EXPECT_EQ(s.Stats().running, 2);

  o = Small();
  o.state_slots = 2;  // fewer slots than max_sequences
  Scheduler t = Make(o);
  for (SeqId id = 1; id <= 3; ++id) ASSERT_TRUE(t.Add(Req(id, 2, 2)).ok());
  EXPECT_EQ(StepText(t), "P 1:[0,2)s 2:[0,2)s");
  EXPECT_EQ(t.Find(1)->state_slot, 0);
  EXPECT_EQ(t.Find(2)->state_slot, 1);
  EXPECT_EQ(StepText(t), "D 1:[2,3)s 2:[2,3)s => 1:length/2 2:length/2");
  // The freed slot goes to 3 (the lowest free one).
  EXPECT_EQ(StepText(t), "P 3:[0,2)s");
  EXPECT_EQ(t.Find(3)->state_slot, 0);
}

TEST(SchedulerTest, AdmissionLeavesTheWatermarkFree) {
  SchedulerOptions o = Small();
  o.watermark_blocks = 4;
  Scheduler s = Make(o);
  ASSERT_TRUE(s.Add(Req(1, 28, 30)).ok());  // 8 blocks: 8 free after
  ASSERT_TRUE(s.Add(Req(2, 14, 30)).ok());  // 5 blocks: would leave 3 < 4
  EXPECT_EQ(StepText(s), "P 1:[0,16)");
  EXPECT_EQ(StepText(s), "P 1:[16,28)s");
  EXPECT_EQ(s.Find(2)->phase, SeqPhase::kWaiting);
  ASSERT_TRUE(s.Cancel(1).ok());
  EXPECT_EQ(StepText(s), "P 2:[0,14)s");
}

// ---- Chunked prefill beside decode ----

// Four streams decode while a 4,096-token prompt arrives: budget 256, so
// every step carries the four decodes and a 252-token chunk; the prompt
// takes ceil(4096 / 252) = 17 steps and samples at the last; no stream
// misses a step.
TEST(SchedulerTest, LongPromptIsChunkedBetweenDecodeSteps) {
  SchedulerOptions o;
  o.max_sequences = 8;
  o.token_budget = 256;
  o.context_per_sequence = 8192;
  o.block_tokens = 16;
  o.kv_blocks = 8 * 512;
  o.decode_headroom_tokens = 16;
  Scheduler s = Make(o);
  for (SeqId id = 1; id <= 4; ++id) ASSERT_TRUE(s.Add(Req(id, 10, 1000)).ok());
  EXPECT_EQ(StepText(s), "P 1:[0,10)s 2:[0,10)s 3:[0,10)s 4:[0,10)s");
  ASSERT_TRUE(s.Add(Req(9, 4096, 50)).ok());
  std::vector<int64_t> tokens(5, 1);  // sampled per stream (1..4); [0] unused
  int64_t begin = 0;
  int steps = 0;
  while (true) {
    StepOut o = Step(s);
    ++steps;
    ASSERT_EQ(o.plan.decodes.size(), 4u) << "step " << steps << ": " << Text(o.plan);
    for (size_t i = 0; i < 4; ++i) {
      const Chunk& d = o.plan.decodes[i];
      EXPECT_EQ(d.id, i + 1);  // oldest first
      EXPECT_EQ(d.begin, 10 + tokens[d.id] - 1);
      EXPECT_TRUE(d.samples);
      ++tokens[d.id];
    }
    ASSERT_EQ(o.plan.prefills.size(), 1u);
    const Chunk& c = o.plan.prefills[0];
    EXPECT_EQ(c.id, 9u);
    EXPECT_EQ(c.begin, begin);
    EXPECT_EQ(c.tokens(), std::min<int64_t>(252, 4096 - begin));
    EXPECT_LE(o.plan.tokens(), 256);
    begin = c.end;
    if (c.samples) break;
  }
  EXPECT_EQ(steps, 17);
  EXPECT_EQ(begin, 4096);
  // From now on 9 decodes beside the others: five tokens a step.
  StepOut next = Step(s);
  EXPECT_EQ(Text(next.plan), "D 1:[27,28)s 2:[27,28)s 3:[27,28)s 4:[27,28)s 9:[4096,4097)s");
}

// A prefill cap limits the prompt's chunks in steps with decodes only: the
// 100-token prompt goes 5 tokens a step beside the running stream, and the
// rest of it in one step once nothing decodes.
TEST(SchedulerTest, PrefillCapAppliesOnlyBesideDecodes) {
  SchedulerOptions o = Small();
  o.token_budget = 128;
  o.context_per_sequence = 128;
  o.kv_blocks = 64;
  Scheduler s = Make(o);
  ASSERT_TRUE(s.Add(Req(1, 3, 2)).ok());
  ASSERT_TRUE(s.Schedule(T(0), 5).ok());  // 1's prompt alone: no decode, no cap
  ASSERT_TRUE(s.Complete({{1, false}}).ok());
  ASSERT_TRUE(s.Add(Req(2, 100, 1)).ok());
  absl::StatusOr<StepPlan> p = s.Schedule(T(0), 5);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Text(*p), "D 1:[3,4)s | P 2:[0,5)");
  ASSERT_TRUE(s.Complete({{1, false}}).ok());  // 1 ends: 2 tokens
  p = s.Schedule(T(0), 5);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Text(*p), "P 2:[5,100)s");
}

// Two prompts share what the decodes leave, oldest first.
TEST(SchedulerTest, PrefillBudgetGoesToTheOldestFirst) {
  Scheduler s = Make(Small());
  ASSERT_TRUE(s.Add(Req(1, 2, 10)).ok());
  EXPECT_EQ(StepText(s), "P 1:[0,2)s");
  ASSERT_TRUE(s.Add(Req(2, 20, 4)).ok());
  ASSERT_TRUE(s.Add(Req(3, 6, 4)).ok());
  EXPECT_EQ(StepText(s), "D 1:[2,3)s | P 2:[0,15)");
  EXPECT_EQ(StepText(s), "D 1:[3,4)s | P 2:[15,20)s 3:[0,6)s");
  EXPECT_EQ(StepText(s), "D 1:[4,5)s 2:[20,21)s 3:[6,7)s");
}

// ---- Preemption ----

SchedulerOptions Tight() {
  SchedulerOptions o = Small();
  o.kv_blocks = 8;  // one context
  o.token_budget = 32;
  o.decode_headroom_tokens = 0;
  return o;
}

// 1 and 2 fill the pool; when 1 (the oldest) needs a 5th block, 2 (the
// newest) is preempted: its blocks and slot are freed and it goes back to
// the front of the queue, ahead of 3; nothing is admitted in that step.
// When 1 ends, 2 re-evaluates its prompt and the token it had sampled
// (never sampling that one again) and samples its second.
TEST(SchedulerTest, PreemptsTheNewestAndResumesByRecompute) {
  Scheduler s = Make(Tight());
  ASSERT_TRUE(s.Add(Req(1, 16, 8)).ok());   // 4 blocks
  ASSERT_TRUE(s.Add(Req(2, 16, 20)).ok());  // 4 blocks
  ASSERT_TRUE(s.Add(Req(3, 1, 1)).ok());    // 1 block: none left
  EXPECT_EQ(StepText(s), "P 1:[0,16)s 2:[0,16)s");
  EXPECT_EQ(s.kv_blocks().free_blocks(), 0);
  EXPECT_EQ(StepText(s), "D 1:[16,17)s | X 2");
  const SequenceView two = *s.Find(2);
  EXPECT_EQ(two.phase, SeqPhase::kWaiting);
  EXPECT_EQ(two.computed, 0);
  EXPECT_EQ(two.generated, 1);
  EXPECT_EQ(two.known, 17);
  EXPECT_EQ(two.kv_blocks, 0);
  EXPECT_EQ(two.state_slot, std::nullopt);
  EXPECT_EQ(two.preemptions, 1);
  EXPECT_EQ(s.Stats().preemptions, 1u);
  EXPECT_EQ(s.Stats().running, 1);
  std::vector<SequenceView> all = s.Sequences();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, 1u);
  EXPECT_EQ(all[1].id, 2u);  // the front of the queue
  EXPECT_EQ(all[2].id, 3u);
  // 2 needs 17 positions (5 blocks) to resume; 1 holds 5 of 8 now.
  EXPECT_EQ(StepText(s), "D 1:[17,18)s");
  for (int64_t p = 18; p < 22; ++p) {
    EXPECT_EQ(StepText(s), absl::StrCat("D 1:[", p, ",", p + 1, ")s"));
  }
  EXPECT_EQ(StepText(s), "D 1:[22,23)s => 1:length/8");
  EXPECT_EQ(StepText(s), "P 2:[0,17)s 3:[0,1)s => 3:length/1");
  EXPECT_EQ(s.Find(2)->generated, 2);
  EXPECT_EQ(StepText(s), "D 2:[17,18)s");
}

// 2 is the newest and the one that needs a block: it preempts itself; 1
// (older) keeps decoding.
TEST(SchedulerTest, TheNewestPreemptsItself) {
  Scheduler s = Make(Tight());
  ASSERT_TRUE(s.Add(Req(1, 12, 30)).ok());  // 3 blocks
  ASSERT_TRUE(s.Add(Req(2, 16, 30)).ok());  // 4 blocks
  EXPECT_EQ(StepText(s), "P 1:[0,12)s 2:[0,16)s");
  // 1 takes the last free block (position 12); 2 needs one for 16.
  EXPECT_EQ(StepText(s), "D 1:[12,13)s | X 2");
  EXPECT_EQ(s.Find(2)->phase, SeqPhase::kWaiting);
  EXPECT_EQ(s.kv_blocks().used_blocks(), 4);
  // 2 needs 17 positions (5 blocks); 4 are free.
  EXPECT_EQ(StepText(s), "D 1:[13,14)s");
}

// A long resumed sequence is chunked like any prompt; the preempted
// sequence's tokens count against the budget again (recompute).
TEST(SchedulerTest, ResumedSequenceIsChunked) {
  SchedulerOptions o = Tight();
  o.token_budget = 8;
  Scheduler s = Make(o);
  ASSERT_TRUE(s.Add(Req(1, 4, 30)).ok());   // 1 block
  ASSERT_TRUE(s.Add(Req(2, 4, 30)).ok());   // 1 block
  EXPECT_EQ(StepText(s), "P 1:[0,4)s 2:[0,4)s");
  // Both grow one block every 4 steps; with 8 blocks they collide when
  // each needs its 5th: 1 holds 4 and 2 holds 4 at positions 16.
  std::string last;
  int steps = 0;
  while (s.Stats().preemptions == 0 && steps < 40) {
    last = StepText(s);
    ++steps;
  }
  EXPECT_EQ(last, "D 1:[16,17)s | X 2");
  EXPECT_EQ(s.Find(2)->known, 17);
  // 1 runs alone until the context is full: positions 17 .. 31.
  for (int i = 0; i < 14; ++i) StepText(s);
  EXPECT_EQ(s.Find(1)->known, 32);
  EXPECT_EQ(StepText(s), "D 1:[31,32)s => 1:context/29");
  EXPECT_EQ(StepText(s), "P 2:[0,8)");
  EXPECT_EQ(StepText(s), "P 2:[8,16)");
  // The last known position is evaluated like a decode, and samples.
  EXPECT_EQ(StepText(s), "D 2:[16,17)s");
  EXPECT_EQ(s.Find(2)->generated, 14);
}

// ---- Cancel ----

TEST(SchedulerTest, CancelFreesMemoryInEveryPhase) {
  Scheduler s = Make(Small());
  ASSERT_TRUE(s.Add(Req(1, 30, 10)).ok());  // prefills over two steps
  ASSERT_TRUE(s.Add(Req(2, 2, 10)).ok());
  ASSERT_TRUE(s.Add(Req(3, 2, 10)).ok());
  EXPECT_EQ(StepText(s), "P 1:[0,16)");
  EXPECT_EQ(s.Find(1)->phase, SeqPhase::kPrefilling);
  const int32_t free_before = s.kv_blocks().free_blocks();
  // Mid-prefill.
  ASSERT_TRUE(s.Cancel(1).ok());
  EXPECT_FALSE(s.Find(1).has_value());
  EXPECT_EQ(s.kv_blocks().free_blocks(), free_before + 8);
  EXPECT_EQ(s.kv_blocks().free_blocks(), 16);
  EXPECT_EQ(s.state_slots().free_slots(), 4);
  EXPECT_TRUE(s.CheckInvariants().ok());
  EXPECT_EQ(StepText(s), "P 2:[0,2)s 3:[0,2)s");
  // Mid-decode.
  ASSERT_TRUE(s.Cancel(2).ok());
  EXPECT_EQ(s.kv_blocks().used_blocks(), 2);  // 3's min(2 + 4, 11) = 6 positions
  EXPECT_EQ(StepText(s), "D 3:[2,3)s");
  // Waiting.
  ASSERT_TRUE(s.Add(Req(4, 2, 10)).ok());
  ASSERT_TRUE(s.Cancel(4).ok());
  EXPECT_EQ(s.Stats().waiting, 0);
  EXPECT_EQ(s.Cancel(4).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.Cancel(77).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(s.Cancel(3).ok());
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.kv_blocks().free_blocks(), 16);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

// A cancel between Schedule and Complete frees the memory at once; the
// step's token for it is ignored, and its id cannot come back until the
// step is completed.
TEST(SchedulerTest, CancelWhileAStepIsInFlight) {
  Scheduler s = Make(Small());
  ASSERT_TRUE(s.Add(Req(1, 4, 10)).ok());
  ASSERT_TRUE(s.Add(Req(2, 4, 10)).ok());
  absl::StatusOr<StepPlan> plan = s.Schedule(T(0));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Text(*plan), "P 1:[0,4)s 2:[0,4)s");
  ASSERT_TRUE(s.Cancel(1).ok());
  EXPECT_EQ(s.kv_blocks().used_blocks(), 2);
  EXPECT_EQ(s.Add(Req(1, 4, 10)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(s.CheckInvariants().ok());
  absl::StatusOr<std::vector<Finished>> done = s.Complete({{1, false}, {2, false}});
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->empty());
  EXPECT_EQ(s.Find(2)->generated, 1);
  ASSERT_TRUE(s.Add(Req(1, 4, 10)).ok());
  EXPECT_TRUE(s.CheckInvariants().ok());
}

// ---- Deadlines ----

TEST(SchedulerTest, DeadlinesEndWaitingAndRunningSequences) {
  SchedulerOptions o = Small();
  o.max_sequences = 1;
  o.token_budget = 4;
  Scheduler s = Make(o);
  ASSERT_TRUE(s.Add(Req(1, 8, 10, T(10))).ok());
  ASSERT_TRUE(s.Add(Req(2, 8, 10, T(5))).ok());  // waits behind 1
  ASSERT_TRUE(s.Add(Req(3, 2, 1)).ok());         // no deadline
  EXPECT_EQ(StepText(s, T(0)), "P 1:[0,4)");
  EXPECT_EQ(StepText(s, T(4)), "P 1:[4,8)s");
  // Exactly at its deadline 2 ends; 1 decodes.
  EXPECT_EQ(StepText(s, T(5)), "D 1:[8,9)s | F 2:deadline");
  EXPECT_FALSE(s.Find(2).has_value());
  EXPECT_EQ(StepText(s, T(9)), "D 1:[9,10)s");
  // 1 ends mid-decode: its memory is freed and 3 is admitted the same step.
  const StepOut out = Step(s, T(10));
  EXPECT_EQ(Text(out.plan), "P 3:[0,2)s | F 1:deadline");
  ASSERT_EQ(out.plan.finished.size(), 1u);
  EXPECT_EQ(out.plan.finished[0].generated, 3);
  EXPECT_EQ(Text(out.finished), "3:length/1");
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.kv_blocks().free_blocks(), 16);
}

// ---- The step protocol ----

TEST(SchedulerTest, CompleteChecksWhatWasSampled) {
  Scheduler s = Make(Small());
  EXPECT_EQ(s.Complete({}).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.Add(Req(1, 20, 10)).ok());
  ASSERT_TRUE(s.Add(Req(2, 2, 10)).ok());
  ASSERT_TRUE(s.Schedule(T(0)).ok());  // 1:[0,16) does not sample
  EXPECT_EQ(s.Schedule(T(0)).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.Complete({{1, false}}).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.Complete({}).ok());
  absl::StatusOr<StepPlan> p = s.Schedule(T(0));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Text(*p), "P 1:[16,20)s 2:[0,2)s");
  // Missing, duplicated: refused, nothing applied.
  EXPECT_EQ(s.Complete({{1, false}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Complete({{1, false}, {2, false}, {2, true}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Find(1)->computed, 16);
  EXPECT_TRUE(s.in_flight());
  // Unknown ids (cancelled or never seen) are ignored.
  absl::StatusOr<std::vector<Finished>> f = s.Complete({{2, true}, {1, false}, {99, false}});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Text(*f), "2:stopped/1");
  EXPECT_FALSE(s.in_flight());
  EXPECT_EQ(s.Find(1)->computed, 20);
  EXPECT_EQ(s.Find(1)->generated, 1);
}

TEST(SchedulerTest, StatsFollowTheSteps) {
  Scheduler s = Make(Small());
  ASSERT_TRUE(s.Add(Req(1, 6, 3)).ok());
  ASSERT_TRUE(s.Add(Req(2, 30, 3)).ok());
  Step(s);
  SchedulerStats st = s.Stats();
  EXPECT_EQ(st.running, 2);
  EXPECT_EQ(st.waiting, 0);
  EXPECT_EQ(st.kv_blocks_total, 16);
  EXPECT_EQ(st.kv_blocks_used, 2 + 8);  // min(10, 8) -> 2; min(34, 32) -> 8
  EXPECT_EQ(st.state_slots_used, 2);
  EXPECT_EQ(st.steps, 1u);
  EXPECT_EQ(st.tokens_scheduled, 16u);
  EXPECT_EQ(st.last_batch_size, 2u);
}

}  // namespace
}  // namespace sluice::sched
