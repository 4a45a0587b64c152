#include "daemon/http_front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/http_conn.h"

namespace sluice::daemon {
namespace {

constexpr size_t kReadChunk = 64 << 10;
// Chunked bodies are budgeted in steps, not byte by byte.
constexpr size_t kBudgetStep = 256 << 10;
// How long a refused connection's input is drained before it is closed, so
// that the client reads the refusal instead of a reset.
constexpr absl::Duration kLinger = absl::Seconds(1);
constexpr absl::Duration kTick = absl::Milliseconds(100);

thread_local HttpFront::Conn* current_conn = nullptr;

std::string NumericHost(const sockaddr_storage& addr, socklen_t len, int* port) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), serv,
                  sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "";
  }
  (void)absl::SimpleAtoi(serv, port);
  return host;
}

const char* Reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    default: return "Service Unavailable";
  }
}

}  // namespace

RoutedServer::RoutedServer() : placeholder_fd_(open("/dev/null", O_RDONLY | O_CLOEXEC)) {
  svr_sock_ = placeholder_fd_;
}

RoutedServer::~RoutedServer() {
  svr_sock_ = INVALID_SOCKET;
  close(placeholder_fd_);
}

HttpFront::HttpFront(HttpFrontOptions options, RoutedServer* server)
    : options_(std::move(options)), server_(server) {}

HttpFront::~HttpFront() { Stop(); }

HttpClient* HttpFront::CurrentClient() { return current_conn; }

absl::StatusOr<std::unique_ptr<HttpFront>> HttpFront::Start(HttpFrontOptions options,
                                                            RoutedServer* server) {
  std::unique_ptr<HttpFront> f(new HttpFront(std::move(options), server));
  if (!f->options_.tls_cert_file.empty()) {
    if (absl::Status s = f->SetUpTls(); !s.ok()) return s;
  }
  if (absl::Status s = f->Bind(); !s.ok()) return s;
  f->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  f->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (f->epoll_fd_ < 0 || f->wake_fd_ < 0) {
    return absl::InternalError(absl::StrCat(f->options_.flag, ": epoll/eventfd failed"));
  }
  for (int fd : {f->listen_fd_, f->wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(f->epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  f->pool_ = std::make_unique<httplib::ThreadPool>(std::max(1, f->options_.threads));
  f->quick_pool_ = std::make_unique<httplib::ThreadPool>(std::max(1, f->options_.quick_threads));
  f->loop_ = std::thread([raw = f.get()] { raw->Loop(); });
  return f;
}

absl::Status HttpFront::SetUpTls() {
  const HttpFrontOptions& o = options_;
  tls_ = SSL_CTX_new(TLS_server_method());
  bool ok = tls_ != nullptr &&
            SSL_CTX_use_certificate_chain_file(tls_, o.tls_cert_file.c_str()) == 1 &&
            SSL_CTX_use_PrivateKey_file(tls_, o.tls_key_file.c_str(), SSL_FILETYPE_PEM) == 1 &&
            SSL_CTX_check_private_key(tls_) == 1;
  if (ok && !o.tls_client_ca_file.empty()) {
    ok = SSL_CTX_load_verify_locations(tls_, o.tls_client_ca_file.c_str(), nullptr) == 1;
    SSL_CTX_set_verify(tls_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        o.flag, "='", o.address, "': cannot set up TLS with --tls_cert_file='", o.tls_cert_file,
        "', --tls_key_file='", o.tls_key_file, "'",
        o.tls_client_ca_file.empty() ? ""
                                     : ", --tls_client_ca_file='" + o.tls_client_ca_file + "'"));
  }
  SSL_CTX_set_mode(tls_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return absl::OkStatus();
}

// SO_REUSEADDR only: SO_REUSEPORT would let a second daemon share the port.
absl::Status HttpFront::Bind() {
  const std::string& address = options_.address;
  const absl::Status cannot = absl::UnavailableError(
      absl::StrCat("cannot listen on ", options_.flag, "=", address));
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_.flag, "='", address, "': expected HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints,
                  &found) != 0) {
    return cannot;
  }
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
      listen_fd_ = fd;
    } else {
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) return cannot;
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&local), &len);
  NumericHost(local, len, &port_);
  return absl::OkStatus();
}

void HttpFront::Loop() {
  epoll_event events[64];
  absl::Time next_tick = absl::Now() + kTick;
  while (!stopping_) {
    const int n = epoll_wait(epoll_fd_, events, 64, absl::ToInt64Milliseconds(kTick));
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        Accept();
      } else if (fd == wake_fd_) {
        uint64_t v;
        (void)!read(wake_fd_, &v, sizeof(v));
        TakeReturned();
      } else if (auto it = conns_.find(fd); it != conns_.end()) {
        Progress(std::shared_ptr<Conn>(it->second));
      }
    }
    if (absl::Now() >= next_tick) {
      ExpireDeadlines();
      next_tick = absl::Now() + kTick;
    }
  }
}

