#include "worker/batch/batch_runner.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"

namespace sluice::worker {

absl::StatusOr<std::unique_ptr<BatchRunner>> BatchRunner::Create(
    const Engine& engine, const sched::SchedulerOptions& options) {
  if (options.context_per_sequence > engine.options().context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch runner: context_per_sequence = ", options.context_per_sequence,
        " exceeds the engine's context length ", engine.options().context_length));
  }
  ASSIGN_OR_RETURN(sched::Scheduler scheduler, sched::Scheduler::Create(options));
  std::vector<std::unique_ptr<Session>> sessions;
  for (int32_t s = 0; s < scheduler.state_slots().num_slots(); ++s) {
    ASSIGN_OR_RETURN(std::unique_ptr<Session> session, engine.NewSession());
    sessions.push_back(std::move(session));
  }
  return std::unique_ptr<BatchRunner>(
      new BatchRunner(engine, std::move(scheduler), std::move(sessions)));
}

BatchRunner::BatchRunner(const Engine& engine, sched::Scheduler scheduler,
                         std::vector<std::unique_ptr<Session>> sessions)
    : engine_(engine), scheduler_(std::move(scheduler)), sessions_(std::move(sessions)) {}

absl::Status BatchRunner::Add(BatchRequest r) {
  const int64_t n_vocab = engine_.info().n_vocab;
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat("request ", r.id, ": token id ", t,
                                                     " outside [0, ", n_vocab, ")"));
    }
  }
  RETURN_IF_ERROR(ValidateSamplerParams(r.sampler));
  RETURN_IF_ERROR(scheduler_.Add({r.id, static_cast<int64_t>(r.prompt.size()), r.max_tokens,
                                  r.deadline}));
  Live live{std::move(r.prompt), Sampler(r.sampler)};
  // As Generate does: the prompt counts for the repetition penalty.
  for (int32_t t : live.tokens) live.sampler.Accept(t);
  live_.insert_or_assign(r.id, std::move(live));
  return absl::OkStatus();
}

absl::Status BatchRunner::Cancel(sched::SeqId id) {
  RETURN_IF_ERROR(scheduler_.Cancel(id));
  live_.erase(id);
  ReleaseIdleSlots();
  return absl::OkStatus();
}

void BatchRunner::ReleaseIdleSlots() {
  for (size_t slot = 0; slot < sessions_.size(); ++slot) {
    Session& s = *sessions_[slot];
    if (!scheduler_.state_slots().Held(static_cast<int32_t>(slot)) && s.state().position() > 0) {
      s.Reset();
    }
  }
}

uint64_t BatchRunner::ResidentStateBytes() const {
  uint64_t n = 0;
  for (const std::unique_ptr<Session>& s : sessions_) n += s->state().resident_bytes();
  return n;
}

bool BatchRunner::GrammarFinished(sched::SeqId id) const {
  const auto it = live_.find(id);
  return it != live_.end() && it->second.sampler.GrammarFinished();
}

absl::StatusOr<BatchForwardStats> BatchRunner::RunPlan(const sched::StepPlan& plan,
                                                       std::vector<float>* logits) {
  std::vector<BatchChunk> batch;
  for (const auto* chunks : {&plan.decodes, &plan.prefills}) {
    for (const sched::Chunk& c : *chunks) {
      Session& session = *sessions_.at(c.state_slot);
      // A new or resumed sequence: whatever the slot held belongs to another.
      if (c.begin == 0) session.Reset();
      const std::vector<int32_t>& tokens = live_.at(c.id).tokens;
      // ForwardBatch refuses a chunk whose begin is not where its slot is.
      batch.push_back({&session.state(), static_cast<int>(c.begin),
                       absl::MakeConstSpan(tokens).subspan(c.begin, c.tokens()),
                       c.samples ? LogitRows::kLast : LogitRows::kNone});
    }
  }
  return engine_.model().ForwardBatch(batch, logits);
}

absl::StatusOr<BatchRunner::StepResult> BatchRunner::Step(absl::Time now,
                                                          const BatchTokenCallback& on_token,
                                                          int64_t prefill_cap,
                                                          const BatchPassCallback& on_pass) {
  StepResult result;
  ASSIGN_OR_RETURN(result.plan, scheduler_.Schedule(now, prefill_cap));
  for (const sched::Finished& f : result.plan.finished) {
    live_.erase(f.id);
    result.finished.push_back(f);
  }
  if (result.plan.empty()) {
    ReleaseIdleSlots();
    return result;
  }
  std::vector<float> logits;
  ASSIGN_OR_RETURN(result.forward, RunPlan(result.plan, &logits));
  if (on_pass) on_pass(result.plan);
  // The sampling chunks' rows, in the batch's order.
  const int64_t n_vocab = engine_.info().n_vocab;
  std::vector<sched::Sampled> sampled;
  int64_t row = 0;
  for (const auto* chunks : {&result.plan.decodes, &result.plan.prefills}) {
    for (const sched::Chunk& c : *chunks) {
      if (!c.samples) continue;
      const absl::Span<const float> row_logits =
          absl::MakeConstSpan(logits).subspan(row++ * n_vocab, n_vocab);
      Live& live = live_.at(c.id);
      const int32_t token = live.sampler.Sample(row_logits);
      if (token < 0) {  // a grammar with nothing left to allow: the end
        sampled.push_back({c.id, /*stop=*/true});
        continue;
      }
      live.sampler.Accept(token);
      live.tokens.push_back(token);
      sampled.push_back({c.id, on_token(c.id, token)});
    }
  }
  ASSIGN_OR_RETURN(std::vector<sched::Finished> finished, scheduler_.Complete(sampled));
  for (const sched::Finished& f : finished) {
    live_.erase(f.id);
    result.finished.push_back(f);
  }
  ReleaseIdleSlots();
  return result;
}

}  // namespace sluice::worker
