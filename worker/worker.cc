#include "worker/worker.h"

#include <unistd.h>

#include <atomic>
#include <deque>
#include <map>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "loader/model_files.h"
#include "model/engine.h"
#include "model/utf8.h"
#include "proto/sluice/worker/v1/worker.pb.h"
#include "config/expert_config.h"
#include "config/expert_config_proto.h"
#include "memory/expert_plan.h"
#include "memory/host_probe.h"
#include "wire/channel.h"
#include "wire/frame_writer.h"
#include "worker/batch/batch_runner.h"
#include "worker/experts.h"
#include "worker/proc_stats.h"
#include "worker/request_convert.h"

namespace sluice::worker {
namespace {

using v1::SupervisorMessage;
using v1::WorkerMessage;

// One write per line: the worker shares stderr with the supervisor, whose
// lines (load progress) would otherwise land between the pieces of one.
void Log(const std::string& line) {
  const std::string whole = absl::StrCat("sluice-worker: ", line, "\n");
  std::cerr.flush();
  (void)!write(STDERR_FILENO, whole.data(), whole.size());
}


// The backend's device memory by kind (nothing for the CPU backend). While
// every routed expert is resident, the expert copies are the arena.
void FillDeviceMemory(const Engine& engine, v1::DeviceMemory* out) {
  const BackendStats stats = engine.model().Stats();
  if (stats.device_memory.empty()) return;
  for (const auto& [kind, bytes] : stats.device_memory) {
    if (kind == "dense") out->set_dense_bytes(bytes);
    if (kind == "workspace") out->set_workspace_bytes(bytes);
    if (kind == "experts") out->set_expert_arena_bytes(bytes);
  }
  out->set_kv_state_bytes(engine.SessionStateBytes());
}

// The engine options the supervisor's Hello asks for.
absl::StatusOr<EngineOptions> OptionsFromConfig(const v1::WorkerConfig& config) {
  EngineOptions options;
  options.threads = static_cast<int>(std::max<uint32_t>(1, config.threads()));
  options.context_length = static_cast<int>(config.context_length());
  switch (config.kind()) {
    case sluice::v1::WORKER_KIND_UNSPECIFIED:
    case sluice::v1::WORKER_KIND_CPU:
      break;
    case sluice::v1::WORKER_KIND_CUDA:
      options.backend = Backend::kCuda;
      options.device = static_cast<int>(config.device());
      {
        // The supervisor validated the settings; a Hello from elsewhere is
        // checked by the same code.
        absl::StatusOr<config::ExpertConfig> experts = config::FromWorkerConfig(config);
        if (!experts.ok()) return experts.status();
        options.experts = *experts;
      }
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("Hello.config.kind=", static_cast<int>(config.kind()), " is unknown"));
  }
  return options;
}

// The Hello's max_sequences; a Hello without one (0) gets one sequence, as
// before there was a batch (sluiced always sets it, --max_sequences).
int32_t MaxSequences(const v1::WorkerConfig& config) {
  return std::max<int32_t>(1, static_cast<int32_t>(config.max_sequences()));
}

// The batch of max_sequences sequences of the whole context each. Every
// sequence's KV is a fixed slot of the context today (BatchRunner), so the
// pool holds all of them and nothing is ever preempted; the blocks are the
// admission accounting that paged KV will make real (docs/BATCHING.md).
sched::SchedulerOptions SchedulerOptionsFor(const v1::WorkerConfig& config, int context) {
  sched::SchedulerOptions o;
  o.max_sequences = MaxSequences(config);
  o.context_per_sequence = context;
  o.block_tokens = 16;
  const int32_t blocks_per_sequence = (context + o.block_tokens - 1) / o.block_tokens;
  o.kv_blocks = blocks_per_sequence * o.max_sequences;
  // A long prompt is evaluated in chunks of about this many tokens between
  // the decode steps of the others.
  o.token_budget = std::max<int64_t>(512, o.max_sequences);
  return o;
}

class Worker {
 public:
  Worker(int fd, Collaborators collaborators)
      : fd_(fd), collaborators_(std::move(collaborators)) {}
  int Run();