void HttpFront::Watch(Conn& c, bool add) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (c.tls_wants_write ? EPOLLOUT : 0);
  ev.data.fd = c.fd;
  epoll_ctl(epoll_fd_, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd, &ev);
}

void HttpFront::Accept() {
  while (true) {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    auto c = std::make_shared<Conn>(fd, options_.limits.framing, options_.limits.write_timeout);
    c->peer_ip = NumericHost(peer, len, &c->peer_port);
    sockaddr_storage local{};
    len = sizeof(local);
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
    c->local_ip = NumericHost(local, len, &c->local_port);
    int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    const auto counted = per_client_.find(c->peer_ip);
    const int from_client = counted == per_client_.end() ? 0 : counted->second;
    if (static_cast<int>(conns_.size()) >= options_.limits.max_connections ||
        from_client >= options_.limits.max_connections_per_client) {
      // Refused before any TLS: the answer is plain text for a plain client.
      const std::string why =
          from_client >= options_.limits.max_connections_per_client
              ? absl::StrCat("too many connections from ", c->peer_ip, " (at most ",
                             options_.limits.max_connections_per_client, ")")
              : absl::StrCat("too many connections (at most ", options_.limits.max_connections, ")");
      if (options_.on_refused) {
        options_.on_refused(from_client >= options_.limits.max_connections_per_client
                                ? "client_connections"
                                : "connections");
      }
      if (tls_ == nullptr) {
        const std::string body = options_.error_body ? options_.error_body(503, why) : why;
        const std::string out = absl::StrCat(
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: ", options_.error_content_type,
            "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
        (void)!send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      continue;  // ~Conn closes it
    }
    if (tls_ != nullptr) {
      c->ssl = SSL_new(tls_);
      SSL_set_fd(c->ssl, fd);
      SSL_set_accept_state(c->ssl);
    }
    per_client_[c->peer_ip]++;
    // The first request's headers are due from the accept on.
    c->deadline = absl::Now() + options_.limits.header_timeout;
    c->head_deadline_set = true;
    conns_[fd] = c;
    Watch(*c, /*add=*/true);
  }
}

bool HttpFront::Reserve(Conn& c, size_t bytes) {
  size_t now = reserved_.load();
  do {
    if (now + bytes > options_.limits.memory_budget) return false;
  } while (!reserved_.compare_exchange_weak(now, now + bytes));
  c.reserved += bytes;
  return true;
}

void HttpFront::Release(Conn& c) {
  reserved_ -= c.reserved;
  c.reserved = 0;
}

// After the headers: the body's budget, its deadline and "100 Continue".
// False when the connection was refused.
bool HttpFront::Admit(Conn& c) {
  const RequestFraming& f = *c.framing;
  if (!c.admitted) {
    c.admitted = true;
    c.deadline = absl::Now() + options_.limits.body_timeout;
    if (!Reserve(c, kBudgetPerByte * (f.head().size() + f.declared_length() + kReadChunk))) {
      return false;
    }
    if (f.expects_continue()) {
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      c.WriteAll(kContinue, sizeof(kContinue) - 1);
    }
  }
  const size_t need = kBudgetPerByte * (f.head().size() + f.body_bytes() + kReadChunk);
  return need <= c.reserved || Reserve(c, need - c.reserved + kBudgetPerByte * kBudgetStep);
}

void HttpFront::Progress(const std::shared_ptr<Conn>& c) {
  char buf[kReadChunk];
  while (true) {
    if (c->lingering) {
      const ssize_t n = c->Read(buf, sizeof(buf));
      if (n == Conn::kAgain) return;
      if (n <= 0) return Close(c);
      continue;
    }
    RequestFraming& f = *c->framing;
    if (!c->pending.empty() && f.state() != RequestFraming::State::kComplete) {
      c->pending.erase(0, f.Consume(c->pending));
    }
    if (f.state() == RequestFraming::State::kRefused) {
      return Refuse(c, f.refusal_status(), f.refusal());
    }
    if (f.state() != RequestFraming::State::kHeaders && !Admit(*c)) {
      return Refuse(c, 503, "the server holds as many request bytes as its budget allows; "
                            "retry later");
    }
    if (f.state() == RequestFraming::State::kComplete) return Dispatch(c);
    const ssize_t n = c->Read(buf, sizeof(buf));
    if (n == Conn::kAgain) return Watch(*c, /*add=*/false);
    if (n <= 0) {
      // A client that closed before a whole request: nobody to answer.
      c->peer_eof = true;
      return Close(c);
    }
    if (!c->head_deadline_set) {
      c->head_deadline_set = true;
      if (f.state() == RequestFraming::State::kHeaders && !f.started()) {
        c->deadline = absl::Now() + options_.limits.header_timeout;
      }
    }
    const size_t used = f.Consume(absl::string_view(buf, static_cast<size_t>(n)));
    c->pending.append(buf + used, static_cast<size_t>(n) - used);
  }
}

void HttpFront::Dispatch(const std::shared_ptr<Conn>& c) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  c->deadline = absl::InfiniteFuture();
  // A client that half-closed right after its request: EOF now is no reason
  // to drop the request (the answer is still wanted).
  if (c->pending.empty()) {
    char probe;
    if (c->ssl == nullptr && recv(c->fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
      c->peer_eof = true;
    }
  }
  const absl::string_view method = c->framing->method();
  httplib::ThreadPool* pool =
      method == "GET" || method == "HEAD" ? quick_pool_.get() : pool_.get();
  pool->enqueue([this, c] { Serve(c); });
}

void HttpFront::Serve(const std::shared_ptr<Conn>& c) {
  current_conn = c.get();
  ConnStream stream(*c);
  bool closed = false;
  const bool ok = server_->Serve(stream, c->peer_eof || stopping_, &closed);
  current_conn = nullptr;
  const bool close = !ok || closed || c->broken || c->peer_eof || stopping_;
  std::lock_guard<std::mutex> lock(returned_mu_);
  returned_.emplace_back(c, close);
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void HttpFront::TakeReturned() {
  std::vector<std::pair<std::shared_ptr<Conn>, bool>> back;
  {
    std::lock_guard<std::mutex> lock(returned_mu_);
    back.swap(returned_);
  }
  for (auto& [c, close] : back) {
    Release(*c);
    if (close) {
      Close(c);
      continue;
    }
    c->ResetFraming();
    c->admitted = false;
    c->response_started = false;
    c->head_deadline_set = false;
    c->last_probe = absl::InfinitePast();
    c->deadline = absl::Now() + (c->pending.empty() ? options_.limits.idle_timeout
                                                    : options_.limits.header_timeout);
    Watch(*c, /*add=*/true);
    Progress(c);  // a pipelined request may be complete already
  }
}

void HttpFront::Refuse(const std::shared_ptr<Conn>& c, int status, const std::string& message) {
  if (options_.on_refused) {
    options_.on_refused(status == 503   ? "memory_budget"
                        : status == 408 ? "timeout"
                        : status == 413 ? "body_too_large"
                        : status == 431 ? "headers_too_large"
                                        : "malformed");
  }
  Release(*c);
  const std::string body = options_.error_body ? options_.error_body(status, message) : message;
  const std::string out =
      absl::StrCat("HTTP/1.1 ", status, " ", Reason(status), "\r\nContent-Type: ",
                   options_.error_content_type, "\r\nContent-Length: ", body.size(),
                   "\r\nConnection: close\r\n\r\n", body);
  // The event thread must not wait on one client: a refusal that does not
  // fit in the socket buffer at once is cut.
  if (c->ssl == nullptr) {
    (void)!send(c->fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(c->fd, SHUT_WR);
  } else {
    SSL_write(c->ssl, out.data(), static_cast<int>(out.size()));
    SSL_shutdown(c->ssl);
  }
  c->lingering = true;
  c->pending.clear();
  c->deadline = absl::Now() + kLinger;
  Watch(*c, /*add=*/false);
}

void HttpFront::Close(const std::shared_ptr<Conn>& c) {
  Release(*c);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  if (--per_client_[c->peer_ip] <= 0) per_client_.erase(c->peer_ip);
  conns_.erase(c->fd);
}

void HttpFront::ExpireDeadlines() {
  const absl::Time now = absl::Now();
  std::vector<std::shared_ptr<Conn>> expired;
  for (const auto& [fd, c] : conns_) {
    if (c->deadline < now) expired.push_back(c);
  }
  for (const std::shared_ptr<Conn>& c : expired) {
    if (c->lingering || !c->framing->started()) {
      Close(c);
    } else {
      Refuse(c, 408, c->framing->state() == RequestFraming::State::kHeaders
                         ? "the request headers did not arrive in time"
                         : "the request body did not arrive in time");
    }
  }
}

void HttpFront::Stop() {
  if (!loop_.joinable()) return;
  stopping_ = true;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  loop_.join();
  // Handlers finish (the supervisor has failed what was in flight); their
  // connections come back through returned_ and are closed with the rest.
  pool_->shutdown();
  quick_pool_->shutdown();
  returned_.clear();
  conns_.clear();
  per_client_.clear();
  close(listen_fd_);
  close(epoll_fd_);
  close(wake_fd_);
  if (tls_ != nullptr) SSL_CTX_free(tls_);
}

}  // namespace sluice::daemon
