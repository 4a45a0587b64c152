// One connection of the HTTP front (http_front.h): its socket, optional TLS
// session, request framing and the httplib::Stream a handler reads the
// buffered request from and writes the response to. Internal to
// http_front.cc.
//
// Thread-safety: used by the event thread while a request arrives and by one
// handler thread while it is served, never by both at once.
#ifndef SLUICE_DAEMON_HTTP_CONN_H_
#define SLUICE_DAEMON_HTTP_CONN_H_

#include <httplib.h>

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "daemon/http_framing.h"
#include "daemon/http_front.h"

typedef struct ssl_st SSL;

namespace sluice::daemon {

struct HttpFront::Conn : public HttpClient {
  Conn(int fd, FramingLimits limits, absl::Duration write_timeout);
  ~Conn() override;

  // Reads what is there: bytes (> 0), kEof, kAgain (nothing yet) or kError.
  static constexpr ssize_t kEof = 0, kAgain = -1, kError = -2;
  ssize_t Read(char* buf, size_t size);
  // Writes all of `data`, waiting at most write_timeout for each chunk to
  // leave; false (and `broken`) when it could not.
  bool WriteAll(const char* data, size_t size);
  bool WaitWritable() const;
  bool Gone(const std::function<bool()>& probe) override;
  void ResetFraming() { framing = std::make_unique<RequestFraming>(limits); }

  const int fd;
  const FramingLimits limits;
  const absl::Duration write_timeout;
  SSL* ssl = nullptr;
  bool tls_wants_write = false;
  std::string peer_ip, local_ip;
  int peer_port = 0, local_port = 0;
  std::unique_ptr<RequestFraming> framing;
  std::string pending;  // read beyond the current request (pipelined)
  absl::Time deadline = absl::InfiniteFuture();
  bool head_deadline_set = false;
  bool admitted = false;
  bool lingering = false;  // refused: draining input until closed
  bool peer_eof = false;
  bool broken = false;
  bool response_started = false;
  absl::Time last_probe = absl::InfinitePast();
  size_t reserved = 0;
};

// The buffered request for cpp-httplib to read, the connection to write to.
class ConnStream : public httplib::Stream {
 public:
  explicit ConnStream(HttpFront::Conn& c) : c_(c) {}
  bool is_readable() const override;
  bool is_writable() const override { return c_.WaitWritable(); }
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return c_.fd; }

 private:
  HttpFront::Conn& c_;
  size_t head_pos_ = 0;
  size_t body_pos_ = 0;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_HTTP_CONN_H_