 private:
  absl::Status Load(const SupervisorMessage& hello, std::vector<int> fds);
  // Runs the fit planner for a CUDA engine (options->experts in and out).
  absl::Status PlanCuda(EngineOptions* options);
  // The expert cache figures (Collaborators::expert_stats).
  ExpertStreamStats Experts() const;
  void Send(const WorkerMessage& msg);
  // A LoadProgress frame (throttled) while Load runs.
  void SendLoadProgress(std::string_view phase, uint64_t done, uint64_t total);
  void SendError(uint64_t id, const absl::Status& status, bool fatal = false);
  void GenerationLoop();
  // A Generate request joins the batch (or is answered with its error).
  void Admit(const SupervisorMessage& job);
  // Cancel of `id` (nothing when it is not in the batch: finished already).
  void CancelRequest(uint64_t id);
  // One BatchRunner step and the answers of the requests it ended.
  void Step();
  bool OnToken(uint64_t id, int32_t token);
  void Finish(const sched::Finished& finished);
  // Every request of the batch ends with `status`, and the batch restarts
  // empty (after a failed forward pass the sessions' contents are undefined).
  absl::Status FailBatch(const absl::Status& status);
  // The scheduler's figures into batch_stats_.
  void PublishBatchStats();
  void AnswerTokenize(uint64_t id, const sluice::v1::TokenizeRequest& request);
  void AnswerStats();

  const int fd_;
  // Every message leaves through the writer thread, so neither the reader
  // nor the generation thread ever blocks on the socket.
  std::unique_ptr<wire::FrameWriter> writer_;
  std::string progress_phase_;  // Load's thread only
  absl::Time progress_sent_;
  std::unique_ptr<ModelFiles> files_;
  std::unique_ptr<Engine> engine_;
  v1::WorkerConfig config_;
  const Collaborators collaborators_;
  // Batched forward passes run so far (one per step).
  std::atomic<uint64_t> forward_passes_{0};

  // One Generate request in the batch (the generation thread's).
  struct Live {
    explicit Live(OutputText text) : output(std::move(text)) {}
    OutputText output;
    int prompt_tokens = 0;
    int max_tokens = 0;
    int generated = 0;
    // Set by the token that ended the output (end of generation, stop).
    std::optional<FinishReason> finish;
    absl::Time added;
    absl::Time first_token;
    std::optional<RequestExpertTracker> experts;
  };
  // The generation thread's: the batch and its requests by id.
  std::unique_ptr<BatchRunner> runner_;
  std::map<uint64_t, Live> live_;
  bool step_counted_ = false;  // the step in flight counted its pass
  uint64_t steps_ = 0;
  uint64_t experts_acquired_ = 0;
  uint64_t experts_last_step_ = 0;

