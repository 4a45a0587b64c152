// A stand-in for sluice-worker in supervisor tests: speaks the worker
// protocol without building a model, so the supervisor's side of it can be
// tested alone.
//
//   --mode=ready  answers Ready with device memory 1/2/3/4 MiB (dense,
//                 kv_state, workspace, expert_arena) and every StatsQuery
//                 with 5/6/7/8 MiB; exits 0 on Shutdown or end of stream.
//   --mode=fatal  answers the Hello with a fatal UNAVAILABLE error naming
//                 the kind and device it was asked for, and exits 2 (what a
//                 CUDA worker without a GPU does).
//   --fatal_model_id=ID  with --mode=ready: fatal as above for a Hello of
//                 model ID only (a replacement that fails beside a serving
//                 worker).
//   --silent_model_id=ID  never answers a Hello of model ID (a worker that
//                 does not start in time); exits at end of stream.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "proto/sluice/worker/v1/worker.pb.h"
#include "wire/channel.h"

namespace {

using sluice::wire::ReceiveFrame;
using sluice::wire::SendFrame;
using sluice::worker::v1::DeviceMemory;
using sluice::worker::v1::SupervisorMessage;
using sluice::worker::v1::WorkerMessage;

void SetMiB(DeviceMemory* m, uint64_t dense, uint64_t kv, uint64_t ws, uint64_t arena) {
  m->set_dense_bytes(dense << 20);
  m->set_kv_state_bytes(kv << 20);
  m->set_workspace_bytes(ws << 20);
  m->set_expert_arena_bytes(arena << 20);
}

}  // namespace

int main(int argc, char** argv) {
  int fd = -1;
  std::string mode;
  std::string fatal_model_id;
  std::string silent_model_id;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--socket_fd=", 0) == 0 && absl::SimpleAtoi(arg.substr(12), &fd)) continue;
    if (arg.rfind("--mode=", 0) == 0) {
      mode = arg.substr(7);
      continue;
    }
    if (arg.rfind("--silent_model_id=", 0) == 0) {
      silent_model_id = arg.substr(18);
      continue;
    }
    if (arg.rfind("--fatal_model_id=", 0) == 0) {
      fatal_model_id = arg.substr(17);
      continue;
    }
    fprintf(stderr, "fake_worker: unknown argument '%s'\n", argv[i]);
    return 2;
  }
  SupervisorMessage msg;
  std::vector<int> fds;
  absl::StatusOr<bool> got = ReceiveFrame(fd, &msg, &fds);
  for (int f : fds) close(f);
  if (!got.ok() || !*got || !msg.has_hello()) return 2;
  const auto& config = msg.hello().config();
  WorkerMessage out;
  if (!silent_model_id.empty() && config.model_id() == silent_model_id) {
    while ((got = ReceiveFrame(fd, &msg, nullptr)).ok() && *got) {
    }
    return 0;
  }
  if (mode == "fatal" || (!fatal_model_id.empty() && config.model_id() == fatal_model_id)) {
    out.mutable_fatal()->set_code(static_cast<int>(absl::StatusCode::kUnavailable));
    out.mutable_fatal()->set_message(absl::StrCat("fake worker of kind ", config.kind(),
                                                  " on device ", config.device(),
                                                  ": no CUDA device"));
    (void)SendFrame(fd, out);
    return 2;
  }
  out.mutable_ready()->mutable_model()->set_model_id(config.model_id());
  SetMiB(out.mutable_ready()->mutable_device_memory(), 1, 2, 3, 4);
  (void)SendFrame(fd, out);
  while (true) {
    got = ReceiveFrame(fd, &msg, nullptr);
    if (!got.ok() || !*got || msg.has_shutdown()) return 0;
    if (msg.has_stats_query()) {
      WorkerMessage stats;
      SetMiB(stats.mutable_stats()->mutable_device_memory(), 5, 6, 7, 8);
      (void)SendFrame(fd, stats);
    }
  }
}
