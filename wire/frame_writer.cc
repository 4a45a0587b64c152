#include "wire/frame_writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "wire/channel.h"

namespace sluice::wire {

FrameWriter::FrameWriter(int socket_fd, Options options)
    : socket_fd_(socket_fd), options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

FrameWriter::~FrameWriter() { Close(); }

absl::Status FrameWriter::Send(const google::protobuf::MessageLite& msg,
                               absl::Span<const int> fds) {
  if (fds.size() > static_cast<size_t>(kMaxFdsPerMessage)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker channel: ", fds.size(), " fds exceed the limit of ", kMaxFdsPerMessage));
  }
  absl::StatusOr<std::string> bytes = EncodeFrame(msg);
  if (!bytes.ok()) return bytes.status();
  Frame frame{*std::move(bytes), {}};
  for (int fd : fds) {
    const int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) {
      for (int d : frame.fds) close(d);
      return absl::InternalError(absl::StrCat("worker channel: cannot duplicate fd ", fd));
    }
    frame.fds.push_back(dup);
  }
  absl::MutexLock lock(&mu_);
  if (closed_ || failed_) {
    for (int d : frame.fds) close(d);
    return absl::UnavailableError("worker channel: the peer has gone");
  }
  pending_bytes_ += frame.bytes.size();
  queue_.push_back(std::move(frame));
  return absl::OkStatus();
}

size_t FrameWriter::PendingBytes() {
  absl::MutexLock lock(&mu_);
  return pending_bytes_;
}

bool FrameWriter::Flush(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (queue_.empty() && !writing_) || failed_ || closed_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&drained), timeout);
  return queue_.empty() && !writing_;
}

void FrameWriter::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (closed_ && !thread_.joinable()) return;
    closed_ = true;
    for (Frame& f : queue_) {
      for (int d : f.fds) close(d);
    }
    queue_.clear();
    pending_bytes_ = 0;
  }
  // Ends a sendmsg blocked on a full socket buffer.
  shutdown(socket_fd_, SHUT_WR);
  if (thread_.joinable()) thread_.join();
}

void FrameWriter::Loop() {
  pthread_setname_np(pthread_self(), "frame-writer");
  while (true) {
    Frame frame;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closed_ || !queue_.empty();
      };
      const bool woke = mu_.AwaitWithTimeout(absl::Condition(&ready), options_.idle_interval);
      if (closed_ || failed_) return;
      if (woke) {
        frame = std::move(queue_.front());
        queue_.pop_front();
      } else if (options_.idle_frame.has_value()) {
        frame.bytes = *options_.idle_frame;
        pending_bytes_ += frame.bytes.size();
      } else {
        continue;
      }
      writing_ = true;
    }
    // The only blocking write; no lock is held across it.
    const absl::Status sent = SendEncoded(socket_fd_, frame.bytes, frame.fds);
    for (int d : frame.fds) close(d);
    absl::MutexLock lock(&mu_);
    writing_ = false;
    pending_bytes_ -= std::min(pending_bytes_, frame.bytes.size());
    if (!sent.ok()) {
      failed_ = true;
      for (Frame& f : queue_) {
        for (int d : f.fds) close(d);
      }
      queue_.clear();
      pending_bytes_ = 0;
      return;
    }
  }
}

}  // namespace sluice::wire