  absl::Mutex mu_;
  // Generate and Tokenize requests, taken by the generation thread between
  // steps in arrival order, and the cancels that came with them.
  std::deque<SupervisorMessage> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> cancels_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> prompt_tokens_{0};
  std::atomic<uint64_t> generated_tokens_{0};
  // What Stats reports of the batch, refreshed by the generation thread.
  absl::Mutex stats_mu_;
  v1::BatchStats batch_stats_ ABSL_GUARDED_BY(stats_mu_);
};

void Worker::Send(const WorkerMessage& msg) {
  if (writer_ == nullptr) {
    // Before the writer exists (a failed Hello) nothing else is writing.
    (void)wire::SendFrame(fd_, msg);
    return;
  }
  // A failed send means the supervisor is gone; the read loop sees the EOF.
  (void)writer_->Send(msg);
}

void Worker::SendLoadProgress(std::string_view phase, uint64_t done, uint64_t total) {
  // A phase's first and last reports always go; between them at most ten a
  // second, so that a load of thousands of tensors is not thousands of frames.
  const absl::Time now = absl::Now();
  const bool edge = phase != progress_phase_ || done == total;
  if (!edge && now - progress_sent_ < absl::Milliseconds(100)) return;
  progress_phase_ = std::string(phase);
  progress_sent_ = now;
  WorkerMessage msg;
  v1::LoadProgress* p = msg.mutable_load_progress();
  p->set_phase(std::string(phase));
  p->set_done_bytes(done);
  p->set_total_bytes(total);
  Send(msg);
}

void Worker::SendError(uint64_t id, const absl::Status& status, bool fatal) {
  WorkerMessage msg;
  msg.set_request_id(id);
  v1::Error* e = fatal ? msg.mutable_fatal() : msg.mutable_error();
  e->set_code(static_cast<int>(status.code()));
  // Messages may quote bytes from the model file; proto3 strings must be
  // valid UTF-8.
  e->set_message(SanitizeUtf8(std::string_view(status.message().data(), status.message().size())));
  Send(msg);
}

absl::Status Worker::Load(const SupervisorMessage& msg, std::vector<int> fds) {
  const v1::Hello& hello = msg.hello();
  config_ = hello.config();
  if (fds.size() != static_cast<size_t>(hello.shards_size())) {
    for (int fd : fds) close(fd);
    return absl::InvalidArgumentError(absl::StrCat("Hello announced ", hello.shards_size(),
                                                   " shards but carried ", fds.size(), " fds"));
  }
  std::vector<ShardFd> shards;
  for (int i = 0; i < hello.shards_size(); ++i) shards.push_back({hello.shards(i).name(), fds[i]});
  absl::StatusOr<std::unique_ptr<ModelFiles>> files = ModelFiles::FromFds(std::move(shards));
  if (!files.ok()) return files.status();
  files_ = *std::move(files);
  const std::vector<TensorEntry>& entries = files_->tensors().entries();
  if (entries.size() != static_cast<size_t>(hello.tensors_size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the shards hold ", entries.size(), " tensors; the supervisor's table has ",
        hello.tensors_size()));
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const v1::TensorDesc& t = hello.tensors(static_cast<int>(i));
    if (t.name() != entries[i].name || t.file_offset() != entries[i].file_offset ||
        t.n_bytes() != entries[i].n_bytes || t.shard() != entries[i].shard) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", i, " '", entries[i].name, "' disagrees with the supervisor's table ('",
          t.name(), "' at shard ", t.shard(), " offset ", t.file_offset(), ")"));
    }
  }
  const uint64_t file_bytes = files_->total_file_bytes();
  SendLoadProgress("mapping", file_bytes, file_bytes);
  absl::StatusOr<EngineOptions> options = OptionsFromConfig(config_);
  if (!options.ok()) return options.status();
  options->load_progress = [this](std::string_view phase, uint64_t done, uint64_t total) {
    SendLoadProgress(phase, done, total);
  };
  if (options->backend == Backend::kCuda) {
    if (absl::Status s = PlanCuda(&*options); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("cuda worker on device ", options->device,
                                                 ": ", s.message()));
    }
  }
  SendLoadProgress("building", 0, 0);
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(*files_, *options);
  if (!engine.ok() && options->backend == Backend::kCuda) {
    // Says which worker failed; the engine's text names the cause (no CUDA
    // backend in this binary, no device, out of device memory).
    return absl::Status(engine.status().code(),
                        absl::StrCat("cuda worker on device ", options->device, ": ",
                                     engine.status().message()));
  }
  if (!engine.ok()) return engine.status();
  engine_ = *std::move(engine);
  absl::StatusOr<std::unique_ptr<BatchRunner>> runner =
      BatchRunner::Create(*engine_, SchedulerOptionsFor(config_, options->context_length));
  if (!runner.ok()) return runner.status();
  runner_ = *std::move(runner);
  PublishBatchStats();
  return absl::OkStatus();
}

