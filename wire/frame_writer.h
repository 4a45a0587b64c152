// An outgoing queue with its own writer thread for one end of the
// supervisor<->worker socket.
//
// Why: a blocking send done by a thread that also has to read (or that holds
// a lock a reader needs) can deadlock the channel once both socket buffers
// fill, e.g. both processes sending large Tokenize messages at once. With a
// FrameWriter a sender only serializes and queues; the one writer thread is
// the only code that blocks on the socket, and it holds no lock while it
// does. Both directions therefore always progress as long as each process
// keeps its reader reading.
//
// Optionally the writer sends an idle frame (a heartbeat) whenever nothing
// else was written for `idle_interval`, which proves to the peer that the
// process is scheduled and its writer is not stuck.
//
// Thread-safety: Send(), PendingBytes() and Close() may be called from any
// thread. The destructor calls Close().
#ifndef SLUICE_WIRE_FRAME_WRITER_H_
#define SLUICE_WIRE_FRAME_WRITER_H_

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "google/protobuf/message_lite.h"

namespace sluice::wire {

class FrameWriter {
 public:
  struct Options {
    // Sent whenever the queue stayed empty this long (none when unset).
    std::optional<std::string> idle_frame;  // an EncodeFrame() result
    absl::Duration idle_interval = absl::InfiniteDuration();
  };

  // Does not take ownership of `socket_fd`; it must outlive the writer.
  explicit FrameWriter(int socket_fd) : FrameWriter(socket_fd, Options()) {}
  FrameWriter(int socket_fd, Options options);
  ~FrameWriter();
  FrameWriter(const FrameWriter&) = delete;
  FrameWriter& operator=(const FrameWriter&) = delete;

  // Queues `msg` (with duplicates of `fds`, closed once sent). Never blocks
  // on the socket. Unavailable once a write failed (the peer has gone) or
  // after Close(); InvalidArgument for a message over kMaxFrameBytes.
  absl::Status Send(const google::protobuf::MessageLite& msg, absl::Span<const int> fds = {});

  // Bytes queued and not yet written.
  size_t PendingBytes();

  // Waits up to `timeout` until everything queued was written (or a write
  // failed). True when the queue is empty.
  bool Flush(absl::Duration timeout);

  // Drops what is queued, shuts down the socket for writing (which also
  // ends a write blocked on a peer that does not read) and joins the thread.
  // Idempotent.
  void Close();

 private:
  struct Frame {
    std::string bytes;
    std::vector<int> fds;  // owned duplicates
  };
  void Loop();

  const int socket_fd_;
  const Options options_;
  absl::Mutex mu_;
  std::deque<Frame> queue_ ABSL_GUARDED_BY(mu_);
  size_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sluice::wire

#endif  // SLUICE_WIRE_FRAME_WRITER_H_
