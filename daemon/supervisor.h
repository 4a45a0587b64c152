// The supervisor: one model at a time, its worker process, and the request
// queue in front of it.
//
// Model lifecycle: LoadModel opens and validates the shards (loader) in the
// supervisor, then spawns a worker with the fds and the tensor table and waits
// until the worker reports Ready (or fails: its fatal message becomes the
// error). Loading another model replaces the current one; a model that fails
// to open leaves the current one serving.
//
// Replacement (ReplaceLoad): by default the new model's worker starts while
// the current one keeps serving, and the supervisor switches when the new one
// is Ready (what was running or waiting on the old one then ends with
// Unavailable "model 'a' was replaced by 'b'"); a replacement that fails
// leaves the current model serving, untouched. Where two models cannot be
// assumed to fit (CUDA workers; a host whose MemAvailable is below the new
// model's tensor bytes; --replace_load=stop_first) the current worker stops
// first and a failed start brings it back; LoadOutcome::replacement (and a
// failed load's message) says which happened and why.
//
// Requests: Generate and Tokenize requests queue (bounded by queue_limit
// waiting requests, beyond which ResourceExhausted) and go to the worker in
// arrival order, up to the model's max_sequences generations at once (the
// worker batches them; a Tokenize does not count, the worker answers it
// between steps). Each request in flight has its own id, stream, cancel
// and deadline; the worker's messages name the request they answer.
// Nothing here blocks on the worker's socket while holding the lock:
// WorkerConnection::Send only queues.
//
// Hung workers: a ready worker silent for hung_timeout (it heartbeats when
// idle), or without progress on its running request for that long, is killed
// and reported with cause "hung"; health is NOT_SERVING from that moment.
// With several requests in flight, progress is an event of any of them. Each request is a RequestHandle from which the caller pulls
// events; Cancel() removes a waiting request or tells the worker to stop
// after the current step.
//
// Worker death: every in-flight and waiting request ends with Unavailable
// naming the cause; the worker is restarted with exponential back-off (100 ms
// doubling to 30 s, reset after a request completes or 60 s of uptime) and
// the model is marked FAILED after 10 consecutive failed starts.
//
// Start failures: a worker that cannot start reports why (a `fatal` message:
// no GPU, a model it cannot build) before it exits, and that text names the
// cause everywhere (LoadModel's error, ModelInfo.last_error, the requests
// failed meanwhile). Such a failure is deterministic, so it is not retried:
// the model is marked FAILED at once (health stays NOT_SERVING, Generate gets
// FAILED_PRECONDITION with the cause) until LoadModel is called again. The
// same holds for a first LoadModel (no model loaded before) whose worker
// fails to start for any reason: the model stays listed as FAILED instead of
// disappearing.
//
// Shape: the serving worker and a replacement starting beside it are two
// WorkerSlots (daemon/worker_slot.h; switching over moves the candidate into
// the serving slot); the queue, the restart policy and the hung watch are
// plain classes (request_queue.h, restart_policy.h, hung_watch.h); workers
// are reached through a WorkerConnection (worker_connection.h) that
// SupervisorOptions::launcher starts, and time is SupervisorOptions::clock,
// so tests run all of it in-process on fakes.
//
// Thread-safety: all public methods may be called concurrently. The serving
// callback is called with no supervisor lock held being required by callers,
// but it runs under the supervisor's lock: it must not call back into it.
#ifndef SLUICE_DAEMON_SUPERVISOR_H_
#define SLUICE_DAEMON_SUPERVISOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/cgroup.h"
#include "daemon/clock.h"
#include "daemon/config.h"
#include "daemon/defaults.h"
#include "daemon/hung_watch.h"
#include "daemon/load_tracker.h"
#include "daemon/metrics.h"
#include "daemon/request_queue.h"
#include "daemon/restart_policy.h"
#include "daemon/worker_connection.h"
#include "daemon/worker_slot.h"
#include "loader/model_files.h"
#include "proto/sluice/v1/sluice.pb.h"
#include "proto/sluice/worker/v1/worker.pb.h"

