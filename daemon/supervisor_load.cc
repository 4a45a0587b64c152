// Supervisor: loading, replacing (beside the serving worker, or after
// stopping it) and unloading models (the rest of the class is in
// supervisor.cc and supervisor_requests.cc).
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
                        options_.device, options_.experts, check_opened, options_.batch};
  ASSIGN_OR_RETURN(ModelDesc desc, PrepareLoad(request, settings));
  {
    absl::MutexLock lock(&mu_);
    load_.Begin(desc.info.model_id(), desc.info.path(), clock_->Now());
    load_.Update("validating", desc.info.tensor_bytes(), desc.info.tensor_bytes(), clock_->Now());
  }
  // Whatever way this returns, the worker is ready or the load failed.
  struct EndLoad {
    Supervisor* s;
    ~EndLoad() {
      absl::MutexLock lock(&s->mu_);
      s->EndLoadLocked();
    }
  } end_load{this};
  auto next = std::make_unique<LoadedModel>();
  next->files = std::move(desc.files);
  next->info = std::move(desc.info);
  next->hello = std::move(desc.hello);
  for (const ShardFd& s : next->files->fds()) next->fds.push_back(s.fd);

  absl::MutexLock load_lock(&load_mu_);
  std::string stop_first_why;
  bool alongside = false;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::UnavailableError("sluiced is shutting down");
    if (serving_.model != nullptr) {
      stop_first_why = StopFirstReasonLocked(next->info);
      alongside = stop_first_why.empty();
    }
  }
  if (alongside) return LoadAlongside(std::move(next), request.path());
  return LoadStopFirst(std::move(next), request.path(), stop_first_why);
}

std::string Supervisor::StopFirstReasonLocked(const v1::ModelInfo& next) {
  if (options_.replace_load == ReplaceLoad::kStopFirst) return "--replace_load=stop_first";
  if (serving_.phase != Phase::kReady || hung_.hung()) {
    return absl::StrCat("it was not serving (", v1::ModelState_Name(serving_.model->info.state()), ")");
  }
  if (serving_.model->info.worker_kind() == v1::WORKER_KIND_CUDA ||
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

absl::StatusOr<LoadOutcome> Supervisor::LoadAlongside(std::unique_ptr<LoadedModel> next,
                                                      const std::string& path) {
  std::unique_ptr<WorkerConnection> old;
  LoadOutcome outcome;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    candidate_.model = std::move(next);
    candidate_.model->info.set_state(v1::MODEL_STATE_LOADING);
    candidate_.phase = Phase::kStarting;
    error = LaunchLocked(candidate_);
    if (error.ok()) error = AwaitCandidateLocked();
    const std::string previous_id =
        serving_.model != nullptr ? serving_.model->info.model_id() : "";
    if (error.ok()) {
      old = SwitchToCandidateLocked(previous_id);
      outcome.model = serving_.model->info;
      outcome.replacement = absl::StrCat("the previous model '", previous_id, "' served until '",
                                         serving_.model->info.model_id(), "' was ready");
    } else {
      old = std::move(candidate_.worker);  // shutting down
      candidate_ = WorkerSlot();
      const std::string kept = absl::StrCat("; the previous model '", previous_id,
                                            "' kept serving (the new worker started beside it)");
      std::cerr << "sluiced: LoadModel path='" << path << "': " << error.message() << kept
                << std::endl;
      error = absl::Status(
          error.code(),
          absl::StrCat("LoadModel path='", path, "': ",
                       WithoutFileContent(std::string(error.message()), /*numbers=*/false), kept));
    }
  }
  if (old) old->Stop(kWorkerStopGrace);
  if (!error.ok()) return error;
  return outcome;
}

absl::Status Supervisor::AwaitCandidateLocked() {
  const pid_t pid = candidate_.worker->pid();
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || candidate_.phase != Phase::kStarting;
  };
  // Counted from the launch (stamped under this lock), so that it is the
  // same time however long this thread took to get here.
  if (!clock_->AwaitWithDeadline(&mu_, absl::Condition(&settled),
                                 candidate_.started + options_.worker_start_timeout)) {
    candidate_.worker->Kill();
    candidate_.fatal_message = absl::StrCat("the worker did not report ready within ",
                                            absl::FormatDuration(options_.worker_start_timeout));
    candidate_.fatal_code = absl::StatusCode::kUnavailable;
    // Its exit, even if a Ready slipped in before the kill landed.
    auto dead = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutdown_ || candidate_.phase == Phase::kDead;
    };
    mu_.Await(absl::Condition(&dead));
  }
  if (shutdown_) return absl::UnavailableError("sluiced is shutting down");
  if (candidate_.phase == Phase::kReady) return absl::OkStatus();
  if (!candidate_.fatal_message.empty()) {
    return absl::Status(candidate_.fatal_code, candidate_.fatal_message);
  }
  const std::string cause =
      absl::StrCat("worker (pid ", pid, ") ",
                   candidate_.exit_description.empty() ? "failed" : candidate_.exit_description);
  return absl::UnavailableError(absl::StrCat(cause, " while loading the model"));
}

