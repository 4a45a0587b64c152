// The scheduler's steps run on an Engine (issue 19): the worker's
// continuous batching, one batched forward pass per step.
//
// Every recurrent-state slot of the scheduler (sched/scheduler.h) is one
// Session of options.context_per_sequence tokens, allocated up front. Where
// the backend keeps KV in demand pages (the CPU), a session's memory is
// that of the positions it holds: a slot's session is reset (its pages
// given back) as soon as no sequence holds the slot, so the scheduler's KV
// pool bounds what is resident. A step runs all
// chunks of the plan, decodes then prefills, as ONE Model::ForwardBatch on
// their slots' states: a chunk that starts at position 0 resets its session
// first (a new or resumed sequence), a sampling chunk asks for its last
// row's logits, which go to that request's sampler, and the token is
// reported to `on_token`, whose answer says whether it ends the request.
// Chunked prefill, preemption by recompute (a resumed sequence re-evaluates
// its prompt and the tokens it already streamed, which are not sampled or
// reported again), cancel and deadlines are the scheduler's; what this class
// adds is that they produce the tokens a request alone would produce (the
// test checks it token by token on F32 models).
//
// Thread-safety: none; one thread drives a runner.
#ifndef SLUICE_WORKER_BATCH_BATCH_RUNNER_H_
#define SLUICE_WORKER_BATCH_BATCH_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "model/engine.h"
#include "model/model.h"
#include "model/sampler.h"
#include "sched/scheduler.h"

namespace sluice::worker {

struct BatchRequest {
  sched::SeqId id = 0;
  std::vector<int32_t> prompt;  // token ids, at least one
  SamplerParams sampler;
  int64_t max_tokens = 0;
  absl::Time deadline = absl::InfiniteFuture();
};

// Called once per sampled token; true ends the request there (an
// end-of-generation token, a stop string).
using BatchTokenCallback = std::function<bool(sched::SeqId id, int32_t token)>;
// Called once per step, after its forward pass and before its tokens.
using BatchPassCallback = std::function<void(const sched::StepPlan& plan)>;

class BatchRunner {
 public:
  // Allocates one session per state slot. INVALID_ARGUMENT for options the
  // scheduler refuses; the engine's error when a session cannot be made.
  static absl::StatusOr<std::unique_ptr<BatchRunner>> Create(const Engine& engine,
                                                             const sched::SchedulerOptions& options);

  // Queues a request (the scheduler's errors; INVALID_ARGUMENT for an id
  // outside [0, n_vocab) or bad sampler parameters).
  absl::Status Add(BatchRequest request);
  // Ends a request now (NOT_FOUND when it is not queued or running).
  absl::Status Cancel(sched::SeqId id);

  // Runs one step. Returns the plan that ran, the requests it ended
  // (deadlines first, then those that finished in it) and what its forward
  // pass reported. A forward pass's error is returned as is (the sessions'
  // contents are then undefined; INVALID_ARGUMENT when a chunk's begin is
  // not where its slot's session stands).
  struct StepResult {
    sched::StepPlan plan;
    std::vector<sched::Finished> finished;
    // The step's ForwardBatch: experts acquired per layer (empty for an
    // empty plan or a backend that does not count).
    BatchForwardStats forward;
  };
  // prefill_cap: the scheduler's (Scheduler::Schedule; 0: none); on_pass,
  // when set, sees the plan once its pass has run.
  absl::StatusOr<StepResult> Step(absl::Time now, const BatchTokenCallback& on_token,
                                  int64_t prefill_cap = 0,
                                  const BatchPassCallback& on_pass = nullptr);

  // Whether the grammar of live request `id` allows nothing more (false
  // without a grammar or for an id not live). For the token callback, which
  // sees the token once its sampler has accepted it.
  bool GrammarFinished(sched::SeqId id) const;

  bool idle() const { return scheduler_.idle(); }
  // The sessions' state memory resident now (SequenceState::resident_bytes).
  uint64_t ResidentStateBytes() const;
  const sched::Scheduler& scheduler() const { return scheduler_; }

 private:
  struct Live {
    std::vector<int32_t> tokens;  // prompt, then every token sampled
    Sampler sampler;
  };

  BatchRunner(const Engine& engine, sched::Scheduler scheduler,
              std::vector<std::unique_ptr<Session>> sessions);
  // The plan's chunks as one forward pass; *logits: the sampling chunks'
  // rows in plan order (decodes, then prefills).
  absl::StatusOr<BatchForwardStats> RunPlan(const sched::StepPlan& plan,
                                            std::vector<float>* logits);

  const Engine& engine_;
  sched::Scheduler scheduler_;
  // Resets the sessions of slots no sequence holds (a finished, cancelled
  // or preempted sequence's), giving their KV pages back.
  void ReleaseIdleSlots();

  std::vector<std::unique_ptr<Session>> sessions_;  // by state slot
  std::unordered_map<sched::SeqId, Live> live_;
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_BATCH_BATCH_RUNNER_H_
