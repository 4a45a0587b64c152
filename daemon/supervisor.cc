// Supervisor: the worker's lifecycle — launching, its messages and exit,
// restarts, the hung watch, the control loop (requests are in
// supervisor_requests.cc, loading in supervisor_load.cc).
#include "daemon/supervisor.h"

#include <pthread.h>

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/model_desc.h"
#include "daemon/request_limits.h"
#include "daemon/worker_process.h"
#include "loader/model_files.h"

namespace sluice::daemon {

using worker::v1::SupervisorMessage;
using worker::v1::WorkerMessage;

Supervisor::Supervisor(SupervisorOptions options, const OomContainment* oom,
                       Metrics* metrics, std::function<void(bool)> on_serving)
    : options_(std::move(options)),
      oom_(oom),
      metrics_(metrics),
      on_serving_(std::move(on_serving)),
      clock_(options_.clock != nullptr ? options_.clock : RealClock()),
      own_launcher_(options_.launcher != nullptr
                        ? nullptr
                        : std::make_unique<ProcessLauncher>(options_.worker_binary,
                                                            options_.worker_args, oom_)),
      launcher_(options_.launcher != nullptr ? options_.launcher : own_launcher_.get()),
      restart_({options_.restart_backoff_initial, options_.restart_backoff_max,
                options_.max_consecutive_failures}),
      requests_(options_.queue_limit),
      hung_(options_.hung_timeout) {
  control_ = std::thread([this] { ControlLoop(); });
}

Supervisor::~Supervisor() { Shutdown(); }

int Supervisor::Drain(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  SetServingLocked(false);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return requests_.empty();
  };
  clock_->AwaitWithDeadline(&mu_, absl::Condition(&idle), clock_->Now() + timeout);
  return static_cast<int>(requests_.in_flight() + requests_.waiting());
}

void Supervisor::Shutdown() {
  std::unique_ptr<WorkerConnection> worker;
  std::unique_ptr<WorkerConnection> candidate;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
    worker = DetachLocked(absl::UnavailableError("sluiced is shutting down"));
    // A replacement still starting: LoadAlongside sees shutdown_ and gives up.
    candidate = std::move(candidate_.worker);
  }
  if (worker) worker->Stop(kWorkerStopGrace);
  if (candidate) candidate->Stop(kWorkerStopGrace);
  control_.join();
}

bool Supervisor::Responsive(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!mu_.TryLock()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  mu_.Unlock();
  return true;
}

absl::Status Supervisor::CheckModelId(const std::string& model_id) {
  if (serving_.model == nullptr) {
    return absl::FailedPreconditionError("no model is loaded; call LoadModel first");
  }
  if (!model_id.empty() && model_id != serving_.model->info.model_id()) {
    return absl::NotFoundError(absl::StrCat("model_id '", QuoteForMessage(model_id, 32),
                                            "' is not loaded (loaded: '",
                                            serving_.model->info.model_id(), "')"));
  }
  if (serving_.model->info.state() == v1::MODEL_STATE_FAILED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", serving_.model->info.model_id(), "' failed: ", serving_.model->info.last_error()));
  }
  return absl::OkStatus();
}

std::vector<v1::ModelInfo> Supervisor::ListModels() {
  absl::MutexLock lock(&mu_);
  if (serving_.model == nullptr) return {};
  return {serving_.model->info};
}

absl::Status Supervisor::LaunchLocked(WorkerSlot& slot) {
  const uint64_t serial = ++next_serial_;
  slot.Launching(serial);
  slot.model->hello.mutable_config()->set_heartbeat_interval_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(HeartbeatInterval(options_.hung_timeout))));
  // Stamped before the launch: from then on the worker may be seen, and its
  // start timeout runs.
  const absl::Time now = clock_->Now();
  auto worker = launcher_->Launch(
      serial, slot.model->hello, slot.model->fds,
      [this, serial](WorkerMessage msg) { OnMessage(serial, std::move(msg)); },
      [this, serial](const WorkerExit& exit) { OnExit(serial, exit); });
  if (!worker.ok()) return worker.status();
  slot.Launched(std::move(*worker), now);
  return absl::OkStatus();
}

absl::Status Supervisor::SpawnLocked() {
  if (absl::Status launched = LaunchLocked(serving_); !launched.ok()) {
    serving_.phase = Phase::kDead;
    serving_.model->info.set_last_error(std::string(launched.message()));
    return launched;
  }
  // A restart after a crash is a load too (inside LoadModel, the same one).
  load_.Begin(serving_.model->info.model_id(), serving_.model->info.path(), serving_.started);
  hung_.Start(serving_.started);
  serving_.model->info.set_state(v1::MODEL_STATE_LOADING);
  worker_stats_.set_pid(serving_.worker->pid());
  return absl::OkStatus();
}

