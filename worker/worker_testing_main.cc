// sluice-worker-testing: the worker with its test hooks, for tests only (it
// is testonly in Bazel and never installed). Tests run it through a wrapper
// script given to sluiced as --worker_binary:
//   sluice-worker-testing --socket_fd=N [--test_step_delay_ms=N] [--test_hog_memory]
//                         [--test_start_delay_ms=N]
// --test_start_delay_ms sleeps before the worker reads its Hello: a slow
// model load, e.g. for a replacement that must not interrupt the serving one.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "worker/worker.h"

int main(int argc, char** argv) {
  int fd = -1;
  sluice::worker::TestHooks hooks;
  int start_delay_ms = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--socket_fd=", 0) == 0 && absl::SimpleAtoi(arg.substr(12), &fd)) continue;
    if (arg.rfind("--test_step_delay_ms=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(21), &hooks.step_delay_ms)) {
      continue;
    }
    if (arg.rfind("--test_start_delay_ms=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(22), &start_delay_ms)) {
      continue;
    }
    if (arg == "--test_hog_memory") {
      hooks.hog_memory = true;
      continue;
    }
    fprintf(stderr, "sluice-worker-testing: unknown argument '%s'\n", argv[i]);
    return 2;
  }
  if (fd < 0) {
    fprintf(stderr, "sluice-worker-testing: --socket_fd=N is required\n");
    return 2;
  }
  if (start_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(start_delay_ms));
  return sluice::worker::RunWorker(fd, hooks);
}
