#include "worker/generate_batch.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/utf8.h"
#include "worker/request_convert.h"

namespace sluice::worker {

using v1::SupervisorMessage;
using v1::WorkerMessage;

int32_t MaxSequences(const v1::WorkerConfig& config) {
  return std::max<int32_t>(1, static_cast<int32_t>(config.max_sequences()));
}

BatchLimits BatchLimitsOf(const v1::WorkerConfig& config) {
  // The supervisor sends on or off (daemon/config.cc); "" is the default.
  const PrefillPacing pacing =
      config.prefill_pacing() == "off" ? PrefillPacing::kOff : PrefillPacing::kOn;
  return {MaxSequences(config), static_cast<int64_t>(config.kv_cache_tokens()), pacing};
}

namespace {

constexpr int64_t kTokenBudget = 512;

PrefillPacer::Options PacerOptions() {
  PrefillPacer::Options o;
  o.max_tokens = kTokenBudget;
  return o;
}

// Each sequence has a session of the whole context (BatchRunner), but its
// KV costs memory only for the positions it holds where the backend keeps
// KV in demand pages (the CPU: base/demand_pages.h), so the pool of
// kv_cache_tokens positions is what bounds that memory: the scheduler
// admits and preempts to keep the sequences' blocks within it. Without a
// pool size, every sequence its whole context and nothing is preempted.
sched::SchedulerOptions SchedulerOptionsFor(const BatchLimits& limits, int context) {
  sched::SchedulerOptions o;
  o.max_sequences = limits.max_sequences;
  o.context_per_sequence = context;
  o.block_tokens = 16;
  const int64_t blocks_per_sequence = (context + o.block_tokens - 1) / o.block_tokens;
  const int64_t blocks = limits.kv_cache_tokens > 0
                             ? (limits.kv_cache_tokens + o.block_tokens - 1) / o.block_tokens
                             : blocks_per_sequence * o.max_sequences;
  o.kv_blocks = static_cast<int32_t>(std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max()));
  // A long prompt is evaluated in chunks of at most this many tokens between
  // the decode steps of the others (fewer while streams run: the pacer).
  o.token_budget = std::max<int64_t>(kTokenBudget, o.max_sequences);
  return o;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GenerateBatch>> GenerateBatch::Create(const Engine& engine,
                                                                     BatchLimits limits,
                                                                     Hooks hooks) {
  std::unique_ptr<GenerateBatch> batch(new GenerateBatch(engine, limits, std::move(hooks)));
  RETURN_IF_ERROR(batch->StartRunner());
  batch->PublishStats();
  return batch;
}

absl::Status GenerateBatch::StartRunner() {
  runner_.reset();  // its sessions go before the new ones are allocated
  ASSIGN_OR_RETURN(runner_, BatchRunner::Create(engine_, SchedulerOptionsFor(
                                                             limits_,
                                                             engine_.options().context_length)));
  // The counters move only in forward passes, and OnPass carries this on
  // from one to the next (a failed pass's figures go to nobody).
  counters_before_ = hooks_.experts().counters;
  return absl::OkStatus();
}

GenerateBatch::GenerateBatch(const Engine& engine, BatchLimits limits, Hooks hooks)
    : engine_(engine),
      limits_(limits),
      hooks_(std::move(hooks)),
      pacer_(PacerOptions()) {}

void GenerateBatch::CancelAll() {
  std::vector<uint64_t> ids;
  for (const auto& entry : live_) ids.push_back(entry.first);
  for (uint64_t id : ids) Cancel(id);
}

v1::BatchStats GenerateBatch::Stats() const {
  absl::MutexLock lock(&stats_mu_);
  return stats_;
}

void GenerateBatch::Admit(const SupervisorMessage& job) {
  const uint64_t id = job.request_id();
  const sluice::v1::GenerateRequest& request = job.generate();
  const int context = engine_.options().context_length;
  absl::StatusOr<GenerateParams> params = ToGenerateParams(engine_.tokenizer(), context, request);
  if (!params.ok()) {
    hooks_.send_error(id, params.status());
    return;
  }
  BatchRequest batch{id, params->prompt, params->sampler, params->max_tokens};
  if (job.deadline_unix_micros() > 0) {
    batch.deadline = absl::FromUnixMicros(job.deadline_unix_micros());
  }
  if (absl::Status s = runner_->Add(std::move(batch)); !s.ok()) {
    hooks_.send_error(id, s);
    return;
  }
  Live live(OutputText(engine_.tokenizer(), *params));
  live.prompt_tokens = static_cast<int>(params->prompt.size());
  live.max_tokens = params->max_tokens;
  live.added = absl::Now();
  // The lossy mode counts skipped experts even where nothing streams.
  if (const ExpertStreamStats start = hooks_.experts(); start.streaming || start.skipping) {
    live.experts.emplace(request.expert_token_stats());
  }
  live_.emplace(id, std::move(live));
}

void GenerateBatch::Cancel(uint64_t id) {
  const auto it = live_.find(id);
  if (it == live_.end()) return;
  (void)runner_->Cancel(id);  // NOT_FOUND: it ended in the last step
  prompt_tokens_ += it->second.prompt_tokens;
  generated_tokens_ += it->second.generated;
  live_.erase(it);
  hooks_.send_error(id, absl::CancelledError("cancelled by the client"));
}

void GenerateBatch::OnPass(const sched::StepPlan& plan) {
  hooks_.count_pass();
  // The pass's expert figures go to its sequences by their rows, so that a
  // request's figures are its share, not the whole batch's, and the shares
  // add up to the worker's counters (SlotCacheCounters::Portion).
  const memory::SlotCacheCounters now = hooks_.experts().counters;
  const memory::SlotCacheCounters step = now.Minus(counters_before_);
  counters_before_ = now;
  const uint64_t whole = static_cast<uint64_t>(plan.tokens());
  uint64_t at = 0;
  for (const auto* chunks : {&plan.decodes, &plan.prefills}) {
    for (const sched::Chunk& c : *chunks) {
      const uint64_t next = at + static_cast<uint64_t>(c.tokens());
      const auto it = live_.find(c.id);
      if (it != live_.end() && it->second.experts.has_value()) {
        it->second.experts->Add(step.Portion(at, next, whole));
      }
      at = next;
    }
  }
  // Stats describes the step whose tokens are about to go out.
  PublishStats();
}

bool GenerateBatch::OnToken(uint64_t id, int32_t token) {
  Live& live = live_.at(id);
  if (++live.generated == 1) live.first_token = absl::Now();
  if (live.experts.has_value()) live.experts->Token();
  // As Generate: the scheduler ends the request after this token.
  const bool last = live.generated >= live.max_tokens ||
                    live.prompt_tokens + live.generated > engine_.options().context_length;
  OutputText::Piece piece = live.output.Push(token, runner_->GrammarFinished(id), last);
  WorkerMessage msg;
  msg.set_request_id(id);
  msg.mutable_chunk()->add_token_ids(token);
  // The engine emits whole characters; sanitizing keeps a proto3 string
  // valid (an invalid one would not parse on the supervisor's side) even if
  // it did not.
  msg.mutable_chunk()->set_text(SanitizeUtf8(piece.text));
  hooks_.send(msg);
  if (hooks_.after_token) hooks_.after_token();
  live.finish = piece.finish;
  return piece.finish.has_value();
}

void GenerateBatch::Finish(const sched::Finished& f) {
  const auto it = live_.find(f.id);
  if (it == live_.end()) return;
  Live& live = it->second;
  prompt_tokens_ += live.prompt_tokens;
  generated_tokens_ += live.generated;
  if (f.reason == sched::FinishReason::kDeadline || f.reason == sched::FinishReason::kCancelled) {
    hooks_.send_error(f.id, f.reason == sched::FinishReason::kDeadline
                        ? absl::DeadlineExceededError(
                              "the deadline expired before the generation finished")
                        : absl::CancelledError("cancelled by the client"));
    live_.erase(it);
    return;
  }
  GenerateResult result;
  result.prompt_tokens = live.prompt_tokens;
  result.generated_tokens = live.generated;
  // kStopped without a finishing token: a grammar with nothing left to allow.
  result.finish_reason = live.finish.value_or(
      f.reason == sched::FinishReason::kStopped ? FinishReason::kStop : FinishReason::kLength);
  if (live.generated > 0) {
    // The prompt's evaluation, as far as a request of the batch can tell:
    // from its arrival to its first token.
    const double ttft = absl::ToDoubleSeconds(live.first_token - live.added);
    result.ttft_s = ttft;
    result.prefill_tok_per_s = live.prompt_tokens / std::max(ttft, 1e-9);
  }
  if (live.generated > 1) {
    result.decode_tok_per_s =
        (live.generated - 1) /
        std::max(absl::ToDoubleSeconds(absl::Now() - live.first_token), 1e-9);
  }
  WorkerMessage msg;
  msg.set_request_id(f.id);
  *msg.mutable_done() = ToGenerateDone(result);
  if (live.experts.has_value()) {
    *msg.mutable_done()->mutable_experts() = live.experts->Finish();
  }
  hooks_.send(msg);
  live_.erase(it);
}

absl::Status GenerateBatch::FailBatch(const absl::Status& status) {
  hooks_.log(absl::StrCat("a batched forward pass failed: ", status.message()));
  for (const auto& [id, live] : live_) {
    prompt_tokens_ += live.prompt_tokens;
    generated_tokens_ += live.generated;
    hooks_.send_error(id, status);
  }
  live_.clear();
  return StartRunner();
}

absl::Status GenerateBatch::Step() {
  // A long prompt beside running streams goes in chunks the pacer sizes
  // from measured steps, so their time between tokens stays near a decode
  // step's (worker/batch/prefill_pacer.h).
  const absl::Time start = absl::Now();
  absl::StatusOr<BatchRunner::StepResult> step = runner_->Step(
      start, [this](sched::SeqId id, int32_t token) { return OnToken(id, token); },
      pacing() ? pacer_.Cap(runner_->scheduler().Stats().decoding) : 0,
      [this](const sched::StepPlan& plan) { OnPass(plan); });
  if (!step.ok()) {
    RETURN_IF_ERROR(FailBatch(step.status()));
    PublishStats();
    return absl::OkStatus();
  }
  if (!step->plan.empty()) {
    const auto decodes = static_cast<int64_t>(step->plan.decodes.size());
    pacer_.Observe(decodes, step->plan.tokens() - decodes,
                   absl::ToDoubleSeconds(absl::Now() - start));
    ++steps_;
    experts_last_step_ = 0;
    for (int64_t n : step->forward.experts_per_layer) experts_last_step_ += n;
    experts_acquired_ += experts_last_step_;
  }
  // Before the answers go out: a Stats asked for after a request's end
  // describes the batch without it.
  PublishStats();
  for (const sched::Finished& f : step->finished) Finish(f);
  return absl::OkStatus();
}

void GenerateBatch::PublishStats() {
  const sched::SchedulerStats s = runner_->scheduler().Stats();
  absl::MutexLock lock(&stats_mu_);
  v1::BatchStats& b = stats_;
  b.set_max_sequences(runner_->scheduler().options().max_sequences);
  b.set_running_sequences(s.running);
  b.set_waiting_sequences(s.waiting);
  b.set_batch_size(static_cast<uint32_t>(s.last_batch_size));
  b.set_kv_blocks_used(s.kv_blocks_used);
  b.set_kv_blocks_total(s.kv_blocks_total);
  b.set_preemptions_total(s.preemptions);
  b.set_state_resident_bytes(runner_->ResidentStateBytes());
  b.set_prefill_cap_tokens(pacing() ? static_cast<uint32_t>(pacer_.Cap(s.decoding)) : 0);
  b.set_steps_total(steps_);
  b.set_experts_acquired_last_step(experts_last_step_);
  b.set_experts_acquired_total(experts_acquired_);
}

}  // namespace sluice::worker
