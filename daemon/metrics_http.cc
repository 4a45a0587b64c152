#include "daemon/metrics_http.h"

#include <httplib.h>

#include <utility>

namespace sluice::daemon {

HttpLimits MetricsHttpLimits() {
  HttpLimits l;
  l.framing.max_header_bytes = 16 << 10;
  l.framing.max_body_bytes = 0;
  l.header_timeout = absl::Seconds(5);
  l.body_timeout = absl::Seconds(5);
  l.idle_timeout = absl::Seconds(5);
  l.write_timeout = absl::Seconds(5);
  l.max_connections = 256;
  l.max_connections_per_client = 64;
  l.memory_budget = size_t{16} << 20;
  return l;
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, std::function<std::string()> render, HttpLimits limits,
    std::function<void(absl::string_view reason)> on_refused) {
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer());
  s->server_.Get("/metrics", [render](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s->server_.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("sluiced: metrics at /metrics\n", "text/plain");
  });
  HttpFrontOptions front;
  front.flag = "--metrics_address";
  front.address = address;
  front.threads = 1;  // nothing but GET is routed
  front.quick_threads = 4;
  front.limits = limits;
  front.on_refused = std::move(on_refused);
  auto started = HttpFront::Start(std::move(front), &s->server_);
  if (!started.ok()) return started.status();
  s->front_ = *std::move(started);
  return s;
}

void MetricsHttpServer::Stop() {
  if (front_) front_->Stop();
}

}  // namespace sluice::daemon
