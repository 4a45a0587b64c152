#include "wire/channel.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace sluice::wire {
namespace {

absl::Status ErrnoStatus(const char* what, int err) {
  std::string msg = absl::StrCat("worker channel: ", what, ": ", strerror(err));
  if (err == EPIPE || err == ECONNRESET) return absl::UnavailableError(msg);
  return absl::InternalError(msg);
}

absl::Status WriteAll(int fd, const char* data, size_t n,
                      absl::Span<const int> fds) {
  bool fds_sent = fds.empty();
  while (n > 0) {
    iovec iov{const_cast<char*>(data), n};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
    if (!fds_sent) {
      const size_t len = sizeof(int) * fds.size();
      mh.msg_control = control;
      mh.msg_controllen = CMSG_SPACE(len);
      cmsghdr* cm = CMSG_FIRSTHDR(&mh);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(len);
      memcpy(CMSG_DATA(cm), fds.data(), len);
    }
    const ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("sendmsg", errno);
    }
    fds_sent = true;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// Reads exactly n bytes (0 < n). Returns the count read before a clean EOF.
absl::StatusOr<size_t> ReadAll(int fd, char* data, size_t n,
                               std::vector<int>* fds) {
  size_t got = 0;
  while (got < n) {
    iovec iov{data + got, n - got};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
    mh.msg_control = control;
    mh.msg_controllen = sizeof(control);
    const ssize_t r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("recvmsg", errno);
    }
    for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm != nullptr;
         cm = CMSG_NXTHDR(&mh, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int received;
        memcpy(&received, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        if (fds != nullptr) {
          fds->push_back(received);
        } else {
          close(received);
        }
      }
    }
    if (r == 0) return got;
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

absl::StatusOr<std::string> EncodeFrame(const google::protobuf::MessageLite& msg) {
  const size_t size = msg.ByteSizeLong();
  if (size > kMaxFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker channel: frame of ", size, " bytes exceeds ", kMaxFrameBytes));
  }
  std::string buf(4 + size, '\0');
  for (int i = 0; i < 4; ++i) buf[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  if (!msg.SerializeToArray(buf.data() + 4, static_cast<int>(size))) {
    return absl::InternalError("worker channel: serialization failed");
  }
  return buf;
}

absl::Status SendEncoded(int socket_fd, std::string_view frame, absl::Span<const int> fds) {
  if (fds.size() > static_cast<size_t>(kMaxFdsPerMessage)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker channel: ", fds.size(), " fds exceed the limit of ",
        kMaxFdsPerMessage));
  }
  return WriteAll(socket_fd, frame.data(), frame.size(), fds);
}

absl::Status SendFrame(int socket_fd, const google::protobuf::MessageLite& msg,
                       absl::Span<const int> fds) {
  if (fds.size() > static_cast<size_t>(kMaxFdsPerMessage)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker channel: ", fds.size(), " fds exceed the limit of ",
        kMaxFdsPerMessage));
  }
  absl::StatusOr<std::string> frame = EncodeFrame(msg);
  if (!frame.ok()) return frame.status();
  return SendEncoded(socket_fd, *frame, fds);
}

absl::StatusOr<bool> ReceiveFrame(int socket_fd,
                                  google::protobuf::MessageLite* msg,
                                  std::vector<int>* fds) {
  unsigned char len_bytes[4];
  auto got = ReadAll(socket_fd, reinterpret_cast<char*>(len_bytes), 4, fds);
  if (!got.ok()) return got.status();
  if (*got == 0) return false;
  if (*got < 4) {
    return absl::DataLossError("worker channel: stream ended inside a frame length");
  }
  const uint32_t size = len_bytes[0] | (len_bytes[1] << 8) |
                        (len_bytes[2] << 16) | (uint32_t{len_bytes[3]} << 24);
  if (size > kMaxFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker channel: frame length ", size, " exceeds ", kMaxFrameBytes));
  }
  // The buffer grows with the bytes that actually arrive: a length prefix
  // alone must not make the reader allocate (and zero) up to kMaxFrameBytes.
  // Reads start at 4 KiB and double up to 1 MiB, so what is allocated and
  // zeroed stays within about twice what arrived (plus 4 KiB): most frames
  // are small, and a peer that announces a large frame and stops costs
  // little (the frame fuzzer takes this path on nearly every input).
  constexpr size_t kFirstChunk = 4 << 10;
  constexpr size_t kMaxChunk = 1 << 20;
  std::string body;
  size_t have = 0;
  size_t next_chunk = kFirstChunk;
  while (have < size) {
    const size_t chunk = std::min<size_t>(size - have, next_chunk);
    next_chunk = std::min(2 * next_chunk, kMaxChunk);
    if (body.capacity() < have + chunk) body.reserve(std::max(have + chunk, 2 * body.capacity()));
    body.resize(have + chunk);
    auto body_got = ReadAll(socket_fd, body.data() + have, chunk, fds);
    if (!body_got.ok()) return body_got.status();
    have += *body_got;
    if (*body_got < chunk) {
      return absl::DataLossError(absl::StrCat(
          "worker channel: stream ended after ", have, " of ", size, " frame bytes"));
    }
  }
  if (!msg->ParseFromString(body)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker channel: a frame of ", size, " bytes does not parse as ",
        msg->GetTypeName()));
  }
  return true;
}

}  // namespace sluice::wire
