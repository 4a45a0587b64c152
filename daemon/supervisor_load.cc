// Supervisor: loading, replacing and unloading models (the rest of the class
// is in supervisor.cc).
#include <fstream>
#include <iostream>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "daemon/model_desc.h"
#include "daemon/request_limits.h"
#include "daemon/supervisor.h"
#include "daemon/supervisor_model.h"

namespace sluice::daemon {

using worker::v1::WorkerMessage;

namespace {

std::string Bytes(uint64_t n) {
  return n >= (1u << 20) ? absl::StrCat(n >> 20, " MiB") : absl::StrCat(n, " bytes");
}

}  // namespace

absl::StatusOr<uint64_t> HostMemAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t kib = 0;
    if (f.size() >= 2 && f[0] == "MemAvailable:" && absl::SimpleAtoi(f[1], &kib)) {
      return kib << 10;
    }
  }
  return absl::UnavailableError("/proc/meminfo: no MemAvailable line");
}

absl::StatusOr<LoadOutcome> Supervisor::LoadModel(const v1::LoadModelRequest& request,
                                                  const ModelFiles::OpenedCheck& check_opened) {
  LoadSettings settings{options_.threads, options_.context_length, options_.worker_kind,
                        options_.device, options_.experts, check_opened,
                        options_.max_sequences};
  ASSIGN_OR_RETURN(ModelDesc desc, PrepareLoad(request, settings));
  {
    absl::MutexLock lock(&mu_);
    load_.Begin(desc.info.model_id(), desc.info.path(), absl::Now());
    load_.Update("validating", desc.info.tensor_bytes(), desc.info.tensor_bytes(), absl::Now());
  }
  // Whatever way this returns, the worker is ready or the load failed.
  struct EndLoad {
    Supervisor* s;
    ~EndLoad() {
      absl::MutexLock lock(&s->mu_);
      s->EndLoadLocked();
    }
  } end_load{this};
  auto next = std::make_unique<Model>();
  next->files = std::move(desc.files);
  next->info = std::move(desc.info);
  next->hello = std::move(desc.hello);
  for (const ShardFd& s : next->files->fds()) next->fds.push_back(s.fd);
  next->hello.mutable_config()->set_heartbeat_interval_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(HeartbeatInterval(options_.hung_timeout))));

  absl::MutexLock load_lock(&load_mu_);
  std::string stop_first_why;
  bool alongside = false;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::UnavailableError("sluiced is shutting down");
    if (model_ != nullptr) {
      stop_first_why = StopFirstReasonLocked(next->info);
      alongside = stop_first_why.empty();
    }
  }
  if (alongside) return LoadAlongside(std::move(next), request.path());
  return LoadStopFirst(std::move(next), request.path(), stop_first_why);
}

std::string Supervisor::StopFirstReasonLocked(const v1::ModelInfo& next) {
  if (options_.replace_load == ReplaceLoad::kStopFirst) return "--replace_load=stop_first";
  if (phase_ != WorkerPhase::kReady || hung_.hung()) {
    return absl::StrCat("it was not serving (", v1::ModelState_Name(model_->info.state()), ")");
  }
  if (model_->info.worker_kind() == v1::WORKER_KIND_CUDA ||
      next.worker_kind() == v1::WORKER_KIND_CUDA) {
    return "a CUDA worker holds its whole model in device memory, so two models are not "
           "assumed to fit";
  }
  // A CPU worker computes from the file's pages: the new model's tensors must
  // fit in the memory the host has left beside the serving model.
  absl::StatusOr<uint64_t> available = options_.host_memory_available
                                           ? options_.host_memory_available()
                                           : HostMemAvailable();
  if (!available.ok()) {
    return absl::StrCat("the host's available memory is unknown (", available.status().message(),
                        ")");
  }
  if (*available < next.tensor_bytes()) {
    return absl::StrCat("the host has ", Bytes(*available), " available and the new model's ",
                        "tensors take ", Bytes(next.tensor_bytes()));
  }
  return "";
}