absl::Status Worker::PlanCuda(EngineOptions* options) {
  absl::StatusOr<memory::DeviceMemory> device = collaborators_.device_memory(options->device);
  if (!device.ok()) return device.status();
  absl::StatusOr<memory::HostMemory> host = memory::ProcHostProbe().Memory();
  if (!host.ok()) return host.status();
  const config::MissPolicy asked_miss_policy = options->experts.miss_policy;
  absl::StatusOr<memory::Plan> plan =
      memory::PlanExperts(files_->tensors(), options->context_length, *device, *host,
                          &options->experts, MaxSequences(config_));
  if (!plan.ok()) return plan.status();
  Log(absl::StrCat("fit plan:\n", plan->Table()));
  const config::ExpertConfig& e = options->experts;
  if (e.miss_policy != asked_miss_policy) {
    Log(absl::StrCat("expert miss policy: ", config::MissPolicyName(e.miss_policy),
                     " (every expert resident: no misses; ",
                     config::MissPolicyName(asked_miss_policy), " has nothing to split)"));
  } else if (e.miss_policy != config::MissPolicy::kCopy) {
    Log(absl::StrCat("expert miss policy: ", config::MissPolicyName(e.miss_policy),
                     ", host threads: ",
                     e.host_threads > 0 ? absl::StrCat(e.host_threads)
                                        : std::string("one per hardware thread")));
  }
  return absl::OkStatus();
}

ExpertStreamStats Worker::Experts() const {
  return collaborators_.expert_stats(engine_->model(), forward_passes_.load());
}

void Worker::Admit(const SupervisorMessage& job) {
  const uint64_t id = job.request_id();
  const sluice::v1::GenerateRequest& request = job.generate();
  if (collaborators_.before_generate) collaborators_.before_generate(request);
  const int context = engine_->options().context_length;
  absl::StatusOr<GenerateParams> params = ToGenerateParams(engine_->tokenizer(), context, request);
  if (!params.ok()) {
    SendError(id, params.status());
    return;
  }
  BatchRequest batch{id, params->prompt, params->sampler, params->max_tokens};
  if (job.deadline_unix_micros() > 0) {
    batch.deadline = absl::FromUnixMicros(job.deadline_unix_micros());
  }
  if (absl::Status s = runner_->Add(std::move(batch)); !s.ok()) {
    SendError(id, s);
    return;
  }
  Live live(OutputText(engine_->tokenizer(), *params));
  live.prompt_tokens = static_cast<int>(params->prompt.size());
  live.max_tokens = params->max_tokens;
  live.added = absl::Now();
  if (const ExpertStreamStats start = Experts(); start.streaming) {
    live.experts.emplace(start.counters, request.expert_token_stats());
  }
  live_.emplace(id, std::move(live));
}

void Worker::CancelRequest(uint64_t id) {
  const auto it = live_.find(id);
  if (it == live_.end()) return;
  (void)runner_->Cancel(id);  // NOT_FOUND: it ended in the last step
  prompt_tokens_ += it->second.prompt_tokens;
  generated_tokens_ += it->second.generated;
  live_.erase(it);
  SendError(id, absl::CancelledError("cancelled by the client"));
}

bool Worker::OnToken(uint64_t id, int32_t token) {
  if (!step_counted_) {
    // Each token's expert figures follow the pass that produced it, and
    // Stats already describes the step whose tokens are going out.
    step_counted_ = true;
    ++forward_passes_;
    PublishBatchStats();
  }
  Live& live = live_.at(id);
  if (++live.generated == 1) live.first_token = absl::Now();
  if (live.experts.has_value()) live.experts->Token(Experts().counters);
  // As Generate: the scheduler ends the request after this token.
  const bool last = live.generated >= live.max_tokens ||
                    live.prompt_tokens + live.generated > engine_->options().context_length;
  OutputText::Piece piece = live.output.Push(token, runner_->GrammarFinished(id), last);
  WorkerMessage msg;
  msg.set_request_id(id);
  msg.mutable_chunk()->add_token_ids(token);
  // The engine emits whole characters; sanitizing keeps a proto3 string
  // valid (an invalid one would not parse on the supervisor's side) even if
  // it did not.
  msg.mutable_chunk()->set_text(SanitizeUtf8(piece.text));
  Send(msg);
  if (collaborators_.after_token) collaborators_.after_token();
  live.finish = piece.finish;
  return piece.finish.has_value();
}

