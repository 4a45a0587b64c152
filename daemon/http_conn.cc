#include "daemon/http_conn.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sluice::daemon {
namespace {

// A fully closed client answers a probe with a reset within a round trip;
// probing more often than this only adds bytes for a half-closed one.
constexpr absl::Duration kProbeInterval = absl::Milliseconds(200);

bool WaitFor(int fd, short events, absl::Duration timeout) {
  pollfd p{fd, events, 0};
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
  int r;
  do {
    r = poll(&p, 1, ms);
  } while (r < 0 && errno == EINTR);
  return r > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0;
}

}  // namespace

HttpFront::Conn::Conn(int fd, FramingLimits limits, absl::Duration write_timeout)
    : fd(fd), limits(limits), write_timeout(write_timeout) {
  ResetFraming();
}

HttpFront::Conn::~Conn() {
  if (ssl != nullptr) SSL_free(ssl);
  close(fd);
}

ssize_t HttpFront::Conn::Read(char* buf, size_t size) {
  if (ssl == nullptr) {
    const ssize_t n = recv(fd, buf, size, MSG_DONTWAIT);
    if (n > 0) return n;
    if (n == 0) return kEof;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? kAgain : kError;
  }
  ERR_clear_error();
  tls_wants_write = false;
  const int n = SSL_read(ssl, buf, static_cast<int>(std::min<size_t>(size, 1 << 30)));
  if (n > 0) return n;
  switch (SSL_get_error(ssl, n)) {
    case SSL_ERROR_WANT_READ: return kAgain;
    case SSL_ERROR_WANT_WRITE: tls_wants_write = true; return kAgain;
    case SSL_ERROR_ZERO_RETURN: return kEof;
    default: return kError;
  }
}

bool HttpFront::Conn::WriteAll(const char* data, size_t size) {
  while (size > 0 && !broken) {
    ssize_t n;
    short wait = POLLOUT;
    if (ssl == nullptr) {
      n = send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) broken = true;
    } else {
      ERR_clear_error();
      n = SSL_write(ssl, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
      if (n <= 0) {
        const int e = SSL_get_error(ssl, static_cast<int>(n));
        if (e == SSL_ERROR_WANT_READ) {
          wait = POLLIN;
        } else if (e != SSL_ERROR_WANT_WRITE) {
          broken = true;
        }
      }
    }
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (!broken && !WaitFor(fd, wait, write_timeout)) {
      broken = true;
    }
  }
  return !broken;
}

bool HttpFront::Conn::WaitWritable() const {
  return !broken && WaitFor(fd, POLLOUT, write_timeout);
}

bool HttpFront::Conn::Gone(const std::function<bool()>& probe) {
  if (broken) return true;
  pollfd p{fd, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) return true;
  if ((p.revents & POLLRDHUP) == 0) return false;
  if (framing->http10()) return true;
  const absl::Time now = absl::Now();
  if (now - last_probe < kProbeInterval) return false;
  last_probe = now;
  if (!response_started) {
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    return !WriteAll(kContinue, sizeof(kContinue) - 1);
  }
  return probe && !probe();
}

bool ConnStream::is_readable() const {
  const RequestFraming& f = *c_.framing;
  return head_pos_ < f.head().size() || body_pos_ < f.body().size();
}

ssize_t ConnStream::read(char* ptr, size_t size) {
  const RequestFraming& f = *c_.framing;
  const std::string& from = head_pos_ < f.head().size() ? f.head() : f.body();
  size_t& pos = head_pos_ < f.head().size() ? head_pos_ : body_pos_;
  const size_t n = std::min(size, from.size() - pos);
  memcpy(ptr, from.data() + pos, n);
  pos += n;
  return static_cast<ssize_t>(n);
}

ssize_t ConnStream::write(const char* ptr, size_t size) {
  c_.response_started = true;
  return c_.WriteAll(ptr, size) ? static_cast<ssize_t>(size) : -1;
}

void ConnStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  ip = c_.peer_ip;
  port = c_.peer_port;
}

void ConnStream::get_local_ip_and_port(std::string& ip, int& port) const {
  ip = c_.local_ip;
  port = c_.local_port;
}

}  // namespace sluice::daemon
