// libFuzzer target for the supervisor<->worker message decoder
// (wire/channel.h ReceiveFrame), built outside Bazel by fuzz/run.sh SECONDS frame;
// frame_fuzzer_test replays fixed inputs through the same entry point.
//
// The bytes are what a broken or hostile peer could write on the socket: they
// are written into a socketpair and decoded frame by frame, alternately as
// WorkerMessage (what the supervisor reads) and SupervisorMessage (what the
// worker reads), until the stream ends or the decoder reports an error.
// Whatever the bytes, decoding must end with a status and never crash, hang
// or read outside its buffers.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "proto/sluice/worker/v1/worker.pb.h"
#include "wire/channel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Larger inputs would not fit the socket buffer in one write.
  if (size > 65536) return 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  size_t off = 0;
  while (off < size) {
    const ssize_t w = write(sv[0], data + off, size - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  shutdown(sv[0], SHUT_WR);
  for (int i = 0; i < 1024; ++i) {
    sluice::worker::v1::WorkerMessage from_worker;
    sluice::worker::v1::SupervisorMessage from_supervisor;
    google::protobuf::MessageLite* msg =
        i % 2 == 0 ? static_cast<google::protobuf::MessageLite*>(&from_worker)
                   : static_cast<google::protobuf::MessageLite*>(&from_supervisor);
    std::vector<int> fds;
    absl::StatusOr<bool> got = sluice::wire::ReceiveFrame(sv[1], msg, &fds);
    for (int fd : fds) close(fd);
    if (!got.ok() || !*got) break;
    volatile size_t n = msg->ByteSizeLong();
    (void)n;
  }
  close(sv[0]);
  close(sv[1]);
  return 0;
}
