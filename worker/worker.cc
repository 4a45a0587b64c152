#include "worker/worker.h"

#include <unistd.h>

#include <atomic>
#include <deque>
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
#include "model/expert_profile_recorder.h"
#include "model/utf8.h"
#include "proto/sluice/worker/v1/worker.pb.h"
#include "base/status_macros.h"
#include "config/expert_config.h"
#include "model/arch.h"
#include "config/expert_config_proto.h"
#include "memory/expert_plan.h"
#include "memory/expert_profile.h"
#include "memory/host_probe.h"
#include "wire/channel.h"
#include "wire/frame_writer.h"
#include "worker/experts.h"
#include "worker/generate_batch.h"
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
// every routed expert is resident, the expert copies are the arena. KV:
// one session's whole state, or, with KV on demand, the device pages the
// sessions' KV holds (their small recurrent buffers apart).
void FillDeviceMemory(const Engine& engine, v1::DeviceMemory* out) {
  const BackendStats stats = engine.model().Stats();
  if (stats.device_memory.empty()) return;
  out->set_kv_state_bytes(engine.SessionStateBytes());
  for (const auto& [kind, bytes] : stats.device_memory) {
    if (kind == "dense") out->set_dense_bytes(bytes);
    if (kind == "workspace") out->set_workspace_bytes(bytes);
    if (kind == "expert_arena") out->set_expert_arena_bytes(bytes);
    if (kind == "kv_pages") out->set_kv_state_bytes(bytes);
  }
}