void Supervisor::OnMessage(uint64_t serial, WorkerMessage msg) {
  absl::MutexLock lock(&mu_);
  if (candidate_.Holds(serial)) {
    OnCandidateMessageLocked(msg);
    return;
  }
  if (!serving_.Holds(serial)) return;
  hung_.Heard(clock_->Now());
  switch (msg.body_case()) {
    case WorkerMessage::kHeartbeat:
      return;
    case WorkerMessage::kLoadProgress:
      OnLoadProgressLocked(msg.load_progress());
      return;
    case WorkerMessage::kReady: {
      EndLoadLocked();
      serving_.OnReady(msg.ready());
      serving_.model->info.set_state(v1::MODEL_STATE_READY);
      worker_stats_.set_up(true);
      SetServingLocked(true);
      DispatchLocked();
      return;
    }
    case WorkerMessage::kFatal:
      serving_.OnFatal(msg.fatal());
      return;
    case WorkerMessage::kStats: {
      const worker::v1::Stats& s = msg.stats();
      worker_stats_.set_rss_anon_bytes(s.rss_anon_bytes());
      worker_stats_.set_rss_file_bytes(s.rss_file_bytes());
      worker_stats_.set_swap_bytes(s.swap_bytes());
      worker_stats_.set_major_faults(s.major_faults());
      slot_stats_ = s.slot_cache();
      batch_stats_ = s.batch();
      serving_.device_memory = s.device_memory();
      ++stats_seq_;
      return;
    }
    default:
      OnRequestMessage(msg);
  }
}

void Supervisor::OnExit(uint64_t serial, const WorkerExit& exit) {
  absl::MutexLock lock(&mu_);
  WorkerSlot* slot = candidate_.Holds(serial) ? &candidate_
                     : serving_.Holds(serial) ? &serving_
                                              : nullptr;
  if (slot == nullptr) return;
  const bool was_ready = slot->phase == Phase::kReady;
  // Its device memory died with it.
  if (std::unique_ptr<WorkerConnection> w = slot->Exited(exit.description)) {
    dead_.push_back(std::move(w));
  }
  // A candidate's exit is LoadAlongside's to report; the serving worker is
  // not affected.
  if (slot == &candidate_) return;
  if (!was_ready) EndLoadLocked();
  const absl::Duration uptime = clock_->Now() - serving_.started;
  SetServingLocked(false);
  // A worker that reported why it cannot go on is described by that
  // message; the exit code alone ("exited with code 2") says nothing.
  // The worker's own message may quote the model file (an architecture
  // name, a key's value): the log gets it whole, clients (last_error, the
  // failed requests) the field and the rule.
  const auto describe = [&](absl::string_view fatal) {
    return serving_.fatal_message.empty()
               ? absl::StrCat("worker (pid ", worker_stats_.pid(), ") ", exit.description)
               : absl::StrCat("worker (pid ", worker_stats_.pid(), ") failed",
                              (was_ready ? "" : " to start"), ": ", fatal, " (",
                              exit.description, ")");
  };
  const std::string fatal = serving_.fatal_message.substr(0, 512);
  const std::string cause = describe(WithoutFileContent(fatal, /*numbers=*/false));
  // Once per death: the monitor calls the exit handler exactly once.
  std::cerr << "sluiced: " << describe(fatal) << (was_ready ? "" : " while starting")
            << std::endl;
  serving_.model->info.set_last_error(cause);
  worker_stats_.set_up(false);
  worker_stats_.set_last_exit(exit.description);
  FailAllLocked(absl::UnavailableError(
      absl::StrCat(cause, (was_ready ? "" : " while starting"),
                   "; the request did not complete")));
  if (loading_) return;  // LoadModel reports the failure instead
  if (!was_ready && !serving_.fatal_message.empty()) {
    // A start error the worker reported (no GPU, a model it cannot build) is
    // deterministic: restarting would repeat it in a loop. Stop here.
    serving_.model->info.set_state(v1::MODEL_STATE_FAILED);
    serving_.model->info.set_last_error(absl::StrCat(
        cause, "; not restarted: the worker reported a start error; LoadModel again once "
               "it is fixed"));
    restart_.Cancel();
    return;
  }
  metrics_->AddRestart(ExitReasonLabel(exit.reason));
  worker_stats_.set_restarts(worker_stats_.restarts() + 1);
  ScheduleRestartLocked(uptime);
}

absl::Duration HeartbeatInterval(absl::Duration hung_timeout) {
  return std::clamp(hung_timeout / 4, absl::Milliseconds(10), absl::Seconds(1));
}

void Supervisor::CheckHungLocked(absl::Time now) {
  if (!serving_.ready()) return;
  const std::string why = hung_.Why(now, requests_.InFlightIds());
  if (why.empty()) return;
  std::cerr << "sluiced: worker (pid " << serving_.worker->pid() << ") is hung: " << why
            << "; killing it" << std::endl;
  // Health turns NOT_SERVING now; the exit fails the requests and restarts.
  hung_.MarkHung();
  SetServingLocked(false);
  serving_.worker->KillHung(why);
}

