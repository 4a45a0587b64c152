#include "daemon/metrics_http.h"

#include <httplib.h>
#include <sys/socket.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::daemon {
namespace {

constexpr time_t kSocketTimeoutSeconds = 2;
constexpr size_t kHandlerThreads = 32;

}  // namespace

MetricsHttpServer::MetricsHttpServer() : server_(std::make_unique<httplib::Server>()) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, std::function<std::string()> render) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_address='", address, "': expected HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer());
  s->server_->Get("/metrics", [render](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s->server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("sluiced: metrics at /metrics\n", "text/plain");
  });
  // httplib's default sets SO_REUSEPORT: a second daemon would share the port.
  s->server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Slow or idle clients must not hold every handler thread: short socket
  // timeouts, no long keep-alive, and more threads than a few such clients.
  s->server_->set_read_timeout(kSocketTimeoutSeconds, 0);
  s->server_->set_write_timeout(kSocketTimeoutSeconds, 0);
  s->server_->set_keep_alive_timeout(kSocketTimeoutSeconds);
  s->server_->set_keep_alive_max_count(16);
  s->server_->new_task_queue = [] { return new httplib::ThreadPool(kHandlerThreads); };
  s->port_ = port == 0 ? s->server_->bind_to_any_port(host)
                       : (s->server_->bind_to_port(host, port) ? port : -1);
  if (s->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on --metrics_address=", address));
  }
  httplib::Server* raw = s->server_.get();
  s->thread_ = std::thread([raw] { raw->listen_after_bind(); });
  return s;
}

void MetricsHttpServer::Stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

}  // namespace sluice::daemon