std::unique_ptr<WorkerConnection> Supervisor::SwitchToCandidateLocked(
    const std::string& previous_id) {
  // What was running or waiting belongs to the old model.
  FailAllLocked(absl::UnavailableError(absl::StrCat(
      "model '", previous_id, "' was replaced by '", candidate_.model->info.model_id(), "'")));
  std::unique_ptr<WorkerConnection> old = std::move(serving_.worker);
  serving_ = std::exchange(candidate_, WorkerSlot());
  const absl::Time now = clock_->Now();
  hung_.Start(now);
  restart_.Cancel();
  restart_.Succeeded();
  serving_.fatal_message.clear();
  serving_.model->info.set_state(v1::MODEL_STATE_READY);
  worker_stats_.set_restarts(0);
  worker_stats_.set_pid(serving_.worker->pid());
  worker_stats_.set_up(true);
  SetServingLocked(true);
  std::cerr << "sluiced: model '" << serving_.model->info.model_id() << "' replaced '"
            << previous_id << "' (the new worker started beside it)" << std::endl;
  return old;
}

absl::StatusOr<LoadOutcome> Supervisor::LoadStopFirst(std::unique_ptr<LoadedModel> next,
                                                      const std::string& path,
                                                      const std::string& stop_first_why) {
  std::unique_ptr<WorkerConnection> old;
  // Kept (files open, validated) so that a replacement that fails to start
  // gives the previous model back instead of leaving none.
  std::unique_ptr<LoadedModel> previous;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::UnavailableError("sluiced is shutting down");
    if (serving_.model != nullptr) {
      old = DetachLocked(absl::UnavailableError(
          absl::StrCat("model '", serving_.model->info.model_id(), "' was replaced by '",
                       next->info.model_id(), "'")));
      previous = std::move(serving_.model);
    }
  }
  if (old) old->Stop(kWorkerStopGrace);

  absl::MutexLock lock(&mu_);
  serving_.model = std::move(next);
  const std::string stopped_first =
      previous == nullptr ? ""
                          : absl::StrCat("the previous model '", previous->info.model_id(),
                                         "' was stopped before '", serving_.model->info.model_id(),
                                         "' started: ", stop_first_why);
  restart_.Succeeded();
  worker_stats_.set_restarts(0);
  loading_ = true;
  absl::Status spawned = SpawnLocked();
  const uint64_t serial = serving_.serial;
  auto settled = [this, serial]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return serving_.serial != serial || serving_.phase != Phase::kStarting;
  };
  if (spawned.ok() &&
      !clock_->AwaitWithDeadline(&mu_, absl::Condition(&settled),
                                 serving_.started + options_.worker_start_timeout)) {
    serving_.worker->Kill();
    mu_.Await(absl::Condition(&settled));
    serving_.fatal_message = absl::StrCat("the worker did not report ready within ",
                                          absl::FormatDuration(options_.worker_start_timeout));
    serving_.fatal_code = absl::StatusCode::kUnavailable;
  }
  loading_ = false;
  if (spawned.ok() && serving_.serial == serial && serving_.phase == Phase::kReady) {
    if (previous != nullptr) std::cerr << "sluiced: " << stopped_first << std::endl;
    return LoadOutcome{serving_.model->info, stopped_first};
  }
  absl::Status error = !spawned.ok() ? spawned
                       : serving_.serial != serial
                           ? absl::UnavailableError("sluiced is shutting down")
                       : !serving_.fatal_message.empty()
                           ? absl::Status(serving_.fatal_code, serving_.fatal_message)
                           : absl::UnavailableError(absl::StrCat(
                                 serving_.model->info.last_error(), " while loading the model"));
  std::string restored;
  if (previous != nullptr && !shutdown_) {
    // The replacement failed: the model that was serving comes back.
    serving_.model = std::move(previous);
    serving_.phase = Phase::kNone;
    restart_.Succeeded();
    restored = absl::StrCat("; the previous model '", serving_.model->info.model_id(),
                            "' is loaded again (it was stopped first: ", stop_first_why, ")");
    if (absl::Status s = SpawnLocked(); !s.ok()) {
      absl::StrAppend(&restored, " but its worker failed to start (", s.message(), ")");
      ScheduleRestartLocked(absl::ZeroDuration());
    }
  } else if (serving_.serial != serial) {
    serving_.model.reset();
    serving_.phase = Phase::kNone;
  } else {
    // The files were valid but no worker could be started on them. The model
    // stays listed as FAILED with the cause, so that ListModels, Generate
    // (FAILED_PRECONDITION) and the operator see why; it is not retried:
    // whatever stopped this start (no GPU, an unbuildable file) would stop
    // the next one. LoadModel again once the cause is fixed.
    serving_.model->info.set_state(v1::MODEL_STATE_FAILED);
    serving_.model->info.set_last_error(
        WithoutFileContent(std::string(error.message()), /*numbers=*/false));
    restart_.Cancel();
  }
  std::cerr << "sluiced: LoadModel path='" << path << "': " << error.message() << std::endl;
  return absl::Status(error.code(), absl::StrCat("LoadModel path='", path, "': ",
                                                 WithoutFileContent(std::string(error.message()), /*numbers=*/false), restored));
}

