// One worker and the model it serves, as the supervisor holds them (issue
// 19's Supervisor shape). The supervisor has two slots: the serving one and,
// while a replacement starts beside it, the candidate; switching over is a
// move of the candidate into the serving slot. Plain data: the supervisor's
// lock guards it, the supervisor's clock stamps it.
#ifndef SLUICE_DAEMON_WORKER_SLOT_H_
#define SLUICE_DAEMON_WORKER_SLOT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/worker_connection.h"
#include "loader/model_files.h"
#include "proto/sluice/v1/sluice.pb.h"
#include "proto/sluice/worker/v1/worker.pb.h"

namespace sluice::daemon {

// A model opened and validated by the supervisor, ready to hand to a worker.
struct LoadedModel {
  std::unique_ptr<ModelFiles> files;  // open and validated
  v1::ModelInfo info;
  worker::v1::Hello hello;
  std::vector<int> fds;  // the shard fds of `files`, sent with the Hello
};

struct WorkerSlot {
  enum class Phase { kNone, kStarting, kReady, kDead };

  // Whether `serial` names this slot's worker (its messages and exit carry
  // the serial they were launched with).
  bool Holds(uint64_t worker_serial) const {
    return model != nullptr && worker_serial == serial;
  }
  // Whether the worker is up and has reported Ready.
  bool ready() const { return phase == Phase::kReady && worker != nullptr; }

  // A worker is about to be launched as `worker_serial`: nothing heard from
  // it yet. (A launch that fails leaves no worker under that serial.)
  void Launching(uint64_t worker_serial);
  // It was launched at `now` and is starting.
  void Launched(std::unique_ptr<WorkerConnection> launched, absl::Time now);
  // The worker's Ready: what it learned of the model (vocabulary, context)
  // goes into the model's info; its device memory is recorded.
  void OnReady(const worker::v1::Ready& ready);
  // The worker's reason for stopping, told before it exits.
  void OnFatal(const worker::v1::Error& fatal);
  // The worker exited: dead, its device memory gone. Returns the connection
  // for the caller to destroy with no lock held (it joins threads).
  std::unique_ptr<WorkerConnection> Exited(const std::string& description);

  std::unique_ptr<LoadedModel> model;
  std::unique_ptr<WorkerConnection> worker;  // null before launch and after exit
  uint64_t serial = 0;
  Phase phase = Phase::kNone;
  absl::Time started;
  // The worker's `fatal` message, if it sent one, and its code.
  std::string fatal_message;
  absl::StatusCode fatal_code = absl::StatusCode::kInternal;
  std::string exit_description;  // set when it exited
  worker::v1::DeviceMemory device_memory;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_WORKER_SLOT_H_
