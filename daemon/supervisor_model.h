// The supervisor's record of one model (private to daemon:supervisor).
#ifndef SLUICE_DAEMON_SUPERVISOR_MODEL_H_
#define SLUICE_DAEMON_SUPERVISOR_MODEL_H_

#include <memory>
#include <vector>

#include "daemon/supervisor.h"
#include "loader/model_files.h"
#include "proto/sluice/v1/sluice.pb.h"
#include "proto/sluice/worker/v1/worker.pb.h"

namespace sluice::daemon {

struct Supervisor::Model {
  std::unique_ptr<ModelFiles> files;  // open and validated
  v1::ModelInfo info;
  worker::v1::Hello hello;
  std::vector<int> fds;  // the shard fds of `files`, sent with the Hello
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_SUPERVISOR_MODEL_H_