absl::StatusOr<LoadOutcome> Supervisor::LoadAlongside(std::unique_ptr<Model> next,
                                                      const std::string& path) {
  std::unique_ptr<WorkerProcess> old;
  LoadOutcome outcome;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    candidate_ = std::move(next);
    candidate_->info.set_state(v1::MODEL_STATE_LOADING);
    candidate_serial_ = ++next_serial_;
    candidate_phase_ = WorkerPhase::kStarting;
    candidate_fatal_.clear();
    candidate_exit_.clear();
    candidate_device_memory_.Clear();
    const uint64_t serial = candidate_serial_;
    WorkerSpawnOptions spawn{options_.worker_binary, options_.worker_args, oom_, serial};
    auto worker = WorkerProcess::Spawn(
        spawn, candidate_->hello, candidate_->fds,
        [this, serial](WorkerMessage msg) { OnMessage(serial, std::move(msg)); },
        [this, serial](const WorkerExit& exit) { OnExit(serial, exit); });
    if (!worker.ok()) {
      error = worker.status();
    } else {
      candidate_worker_ = std::move(*worker);
      candidate_started_ = absl::Now();
      const pid_t pid = candidate_worker_->pid();
      auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return shutdown_ || candidate_phase_ != WorkerPhase::kStarting;
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&settled), options_.worker_start_timeout)) {
        candidate_worker_->Kill();
        candidate_fatal_ = absl::StrCat("the worker did not report ready within ",
                                        absl::FormatDuration(options_.worker_start_timeout));
        candidate_fatal_code_ = absl::StatusCode::kUnavailable;
        // Its exit, even if a Ready slipped in before the kill landed.
        auto dead = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return shutdown_ || candidate_phase_ == WorkerPhase::kDead;
        };
        mu_.Await(absl::Condition(&dead));
      }
      if (shutdown_) {
        error = absl::UnavailableError("sluiced is shutting down");
      } else if (candidate_phase_ != WorkerPhase::kReady) {
        const std::string cause = absl::StrCat("worker (pid ", pid, ") ",
                                               candidate_exit_.empty() ? "failed" : candidate_exit_);
        error = !candidate_fatal_.empty()
                    ? absl::Status(candidate_fatal_code_, candidate_fatal_)
                    : absl::UnavailableError(absl::StrCat(cause, " while loading the model"));
      }
    }
    const std::string previous_id = model_ != nullptr ? model_->info.model_id() : "";
    if (error.ok()) {
      // Switch: what was running or waiting belongs to the old model.
      FailAllLocked(absl::UnavailableError(absl::StrCat(
          "model '", previous_id, "' was replaced by '", candidate_->info.model_id(), "'")));
      old = std::move(worker_);
      model_ = std::move(candidate_);
      worker_ = std::move(candidate_worker_);
      serial_ = candidate_serial_;
      phase_ = WorkerPhase::kReady;
      worker_started_ = candidate_started_;
      hung_.Start(absl::Now());
      restart_.Cancel();
      restart_.Succeeded();
      fatal_message_.clear();
      device_memory_ = candidate_device_memory_;
      model_->info.set_state(v1::MODEL_STATE_READY);
      worker_stats_.set_restarts(0);
      worker_stats_.set_pid(worker_->pid());
      worker_stats_.set_up(true);
      SetServingLocked(true);
      outcome.model = model_->info;
      outcome.replacement = absl::StrCat("the previous model '", previous_id, "' served until '",
                                         model_->info.model_id(), "' was ready");
      std::cerr << "sluiced: model '" << model_->info.model_id() << "' replaced '" << previous_id
                << "' (the new worker started beside it)" << std::endl;
    } else {
      if (candidate_worker_ != nullptr) old = std::move(candidate_worker_);  // shutting down
      candidate_.reset();
      candidate_phase_ = WorkerPhase::kNone;
      const std::string kept = absl::StrCat("; the previous model '", previous_id,
                                            "' kept serving (the new worker started beside it)");
      std::cerr << "sluiced: LoadModel path='" << path << "': " << error.message() << kept
                << std::endl;
      error = absl::Status(error.code(), absl::StrCat("LoadModel path='", path, "': ",
                                                      WithoutFileContent(std::string(error.message()), /*numbers=*/false), kept));
    }
  }
  if (old) old->Stop(kWorkerStopGrace);
  if (!error.ok()) return error;
  return outcome;
}