void Worker::Finish(const sched::Finished& f) {
  const auto it = live_.find(f.id);
  if (it == live_.end()) return;
  Live& live = it->second;
  prompt_tokens_ += live.prompt_tokens;
  generated_tokens_ += live.generated;
  if (f.reason == sched::FinishReason::kDeadline || f.reason == sched::FinishReason::kCancelled) {
    SendError(f.id, f.reason == sched::FinishReason::kDeadline
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
    *msg.mutable_done()->mutable_experts() = live.experts->Finish(Experts().counters);
  }
  Send(msg);
  live_.erase(it);
}

absl::Status Worker::FailBatch(const absl::Status& status) {
  for (const auto& [id, live] : live_) {
    prompt_tokens_ += live.prompt_tokens;
    generated_tokens_ += live.generated;
    SendError(id, status);
  }
  live_.clear();
  runner_.reset();
  absl::StatusOr<std::unique_ptr<BatchRunner>> runner =
      BatchRunner::Create(*engine_, SchedulerOptionsFor(config_, engine_->options().context_length));
  if (!runner.ok()) return runner.status();
  runner_ = *std::move(runner);
  return absl::OkStatus();
}

void Worker::Step() {
  step_counted_ = false;
  absl::StatusOr<BatchRunner::StepResult> step = runner_->Step(
      absl::Now(), [this](sched::SeqId id, int32_t token) { return OnToken(id, token); });
  if (!step.ok()) {
    Log(absl::StrCat("a batched forward pass failed: ", step.status().message()));
    if (absl::Status s = FailBatch(step.status()); !s.ok()) {
      // Without a batch this worker cannot serve: the supervisor restarts it.
      SendError(0, s, /*fatal=*/true);
      writer_->Flush(absl::Seconds(2));
      _exit(2);
    }
    PublishBatchStats();
    return;
  }
  if (!step->plan.empty()) {
    if (!step_counted_) ++forward_passes_;
    ++steps_;
    experts_last_step_ = 0;
    for (int64_t n : step->forward.experts_per_layer) experts_last_step_ += n;
    experts_acquired_ += experts_last_step_;
  }
  // Before the answers go out: a Stats asked for after a request's end
  // describes the batch without it.
  PublishBatchStats();
  for (const sched::Finished& f : step->finished) Finish(f);
}

void Worker::PublishBatchStats() {
  const sched::SchedulerStats s = runner_->scheduler().Stats();
  absl::MutexLock lock(&stats_mu_);
  v1::BatchStats& b = batch_stats_;
  b.set_max_sequences(runner_->scheduler().options().max_sequences);
  b.set_running_sequences(s.running);
  b.set_waiting_sequences(s.waiting);
  b.set_batch_size(static_cast<uint32_t>(s.last_batch_size));
  b.set_kv_blocks_used(s.kv_blocks_used);
  b.set_kv_blocks_total(s.kv_blocks_total);
  b.set_preemptions_total(s.preemptions);
  b.set_steps_total(steps_);
  b.set_experts_acquired_last_step(experts_last_step_);
  b.set_experts_acquired_total(experts_acquired_);
}

void Worker::GenerationLoop() {
  while (true) {
    std::deque<SupervisorMessage> jobs;
    std::vector<uint64_t> cancels;
    const bool busy = !runner_->idle();
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this, busy]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || busy || !queue_.empty() || !cancels_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) break;
      jobs.swap(queue_);
      cancels.swap(cancels_);
    }
    // Between steps: new requests join (Tokenize is answered here, so a
    // running batch delays it by one step at most), then cancels apply (a
    // cancel follows its request on the socket).
    for (const SupervisorMessage& job : jobs) {
      if (job.has_tokenize()) {
        AnswerTokenize(job.request_id(), job.tokenize());
      } else {
        Admit(job);
      }
    }
    for (uint64_t id : cancels) CancelRequest(id);
    if (!runner_->idle()) Step();
  }
  // Shutdown: what is still in the batch ends as a cancel would end it.
  std::vector<uint64_t> ids;
  for (const auto& entry : live_) ids.push_back(entry.first);
  for (uint64_t id : ids) CancelRequest(id);
}

