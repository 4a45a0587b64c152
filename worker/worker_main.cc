// sluice-worker: started by sluiced (fork + exec) with the supervisor's end of
// a Unix socketpair; not meant to be run by hand. See worker/worker.h.
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "worker/worker.h"

int main(int argc, char** argv) {
  int fd = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--socket_fd=", 0) == 0 && absl::SimpleAtoi(arg.substr(12), &fd)) continue;
    fprintf(stderr, "sluice-worker: unknown argument '%s' (usage: --socket_fd=N)\n", argv[i]);
    return 2;
  }
  if (fd < 0) {
    fprintf(stderr, "sluice-worker: --socket_fd=N is required; sluiced starts workers\n");
    return 2;
  }
  return sluice::worker::RunWorker(fd);
}