absl::StatusOr<LoadOutcome> Supervisor::LoadStopFirst(std::unique_ptr<Model> next,
                                                      const std::string& path,
                                                      const std::string& stop_first_why) {
  std::unique_ptr<WorkerProcess> old;
  // Kept (files open, validated) so that a replacement that fails to start
  // gives the previous model back instead of leaving none.
  std::unique_ptr<Model> previous;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::UnavailableError("sluiced is shutting down");
    if (model_ != nullptr) {
      old = DetachLocked(absl::UnavailableError(
          absl::StrCat("model '", model_->info.model_id(), "' was replaced by '",
                       next->info.model_id(), "'")));
      previous = std::move(model_);
    }
  }
  if (old) old->Stop(kWorkerStopGrace);

  absl::MutexLock lock(&mu_);
  model_ = std::move(next);
  const std::string stopped_first =
      previous == nullptr ? ""
                          : absl::StrCat("the previous model '", previous->info.model_id(),
                                         "' was stopped before '", model_->info.model_id(),
                                         "' started: ", stop_first_why);
  restart_.Succeeded();
  worker_stats_.set_restarts(0);
  loading_ = true;
  absl::Status spawned = SpawnLocked();
  const uint64_t serial = serial_;
  auto settled = [this, serial]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return serial_ != serial || phase_ != WorkerPhase::kStarting;
  };
  if (spawned.ok() &&
      !mu_.AwaitWithTimeout(absl::Condition(&settled), options_.worker_start_timeout)) {
    worker_->Kill();
    mu_.Await(absl::Condition(&settled));
    fatal_message_ = absl::StrCat("the worker did not report ready within ",
                                  absl::FormatDuration(options_.worker_start_timeout));
    fatal_code_ = absl::StatusCode::kUnavailable;
  }
  loading_ = false;
  if (spawned.ok() && serial_ == serial && phase_ == WorkerPhase::kReady) {
    if (previous != nullptr) std::cerr << "sluiced: " << stopped_first << std::endl;
    return LoadOutcome{model_->info, stopped_first};
  }
  absl::Status error = !spawned.ok()      ? spawned
                       : serial_ != serial ? absl::UnavailableError("sluiced is shutting down")
                       : !fatal_message_.empty()
                           ? absl::Status(fatal_code_, fatal_message_)
                           : absl::UnavailableError(absl::StrCat(
                                 model_->info.last_error(), " while loading the model"));
  std::string restored;
  if (previous != nullptr && !shutdown_) {
    // The replacement failed: the model that was serving comes back.
    model_ = std::move(previous);
    phase_ = WorkerPhase::kNone;
    restart_.Succeeded();
    restored = absl::StrCat("; the previous model '", model_->info.model_id(),
                            "' is loaded again (it was stopped first: ", stop_first_why, ")");
    if (absl::Status s = SpawnLocked(); !s.ok()) {
      absl::StrAppend(&restored, " but its worker failed to start (", s.message(), ")");
      ScheduleRestartLocked(absl::ZeroDuration());
    }
  } else if (serial_ != serial) {
    model_.reset();
    phase_ = WorkerPhase::kNone;
  } else {
    // The files were valid but no worker could be started on them. The model
    // stays listed as FAILED with the cause, so that ListModels, Generate
    // (FAILED_PRECONDITION) and the operator see why; it is not retried:
    // whatever stopped this start (no GPU, an unbuildable file) would stop
    // the next one. LoadModel again once the cause is fixed.
    model_->info.set_state(v1::MODEL_STATE_FAILED);
    model_->info.set_last_error(
        WithoutFileContent(std::string(error.message()), /*numbers=*/false));
    restart_.Cancel();
  }
  std::cerr << "sluiced: LoadModel path='" << path << "': " << error.message() << std::endl;
  return absl::Status(error.code(), absl::StrCat("LoadModel path='", path, "': ",
                                                 WithoutFileContent(std::string(error.message()), /*numbers=*/false), restored));
}

absl::Status Supervisor::UnloadModel(const v1::UnloadModelRequest& request) {
  absl::MutexLock load_lock(&load_mu_);
  std::unique_ptr<WorkerProcess> old;
  {
    absl::MutexLock lock(&mu_);
    if (model_ == nullptr) {
      return absl::FailedPreconditionError("UnloadModel: no model is loaded");
    }
    RETURN_IF_ERROR(CheckModelIdForUnload(request.model_id()));
    old = DetachLocked(absl::UnavailableError(
        absl::StrCat("model '", model_->info.model_id(), "' was unloaded")));
    model_.reset();
  }
  if (old) old->Stop(kWorkerStopGrace);
  return absl::OkStatus();
}

absl::Status Supervisor::CheckModelIdForUnload(const std::string& model_id) {
  if (!model_id.empty() && model_id != model_->info.model_id()) {
    return absl::NotFoundError(absl::StrCat("UnloadModel: model_id '", QuoteForMessage(model_id),
                                            "' is not loaded (loaded: '",
                                            model_->info.model_id(), "')"));
  }
  return absl::OkStatus();
}

void Supervisor::OnCandidateMessageLocked(WorkerMessage& msg) {
  switch (msg.body_case()) {
    case WorkerMessage::kReady: {
      const v1::ModelInfo& w = msg.ready().model();
      if (w.vocab_size() != 0) candidate_->info.set_vocab_size(w.vocab_size());
      if (w.context_length() != 0) candidate_->info.set_context_length(w.context_length());
      candidate_device_memory_ = msg.ready().device_memory();
      candidate_phase_ = WorkerPhase::kReady;
      return;
    }
    case WorkerMessage::kLoadProgress:
      OnLoadProgressLocked(msg.load_progress());
      return;
    case WorkerMessage::kFatal:
      candidate_fatal_ = msg.fatal().message();
      candidate_fatal_code_ = static_cast<absl::StatusCode>(msg.fatal().code());
      return;
    default:
      return;  // heartbeats; no request runs on a candidate
  }
}

}  // namespace sluice::daemon