namespace sluice::daemon {

// How LoadModel replaces a loaded model.
enum class ReplaceLoad {
  // Start the new model's worker beside the serving one and switch when it is
  // Ready, where memory allows (see Supervisor); otherwise as kStopFirst.
  kOverlap,
  // Stop the serving worker first: one model resident at a time.
  kStopFirst,
};

// The host's MemAvailable from /proc/meminfo, in bytes.
absl::StatusOr<uint64_t> HostMemAvailable();

struct SupervisorOptions {
  std::string worker_binary;
  std::vector<std::string> worker_args;  // extra arguments for every worker
  int threads = DefaultThreads();
  int context_length = kDefaultContextLength;
  // The worker kind of a LoadModel that leaves it UNSPECIFIED, and the CUDA
  // device of CUDA workers.
  v1::WorkerKind worker_kind = v1::WORKER_KIND_CPU;
  int device = 0;
  // The expert slot cache settings every CUDA worker's Hello carries.
  config::ExpertConfig experts;
  int queue_limit = kDefaultQueueLimit;
  BatchSettings batch;  // every worker's batching (WorkerConfig)
  absl::Duration worker_start_timeout = absl::Seconds(kDefaultWorkerStartTimeoutS);
  absl::Duration restart_backoff_initial = absl::Milliseconds(100);
  absl::Duration restart_backoff_max = absl::Seconds(30);
  int max_consecutive_failures = 10;
  // A ready worker that sends nothing (not even a heartbeat) for this long,
  // or makes no progress on the running request for this long, is killed and
  // reported as hung.
  absl::Duration hung_timeout = absl::Seconds(kDefaultWorkerHungTimeoutS);
  ReplaceLoad replace_load = ReplaceLoad::kOverlap;
  // Memory a CPU worker of a replacement may use beside the serving one;
  // null: HostMemAvailable (tests substitute a figure).
  std::function<absl::StatusOr<uint64_t>()> host_memory_available;
  // Starts workers; null: worker processes of worker_binary with
  // worker_args (ProcessLauncher). Not owned; outlives the supervisor.
  WorkerLauncher* launcher = nullptr;
  // Null: RealClock(). Not owned; outlives the supervisor.
  Clock* clock = nullptr;
};

// What LoadModel did.
struct LoadOutcome {
  v1::ModelInfo model;
  // Empty when no model was loaded before; otherwise how the previous one was
  // replaced: "the previous model 'a' served until 'b' was ready" or "the
  // previous model 'a' was stopped before 'b' started: <why>".
  std::string replacement;
};

// How often the worker sends heartbeats for a given hung timeout.
absl::Duration HeartbeatInterval(absl::Duration hung_timeout);


// One Generate or Tokenize request's stream of events.
class RequestHandle {
 public:
  struct Event {
    enum class Type { kChunk, kDone, kTokenized, kError };
    Type type = Type::kError;
    v1::TokenChunk chunk;
    v1::GenerateDone done;
    v1::TokenizeResponse tokenized;
    absl::Status status;
  };

  // Waits up to `timeout` for the next event; false on timeout. After a
  // kDone, kTokenized or kError event there are no more.
  bool Next(Event* event, absl::Duration timeout);
  uint64_t id() const { return id_; }
  // A Generate (not a Tokenize).
  bool generate() const { return generate_; }
  // Ends the stream with `status` (an error) unless it already ended; later
  // events from the worker are dropped. For the front end whose client went
  // away: it stops waiting at once while Supervisor::Cancel stops the work.
  void Interrupt(absl::Status status);

 private:
  friend class Supervisor;
  RequestHandle(uint64_t id, bool generate) : id_(id), generate_(generate) {}
  // Returns false when the request had already finished.
  bool Push(Event event);

  const uint64_t id_;
  const bool generate_;
  absl::Mutex mu_;
  std::deque<Event> events_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // Supervisor-side bookkeeping (guarded by the supervisor's lock).
  worker::v1::SupervisorMessage message_;
  absl::Time accepted_;
  absl::Time started_;
  absl::Time first_token_;
  absl::Time last_token_;
  bool first_token_seen_ = false;
  bool cancel_sent_ = false;
};

class Supervisor {
 public:
  Supervisor(SupervisorOptions options, const OomContainment* oom, Metrics* metrics,
             std::function<void(bool serving)> on_serving);
  ~Supervisor();  // Shutdown()

  // `check_opened` (the API's --model_dir confinement) sees every shard's fd
  // right after it is opened and before it is read.
  absl::StatusOr<LoadOutcome> LoadModel(const v1::LoadModelRequest& request,
                                        const ModelFiles::OpenedCheck& check_opened = nullptr);
  absl::Status UnloadModel(const v1::UnloadModelRequest& request);
  std::vector<v1::ModelInfo> ListModels();

  // `deadline` travels to the worker, which ends the request there when it
  // passes (DEADLINE_EXCEEDED), also before it is admitted to the batch.
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitGenerate(
      const v1::GenerateRequest& request, absl::Time deadline = absl::InfiniteFuture());
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitTokenize(
      const v1::TokenizeRequest& request);
  // Idempotent. A waiting request ends with Cancelled at once; a running one
  // when the worker acknowledges (within one decode step).
  void Cancel(const std::shared_ptr<RequestHandle>& handle);

  // Queue figures plus fresh worker statistics (asks the worker, waiting at
  // most `stats_timeout`; stale figures after that).
  MetricsSnapshot Snapshot(absl::Duration stats_timeout = absl::Milliseconds(250));

  // Stops taking requests (new ones get Unavailable, health turns
  // NOT_SERVING) and waits up to `timeout` for the running and waiting ones
  // to finish. Returns how many were still unfinished.
  int Drain(absl::Duration timeout);

  // The model load in progress (LoadModel, the --model at start, a restart
  // after a crash), or unset.
  std::optional<v1::LoadProgress> Loading();

  // Stops the worker (graceful, then SIGKILL) and fails what is in flight.
  void Shutdown();