absl::Status Supervisor::UnloadModel(const v1::UnloadModelRequest& request) {
  absl::MutexLock load_lock(&load_mu_);
  std::unique_ptr<WorkerConnection> old;
  {
    absl::MutexLock lock(&mu_);
    if (serving_.model == nullptr) {
      return absl::FailedPreconditionError("UnloadModel: no model is loaded");
    }
    RETURN_IF_ERROR(CheckModelIdForUnload(request.model_id()));
    old = DetachLocked(absl::UnavailableError(
        absl::StrCat("model '", serving_.model->info.model_id(), "' was unloaded")));
    serving_.model.reset();
  }
  if (old) old->Stop(kWorkerStopGrace);
  return absl::OkStatus();
}

absl::Status Supervisor::CheckModelIdForUnload(const std::string& model_id) {
  if (!model_id.empty() && model_id != serving_.model->info.model_id()) {
    return absl::NotFoundError(absl::StrCat("UnloadModel: model_id '", QuoteForMessage(model_id),
                                            "' is not loaded (loaded: '",
                                            serving_.model->info.model_id(), "')"));
  }
  return absl::OkStatus();
}

void Supervisor::OnCandidateMessageLocked(WorkerMessage& msg) {
  switch (msg.body_case()) {
    case WorkerMessage::kReady:
      candidate_.OnReady(msg.ready());
      return;
    case WorkerMessage::kLoadProgress:
      OnLoadProgressLocked(msg.load_progress());
      return;
    case WorkerMessage::kFatal:
      candidate_.OnFatal(msg.fatal());
      return;
    default:
      return;  // heartbeats; no request runs on a candidate
  }
}

}  // namespace sluice::daemon