void Worker::AnswerTokenize(uint64_t id, const sluice::v1::TokenizeRequest& request) {
  const Tokenizer& tok = engine_->tokenizer();
  WorkerMessage msg;
  msg.set_request_id(id);
  sluice::v1::TokenizeResponse* r = msg.mutable_tokenized();
  for (int32_t t : tok.Encode(request.text(), request.parse_special())) {
    r->add_token_ids(t);
    const std::string& piece = tok.TokenPiece(t, true);
    r->add_pieces(SanitizeUtf8(piece));
    r->add_piece_bytes(piece);
  }
  Send(msg);
}

void Worker::AnswerStats() {
  const ProcStats p = ReadProcStats();
  WorkerMessage msg;
  v1::Stats* s = msg.mutable_stats();
  s->set_rss_anon_bytes(p.rss_anon_bytes);
  s->set_rss_file_bytes(p.rss_file_bytes);
  s->set_swap_bytes(p.swap_bytes);
  s->set_major_faults(p.major_faults);
  s->set_prompt_tokens_total(prompt_tokens_);
  s->set_generated_tokens_total(generated_tokens_);
  {
    absl::MutexLock lock(&stats_mu_);
    *s->mutable_batch() = batch_stats_;
  }
  ToSlotCacheStats(Experts(), s->mutable_slot_cache());
  FillDeviceMemory(*engine_, s->mutable_device_memory());
  Send(msg);
}

int Worker::Run() {
  SupervisorMessage msg;
  std::vector<int> fds;
  absl::StatusOr<bool> got = wire::ReceiveFrame(fd_, &msg, &fds);
  if (!got.ok() || !*got || !msg.has_hello()) {
    for (int fd : fds) close(fd);
    Log("expected a Hello from the supervisor");
    return 2;
  }
  if (absl::Status s = Load(msg, std::move(fds)); !s.ok()) {
    Log(absl::StrCat("cannot build the model: ", s.message()));
    SendError(0, s, /*fatal=*/true);
    return 2;
  }
  wire::FrameWriter::Options writer_options;
  if (config_.heartbeat_interval_ms() > 0) {
    WorkerMessage beat;
    beat.mutable_heartbeat();
    writer_options.idle_frame = *wire::EncodeFrame(beat);
    writer_options.idle_interval = absl::Milliseconds(config_.heartbeat_interval_ms());
  }
  writer_ = std::make_unique<wire::FrameWriter>(fd_, std::move(writer_options));
  WorkerMessage ready;
  sluice::v1::ModelInfo* info = ready.mutable_ready()->mutable_model();
  info->set_model_id(config_.model_id());
  info->set_vocab_size(engine_->tokenizer().n_vocab());
  info->set_context_length(engine_->options().context_length);
  FillDeviceMemory(*engine_, ready.mutable_ready()->mutable_device_memory());
  Send(ready);

  std::thread generation([this] { GenerationLoop(); });
  while (true) {
    got = wire::ReceiveFrame(fd_, &msg, nullptr);
    if (!got.ok() || !*got || msg.has_shutdown()) break;
    const uint64_t id = msg.request_id();
    switch (msg.body_case()) {
      case SupervisorMessage::kGenerate:
      case SupervisorMessage::kTokenize: {
        // Tokenize runs on the generation thread too: the reader only reads,
        // and one large text at a time bounds the worker's memory.
        absl::MutexLock lock(&mu_);
        queue_.push_back(std::move(msg));
        break;
      }
      case SupervisorMessage::kCancel: {
        absl::MutexLock lock(&mu_);
        cancels_.push_back(id);
        break;
      }
      case SupervisorMessage::kStatsQuery:
        AnswerStats();
        break;
      default:
        SendError(id, absl::InvalidArgumentError(absl::StrCat(
                          "unexpected message ", static_cast<int>(msg.body_case()))));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  generation.join();
  // Lets the last answers out; a supervisor that stopped reading has gone.
  writer_->Flush(absl::Seconds(2));
  writer_->Close();
  return got.ok() ? 0 : 3;
}

}  // namespace

int RunWorker(int socket_fd, Collaborators collaborators) {
  return Worker(socket_fd, std::move(collaborators)).Run();
}

}  // namespace sluice::worker