// The engine options the supervisor's Hello asks for.
absl::StatusOr<EngineOptions> OptionsFromConfig(const v1::WorkerConfig& config) {
  EngineOptions options;
  options.threads = static_cast<int>(std::max<uint32_t>(1, config.threads()));
  options.context_length = static_cast<int>(config.context_length());
  // With a KV pool the planner counts the pool, so the device must back
  // only the positions held (the CPU always does).
  options.kv_on_demand = config.kv_cache_tokens() > 0;
  switch (config.kind()) {
    case sluice::v1::WORKER_KIND_UNSPECIFIED:
    case sluice::v1::WORKER_KIND_CPU: {
      // The CPU reads experts in place: of the expert settings only the
      // lossy mode applies (checked by the same code as the supervisor's).
      absl::StatusOr<config::ExpertConfig> experts = config::FromWorkerConfig(config);
      if (!experts.ok()) return experts.status();
      options.experts.skip_threshold = experts->skip_threshold;
      break;
    }
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

// How often the generation thread saves the usage profile.
constexpr absl::Duration kProfileIdleSave = absl::Seconds(5);
constexpr absl::Duration kProfileBusySave = absl::Seconds(60);

class Worker {
 public:
  Worker(int fd, Collaborators collaborators)
      : fd_(fd), collaborators_(std::move(collaborators)) {}
  int Run();

 private:
  absl::Status Load(const SupervisorMessage& hello, std::vector<int> fds);
  // Runs the fit planner for a CUDA engine (options->experts in and out).
  absl::Status PlanCuda(EngineOptions* options);
  // --expert_profile: opens the profile, counts into it from now on (not on
  // a CUDA worker with every expert resident: nothing to warm, and watching
  // the routing would cost a host round trip per layer) and hands it to
  // the engine to warm the arena.
  absl::Status SetUpProfile(EngineOptions* options);
  // Saves the counted profile when there is something new and `interval`
  // has passed since the last save; failures are logged.
  void SaveProfile(absl::Duration interval);
  // The expert cache figures (Collaborators::expert_stats).
  ExpertStreamStats Experts() const;
  void Send(const WorkerMessage& msg);
  // A LoadProgress frame (throttled) while Load runs.
  void SendLoadProgress(std::string_view phase, uint64_t done, uint64_t total);
  void SendError(uint64_t id, const absl::Status& status, bool fatal = false);
  void GenerationLoop();
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
  // --expert_profile: the file, its counts at load (warming the arena) and
  // the counter of this run's uses (the generation thread saves it).
  std::string profile_path_;
  std::optional<memory::ExpertProfile> warm_profile_;
  std::unique_ptr<ExpertProfileRecorder> profile_;
  absl::Time profile_saved_ = absl::InfinitePast();
  // Batched forward passes run so far (one per step).
  std::atomic<uint64_t> forward_passes_{0};

  // The Generate requests (the generation thread's; Stats() from any).
  std::unique_ptr<GenerateBatch> batch_;

  absl::Mutex mu_;
  // Generate and Tokenize requests, taken by the generation thread between
  // steps in arrival order, and the cancels that came with them.
  std::deque<SupervisorMessage> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> cancels_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
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
  if (!config_.expert_profile().empty()) RETURN_IF_ERROR(SetUpProfile(&*options));
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
  if (const BackendStats stats = engine_->model().Stats(); stats.experts_warm_planned > 0) {
    Log(absl::StrCat("expert profile: ", stats.experts_warmed, " of the ",
                     stats.experts_warm_planned,
                     " most used experts placed in the arena and the host tier"));
  }
  GenerateBatch::Hooks hooks;
  hooks.send = [this](const WorkerMessage& m) { Send(m); };
  hooks.send_error = [this](uint64_t id, const absl::Status& s) { SendError(id, s); };
  hooks.experts = [this] { return Experts(); };
  hooks.count_pass = [this] { ++forward_passes_; };
  hooks.after_token = collaborators_.after_token;
  hooks.log = Log;
  absl::StatusOr<std::unique_ptr<GenerateBatch>> batch =
      GenerateBatch::Create(*engine_, BatchLimitsOf(config_), std::move(hooks));
  if (!batch.ok()) return batch.status();
  batch_ = *std::move(batch);
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
                          &options->experts, MaxSequences(config_),
                          BatchLimitsOf(config_).kv_cache_tokens);
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

absl::Status Worker::SetUpProfile(EngineOptions* options) {
  profile_path_ = config_.expert_profile();
  ASSIGN_OR_RETURN(const ArchDesc desc, DescribeModel(*files_));
  std::string note;
  ASSIGN_OR_RETURN(memory::ExpertProfile start,
                   OpenExpertProfile(profile_path_, static_cast<int32_t>(desc.layers.size()),
                                     static_cast<int32_t>(desc.moe.n_expert), &note));
  Log(note);
  const config::ExpertConfig& e = options->experts;
  const bool resident = options->backend == Backend::kCuda && e.slots < 0 && e.arena_fraction <= 0;
  if (resident) {
    Log(absl::StrCat("expert profile ", profile_path_,
                     ": not counted: every expert is resident on the device"));
    return absl::OkStatus();
  }
  warm_profile_ = start;
  options->expert_warm = &*warm_profile_;
  profile_ = std::make_unique<ExpertProfileRecorder>(std::move(start));
  options->routing_observer = profile_.get();
  return absl::OkStatus();
}

void Worker::SaveProfile(absl::Duration interval) {
  if (profile_ == nullptr || profile_->unsaved() == 0) return;
  const absl::Time now = absl::Now();
  if (now - profile_saved_ < interval) return;
  profile_saved_ = now;
  if (absl::Status s = profile_->Save(profile_path_); !s.ok()) Log(std::string(s.message()));
}

ExpertStreamStats Worker::Experts() const {
  return collaborators_.expert_stats(engine_->model(), forward_passes_.load());
}

void Worker::GenerationLoop() {
  while (true) {
    std::deque<SupervisorMessage> jobs;
    std::vector<uint64_t> cancels;
    const bool busy = !batch_->idle();
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
        continue;
      }
      if (collaborators_.before_generate) collaborators_.before_generate(job.generate());
      batch_->Admit(job);
    }
    for (uint64_t id : cancels) batch_->Cancel(id);
    if (batch_->idle()) continue;
    if (absl::Status s = batch_->Step(); !s.ok()) {
      // Without a batch this worker cannot serve: the supervisor restarts it.
      SendError(0, s, /*fatal=*/true);
      writer_->Flush(absl::Seconds(2));
      _exit(2);
    }
    // Between requests soon, under steady load once a minute.
    SaveProfile(batch_->idle() ? kProfileIdleSave : kProfileBusySave);
  }
  // Shutdown: what is still in the batch ends as a cancel would end it.
  batch_->CancelAll();
  SaveProfile(absl::ZeroDuration());
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
  s->set_prompt_tokens_total(batch_->prompt_tokens_total());
  s->set_generated_tokens_total(batch_->generated_tokens_total());
  *s->mutable_batch() = batch_->Stats();
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
