#include "daemon/worker_slot.h"

#include <utility>

namespace sluice::daemon {

void WorkerSlot::Launching(uint64_t worker_serial) {
  serial = worker_serial;
  fatal_message.clear();
  fatal_code = absl::StatusCode::kInternal;
  exit_description.clear();
  device_memory.Clear();
}

void WorkerSlot::Launched(std::unique_ptr<WorkerConnection> launched, absl::Time now) {
  worker = std::move(launched);
  phase = Phase::kStarting;
  started = now;
}

void WorkerSlot::OnReady(const worker::v1::Ready& ready) {
  phase = Phase::kReady;
  const v1::ModelInfo& w = ready.model();
  if (w.vocab_size() != 0) model->info.set_vocab_size(w.vocab_size());
  if (w.context_length() != 0) model->info.set_context_length(w.context_length());
  device_memory = ready.device_memory();
}

void WorkerSlot::OnFatal(const worker::v1::Error& fatal) {
  fatal_message = fatal.message();
  fatal_code = static_cast<absl::StatusCode>(fatal.code());
}

std::unique_ptr<WorkerConnection> WorkerSlot::Exited(const std::string& description) {
  phase = Phase::kDead;
  exit_description = description;
  device_memory.Clear();
  return std::move(worker);
}

}  // namespace sluice::daemon
