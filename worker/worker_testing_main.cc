// sluice-worker-testing: the worker with its test hooks, for tests only (it
// is testonly in Bazel and never installed). Tests run it through a wrapper
// script given to sluiced as --worker_binary:
//   sluice-worker-testing --socket_fd=N [--test_step_delay_ms=N] [--test_hog_memory]
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "worker/worker.h"

int main(int argc, char** argv) {
  int fd = -1;
  sluice::worker::TestHooks hooks;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--socket_fd=", 0) == 0 && absl::SimpleAtoi(arg.substr(12), &fd)) continue;
    if (arg.rfind("--test_step_delay_ms=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(21), &hooks.step_delay_ms)) {
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
  return sluice::worker::RunWorker(fd, hooks);
}