  // True when the supervisor's lock could be taken within `timeout`: the
  // systemd watchdog is fed only while this holds, so a wedged supervisor
  // gets restarted.
  bool Responsive(absl::Duration timeout);

 private:
  using Phase = WorkerSlot::Phase;

  void ControlLoop();
  // The two ways of replacing (or first loading) a model; `stop_first_why`
  // says why the serving one had to stop first.
  absl::StatusOr<LoadOutcome> LoadStopFirst(std::unique_ptr<LoadedModel> next,
                                            const std::string& path,
                                            const std::string& stop_first_why);
  absl::StatusOr<LoadOutcome> LoadAlongside(std::unique_ptr<LoadedModel> next,
                                            const std::string& path);
  // LoadAlongside's wait for the candidate to settle (ready, dead, or killed
  // for not starting in time); an error when it is not ready.
  absl::Status AwaitCandidateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the ready candidate into the serving slot; returns the worker
  // that served until now, for the caller to stop unlocked.
  std::unique_ptr<WorkerConnection> SwitchToCandidateLocked(const std::string& previous_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a replacement by `next` cannot start beside the serving model; empty
  // when it can.
  std::string StopFirstReasonLocked(const v1::ModelInfo& next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnCandidateMessageLocked(worker::v1::WorkerMessage& msg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Launches a worker for `slot`'s model under a new serial.
  absl::Status LaunchLocked(WorkerSlot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SpawnLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnMessage(uint64_t serial, worker::v1::WorkerMessage msg);
  void OnExit(uint64_t serial, const WorkerExit& exit);
  void OnRequestMessage(worker::v1::WorkerMessage& msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailAllLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetServingLocked(bool serving) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends request `id` in flight with `event` and sends what may follow it.
  void FinishInFlightLocked(uint64_t id, RequestHandle::Event event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Generations the worker is sent at once: its Hello's max_sequences.
  int InFlightLimitLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the worker takes requests (ready, not hung).
  bool WorkerTakesRequestsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Detaches the serving worker for the caller to stop unlocked.
  std::unique_ptr<WorkerConnection> DetachLocked(const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckModelId(const std::string& model_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Token ids against the loaded model's vocabulary and context.
  absl::Status CheckTokenIdsLocked(const v1::GenerateRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckModelIdForUnload(const std::string& model_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The worker died after `uptime` (zero: it could not be spawned): a
  // restart after the back-off, or the model FAILED once the policy gives up.
  void ScheduleRestartLocked(absl::Duration uptime) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckHungLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When the control loop must next look: a restart, a start timeout, a
  // hung check.
  absl::Time NextDeadlineLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Worker LoadProgress frames (serving or candidate worker) into load_.
  void OnLoadProgressLocked(const worker::v1::LoadProgress& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndLoadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SupervisorOptions options_;
  const OomContainment* const oom_;
  Metrics* const metrics_;
  const std::function<void(bool)> on_serving_;
  Clock* const clock_;
  std::unique_ptr<WorkerLauncher> own_launcher_;  // when options_.launcher is null
  WorkerLauncher* const launcher_;

  absl::Mutex load_mu_;  // one LoadModel/UnloadModel at a time
  absl::Mutex mu_;
  // The model loaded and its worker (the model stays while the worker is
  // restarted), and a replacement starting beside it (LoadAlongside; empty
  // otherwise). Messages and exits are told apart by the slots' serials.
  WorkerSlot serving_ ABSL_GUARDED_BY(mu_);
  WorkerSlot candidate_ ABSL_GUARDED_BY(mu_);
  // Exited workers, destroyed by the control loop with the lock released.
  std::vector<std::unique_ptr<WorkerConnection>> dead_ ABSL_GUARDED_BY(mu_);
  uint64_t next_serial_ ABSL_GUARDED_BY(mu_) = 0;  // every launch and detach takes one
  RestartPolicy restart_ ABSL_GUARDED_BY(mu_);
  bool loading_ ABSL_GUARDED_BY(mu_) = false;  // LoadModel waits for the worker
  bool health_serving_ ABSL_GUARDED_BY(mu_) = false;  // what on_serving_ was last told
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  LoadTracker load_ ABSL_GUARDED_BY(mu_);

  uint64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Waiting, and sent to the worker and not yet answered (by request id,
  // which the worker's messages carry); at most InFlightLimitLocked()
  // generations in flight.
  RequestQueue<RequestHandle> requests_ ABSL_GUARDED_BY(mu_);
  // The serving worker's messages and requests' progress; hung(): killed
  // as hung, exit pending.
  HungWatch hung_ ABSL_GUARDED_BY(mu_);

  v1::WorkerStats worker_stats_ ABSL_GUARDED_BY(mu_);
  v1::SlotCacheStats slot_stats_ ABSL_GUARDED_BY(mu_);
  worker::v1::BatchStats batch_stats_ ABSL_GUARDED_BY(mu_);
  uint64_t stats_seq_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread control_;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_SUPERVISOR_H_
