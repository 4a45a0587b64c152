// A minimal HTTP endpoint serving GET /metrics (Prometheus text format 0.0.4)
// on its own thread, via cpp-httplib.
//
// Thread-safety: `render` is called from the server's threads; it must be
// thread-safe. Stop() may be called once, from any thread.
#ifndef SLUICE_DAEMON_METRICS_HTTP_H_
#define SLUICE_DAEMON_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace sluice::daemon {

class MetricsHttpServer {
 public:
  // Binds `address` (HOST:PORT; port 0 picks a free one) and starts serving.
  // Unavailable naming the address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& address, std::function<std::string()> render);
  ~MetricsHttpServer();
  int port() const { return port_; }
  void Stop();

 private:
  MetricsHttpServer();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_METRICS_HTTP_H_
