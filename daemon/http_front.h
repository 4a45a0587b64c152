// The accept/deadline layer in front of cpp-httplib, for the HTTP API port
// and the metrics port: a handler thread only ever sees a complete request.
//
// Why: cpp-httplib gives each connection a thread from accept to close, with
// a timeout per read rather than per request, so a client sending a byte
// every few seconds held a thread forever (slowloris), and a chunked body was
// read whole past the body limit. Here one event thread owns every socket
// while a request arrives; it enforces:
//   * the listening socket without SO_REUSEPORT (a second daemon on the port
//     fails to start instead of sharing it);
//   * at most `max_connections` open connections, `max_connections_per_client`
//     per client address (more: 503 and closed at once);
//   * whole-request deadlines: the headers within `header_timeout` of the
//     connection's start (or of a kept-alive request's first byte), the body
//     within `body_timeout` of the headers, and an idle kept-alive
//     connection closed after `idle_timeout` (408 when a request had begun);
//   * the body cap whatever the framing (http_framing.h: 413 as early as the
//     bytes allow, before "100 Continue" is sent);
//   * a memory budget over all requests held at once: every request is
//     charged kBudgetPerByte bytes per byte of head and body (the framing's
//     copy, cpp-httplib's copy, the JSON parse and the proto made from it);
//     a request that does not fit is refused with 503.
// Complete requests go to a thread pool, GET/HEAD to a small separate one so
// that /health and /metrics answer whatever the generations in flight; the
// response is written by that thread (a stalled reader fails the write after
// `write_timeout`). Pipelined requests are answered in order; a kept-alive
// connection returns to the event thread between requests.
//
// Thread-safety: Start/Stop from one thread; CurrentClient() from a handler.
#ifndef SLUICE_DAEMON_HTTP_FRONT_H_
#define SLUICE_DAEMON_HTTP_FRONT_H_

#include <httplib.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/http_framing.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace sluice::daemon {

// Bytes of the budget one byte of a request costs: see the header comment.
inline constexpr size_t kBudgetPerByte = 4;

// What one port allows its clients (sluiced's --http_* flags).
struct HttpLimits {
  FramingLimits framing;
  absl::Duration header_timeout = absl::Seconds(10);
  absl::Duration body_timeout = absl::Seconds(60);
  absl::Duration idle_timeout = absl::Seconds(5);
  absl::Duration write_timeout = absl::Seconds(10);
  int max_connections = 512;
  int max_connections_per_client = 128;
  size_t memory_budget = size_t{256} << 20;
};

struct HttpFrontOptions {
  std::string flag = "--http_address";  // names the address in messages
  std::string address;                  // HOST:PORT; port 0 picks a free one
  // TLS (both files or neither); with a client CA, client certificates are
  // required.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  int threads = 8;        // handlers of requests other than GET/HEAD
  int quick_threads = 4;  // handlers of GET/HEAD
  HttpLimits limits;
  // The body and content type of the front's own refusals (408, 413, 431,
  // 503, ...); default: the message as text/plain.
  std::function<std::string(int status, const std::string& message)> error_body;
  std::string error_content_type = "text/plain";
  // Sees every refusal of the front itself, by reason: "connections",
  // "client_connections" (the caps), "memory_budget", "timeout",
  // "body_too_large", "headers_too_large", "malformed". May be empty; called
  // on the event thread, so it must not block.
  std::function<void(absl::string_view reason)> on_refused;
};


// What a request's handler may ask of its connection.
class HttpClient {
 public:
  virtual ~HttpClient() = default;
  // True once the client has left (reset, or a write failed). A client that
  // only half-closed its side after the request is still there: a FIN is
  // answered with a harmless probe (an interim "100 Continue" before the
  // response, `probe` after it began, e.g. an SSE comment), and only a reset
  // in reply, or a failing probe, counts as gone. HTTP/1.0 clients cannot
  // take a probe: a FIN means gone.
  virtual bool Gone(const std::function<bool()>& probe) = 0;
};

// cpp-httplib's routing, handlers and response writing, fed by HttpFront.
class RoutedServer : public httplib::Server {
 public:
  // cpp-httplib takes an invalid listening socket to mean "shutting down"
  // and then stops streamed responses: it is given a placeholder fd, never
  // listened on (stop() and listen() must not be called).
  RoutedServer();
  ~RoutedServer() override;
  bool Serve(httplib::Stream& stream, bool close, bool* closed) {
    return process_request(stream, close, *closed, nullptr);
  }

 private:
  int placeholder_fd_ = -1;
};

class HttpFront {
 public:
  // Binds and starts serving `server`, which must outlive the HttpFront.
  // Unavailable "cannot listen on FLAG=ADDRESS" when the address is busy or
  // unusable, InvalidArgument for a malformed address or TLS files.
  static absl::StatusOr<std::unique_ptr<HttpFront>> Start(HttpFrontOptions options,
                                                          RoutedServer* server);
  ~HttpFront();  // Stop()

  int port() const { return port_; }
  // Stops accepting, waits for the handlers, closes every connection.
  void Stop();

  // The client of the request the calling handler thread serves; nullptr on
  // any other thread.
  static HttpClient* CurrentClient();

  struct Conn;

 private:
  HttpFront(HttpFrontOptions options, RoutedServer* server);
  absl::Status Bind();
  absl::Status SetUpTls();
  void Loop();
  void Accept();
  void Progress(const std::shared_ptr<Conn>& c);
  bool Admit(Conn& c);
  void Dispatch(const std::shared_ptr<Conn>& c);
  void Serve(const std::shared_ptr<Conn>& c);
  void Refuse(const std::shared_ptr<Conn>& c, int status, const std::string& message);
  void Close(const std::shared_ptr<Conn>& c);
  void TakeReturned();
  void ExpireDeadlines();
  void Watch(Conn& c, bool add);
  bool Reserve(Conn& c, size_t bytes);
  void Release(Conn& c);

  const HttpFrontOptions options_;
  RoutedServer* const server_;
  SSL_CTX* tls_ = nullptr;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> reserved_{0};
  std::thread loop_;
  std::unique_ptr<httplib::ThreadPool> pool_;
  std::unique_ptr<httplib::ThreadPool> quick_pool_;
  // Owned by the event thread (and by Stop() once it has ended).
  std::map<int, std::shared_ptr<Conn>> conns_;
  std::map<std::string, int> per_client_;
  std::mutex returned_mu_;
  std::vector<std::pair<std::shared_ptr<Conn>, bool>> returned_;  // (conn, close)
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_HTTP_FRONT_H_
