// A minimal HTTP endpoint serving GET /metrics (Prometheus text format 0.0.4)
// through the HTTP front (http_front.h): the same deadlines, connection caps
// and body cap as the API port, so slow or idle clients cannot hold the
// threads that answer scrapes.
//
// Thread-safety: `render` is called from the server's threads; it must be
// thread-safe. Stop() may be called once, from any thread.
#ifndef SLUICE_DAEMON_METRICS_HTTP_H_
#define SLUICE_DAEMON_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/http_front.h"

namespace sluice::daemon {

// The metrics port's limits: scrapes are small GETs, so no body, few
// connections per client, a short header deadline.
HttpLimits MetricsHttpLimits();

class MetricsHttpServer {
 public:
  // Binds `address` (HOST:PORT; port 0 picks a free one) and starts serving.
  // Unavailable "cannot listen on --metrics_address=..." when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& address, std::function<std::string()> render,
      HttpLimits limits = MetricsHttpLimits(),
      std::function<void(absl::string_view reason)> on_refused = nullptr);
  ~MetricsHttpServer();
  int port() const { return front_->port(); }
  void Stop();

 private:
  MetricsHttpServer() = default;
  RoutedServer server_;
  std::unique_ptr<HttpFront> front_;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_METRICS_HTTP_H_