void Supervisor::ScheduleRestartLocked(absl::Duration uptime) {
  if (!restart_.Failed(clock_->Now(), uptime)) {
    serving_.model->info.set_state(v1::MODEL_STATE_FAILED);
    serving_.model->info.set_last_error(absl::StrCat(serving_.model->info.last_error(), "; gave up after ",
                                             restart_.consecutive_failures(),
                                             " consecutive failures"));
    return;
  }
  serving_.model->info.set_state(v1::MODEL_STATE_RESTARTING);
}

void Supervisor::SetServingLocked(bool serving) {
  serving = serving && !draining_;
  if (serving == health_serving_) return;
  health_serving_ = serving;
  if (on_serving_) on_serving_(serving);
}

std::unique_ptr<WorkerConnection> Supervisor::DetachLocked(const absl::Status& why) {
  serving_.serial = ++next_serial_;  // handlers of the detached worker are ignored from now on
  FailAllLocked(why);
  SetServingLocked(false);
  serving_.phase = Phase::kNone;
  restart_.Cancel();
  worker_stats_.set_up(false);
  serving_.device_memory.Clear();
  return std::move(serving_.worker);
}

absl::Time Supervisor::NextDeadlineLocked() {
  absl::Time deadline = restart_.restart_at();
  if (serving_.phase == Phase::kStarting && !loading_) {
    deadline = std::min(deadline, serving_.started + options_.worker_start_timeout);
  }
  if (serving_.phase == Phase::kReady) {
    deadline = std::min(deadline, hung_.NextCheck(requests_.in_flight() > 0));
  }
  return deadline;
}

void Supervisor::ControlLoop() {
  pthread_setname_np(pthread_self(), "sup-control");
  absl::MutexLock lock(&mu_);
  while (true) {
    const absl::Time deadline = NextDeadlineLocked();
    // Also wakes when a new, earlier deadline appears (a worker became
    // ready, a request started), so that the wait is never too long.
    auto wake = [this, deadline]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutdown_ || !dead_.empty() || NextDeadlineLocked() < deadline;
    };
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&wake), deadline);
    if (!dead_.empty()) {
      std::vector<std::unique_ptr<WorkerConnection>> dead = std::move(dead_);
      dead_.clear();
      mu_.Unlock();
      dead.clear();  // joins the monitor threads
      mu_.Lock();
      continue;
    }
    if (shutdown_) return;
    const absl::Time now = clock_->Now();
    if (serving_.phase == Phase::kStarting && !loading_ && serving_.worker != nullptr &&
        now >= serving_.started + options_.worker_start_timeout) {
      serving_.worker->Kill();  // its exit schedules the next attempt
    }
    CheckHungLocked(now);
    if (restart_.Due(now) && serving_.model != nullptr && serving_.phase == Phase::kDead &&
        !SpawnLocked().ok()) {
      ScheduleRestartLocked(absl::ZeroDuration());
    }
  }
}

std::optional<v1::LoadProgress> Supervisor::Loading() {
  absl::MutexLock lock(&mu_);
  return load_.Snapshot(clock_->Now());
}

void Supervisor::OnLoadProgressLocked(const worker::v1::LoadProgress& p) {
  const std::string line =
      load_.Update(p.phase(), p.done_bytes(), p.total_bytes(), clock_->Now());
  if (!line.empty()) std::cerr << "sluiced: " << line << std::endl;
}

void Supervisor::EndLoadLocked() {
  const std::string line = load_.End(clock_->Now());
  if (!line.empty()) std::cerr << "sluiced: " << line << std::endl;
}

MetricsSnapshot Supervisor::Snapshot(absl::Duration stats_timeout) {
  absl::MutexLock lock(&mu_);
  if (WorkerTakesRequestsLocked()) {
    const uint64_t seq = stats_seq_;
    SupervisorMessage msg;
    msg.mutable_stats_query();
    if (serving_.worker->Send(msg).ok()) {
      auto fresh = [this, seq]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stats_seq_ != seq || serving_.phase != Phase::kReady;
      };
      clock_->AwaitWithDeadline(&mu_, absl::Condition(&fresh), clock_->Now() + stats_timeout);
    }
  }
  MetricsSnapshot s;
  s.requests_running = requests_.in_flight();
  s.requests_waiting = requests_.waiting();
  s.worker = worker_stats_;
  s.worker.set_up(serving_.phase == Phase::kReady && !hung_.hung());
  s.slot_cache = slot_stats_;
  if (s.worker.up()) s.batch = batch_stats_;
  s.device_memory = serving_.device_memory;
  s.oom_mode = std::string(OomModeName(oom_->mode()));
  s.loading = load_.Snapshot(clock_->Now());
  return s;
}

}  // namespace sluice::daemon
