// sluiced: the Sluice supervisor daemon. See docs/OPERATIONS.md.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/api_keys.h"
#include "daemon/cgroup.h"
#include "daemon/config.h"
#include "daemon/defaults.h"
#include "daemon/http_api.h"
#include "daemon/metrics.h"
#include "daemon/metrics_http.h"
#include "daemon/model_paths.h"
#include "daemon/notify.h"
#include "daemon/parse_errors.h"
#include "daemon/service.h"
#include "daemon/sluiced_flags.h"
#include "daemon/supervisor.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"

namespace sluice::daemon {
namespace {

void Log(const std::string& line) { std::cerr << "sluiced: " << line << std::endl; }

absl::StatusOr<std::string> FindWorkerBinary(const std::string& configured) {
  std::vector<std::string> candidates;
  if (!configured.empty()) {
    candidates.push_back(configured);
  } else {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    std::string dir = n > 0 ? std::string(self, n) : std::string(".");
    dir = dir.substr(0, dir.rfind('/'));
    candidates = {dir + "/sluice-worker", dir + "/../worker/sluice-worker"};
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--worker_binary: no executable sluice-worker at ", candidates.front(),
      configured.empty() ? " (nor in ../worker/)" : ""));
}

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in || ss.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "='", path, "': not a readable PEM file"));
  }
  return ss.str();
}

// Plaintext unless TLS files are configured.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const Config& c) {
  if (c.tls_cert_file.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      c.tls_client_ca_file.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  auto cert = ReadPem("tls_cert_file", c.tls_cert_file);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("tls_key_file", c.tls_key_file);
  if (!key.ok()) return key.status();
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!c.tls_client_ca_file.empty()) {
    auto ca = ReadPem("tls_client_ca_file", c.tls_client_ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
  }
  return grpc::SslServerCredentials(options);
}

absl::Status WritePortFile(const std::string& path, int grpc_port, int metrics_port,
                           int http_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "grpc=" << grpc_port << "\nmetrics=" << metrics_port << "\nhttp=" << http_port
        << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write --port_file=", path));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

// The OpenAI-compatible HTTP API on the supervisor's queue, with the gRPC
// port's TLS files and API keys (the same bearer keys, the same roles).
absl::Status StartHttpApi(const Config& config, Supervisor* supervisor, Metrics* metrics,
                          const ApiKeys* api_keys, absl::Mutex* server_mu,
                          std::unique_ptr<HttpApiServer>* out) {
  HttpApiOptions options;
  if (api_keys->enabled()) {
    options.authorize = [api_keys, metrics](absl::string_view authorization, bool admin) {
      absl::Status s = api_keys->Check(
          std::string_view(authorization.data(), authorization.size()),
          admin ? ApiKeys::Role::kAdmin : ApiKeys::Role::kGenerate);
      if (!s.ok()) {
        metrics->AddAuthFailure(s.code() == absl::StatusCode::kPermissionDenied
                                    ? "permission_denied"
                                    : "unauthenticated");
      }
      return s;
    };
  }
  options.address = config.http_address;
  options.tls_cert_file = config.tls_cert_file;
  options.tls_key_file = config.tls_key_file;
  options.tls_client_ca_file = config.tls_client_ca_file;
  // Every waiting or running request holds a handler thread.
  options.threads = std::min(config.queue_limit + 8, 256);
  auto limits = HttpLimitsFromFlags();
  if (!limits.ok()) return limits.status();
  options.limits = *limits;
  auto request_timeout = HttpRequestTimeoutFromFlags();
  if (!request_timeout.ok()) return request_timeout.status();
  options.request_timeout = *request_timeout;
  auto started = HttpApiServer::Start(std::move(options), supervisor, metrics);
  if (!started.ok()) return started.status();
  absl::MutexLock lock(server_mu);
  *out = std::move(*started);
  Log(absl::StrCat("OpenAI-compatible HTTP API on ",
                   config.tls_cert_file.empty() ? "http://" : "https://",
                   config.http_address.substr(0, config.http_address.rfind(':')), ":",
                   (*out)->port(), "/v1"));
  return absl::OkStatus();
}

int Run(const Config& config, const std::string& worker_binary, sigset_t signals) {
  auto oom = OomContainment::Create(config.cgroup_mode, config.cgroup_path,
                                    config.worker_memory_limit);
  if (!oom.ok()) {
    Log(absl::StrCat("fatal: --cgroup_mode=", config.cgroup_mode, ": ", oom.status().message()));
    return 1;
  }
  Log(absl::StrCat("out-of-memory containment: ", (*oom)->description()));
  Metrics metrics;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<HttpApiServer> http_api;
  absl::Mutex server_mu;
  SupervisorOptions options;
  options.worker_binary = worker_binary;
  options.threads = config.threads;
  options.context_length = config.context_length;
  options.worker_kind = config.worker_kind == WorkerKindConfig::kCuda ? v1::WORKER_KIND_CUDA
                                                                      : v1::WORKER_KIND_CPU;
  options.device = config.device;
  options.experts = config.experts;
  options.queue_limit = config.queue_limit;
  options.batch = config.batch;
  options.worker_start_timeout = absl::Seconds(config.worker_start_timeout_s);
  options.hung_timeout = absl::Seconds(config.worker_hung_timeout_s);
  options.replace_load =
      config.replace_load == "stop_first" ? ReplaceLoad::kStopFirst : ReplaceLoad::kOverlap;
  Supervisor supervisor(options, oom->get(), &metrics, [&](bool serving) {
    absl::MutexLock lock(&server_mu);
    if (server) server->GetHealthCheckService()->SetServingStatus(serving);
    if (http_api) http_api->SetServing(serving);
    NotifyStatus(serving ? "serving" : "no worker ready");
  });
  auto model_paths = ModelPathPolicy::Create(ModelDirsFromFlags());
  if (!model_paths.ok()) {
    Log(absl::StrCat("fatal: bad configuration: ", model_paths.status().message()));
    return 2;
  }
  ApiKeys api_keys;
  if (!config.api_keys_file.empty()) {
    auto loaded = ApiKeys::LoadFile(config.api_keys_file);
    if (!loaded.ok()) {
      Log(absl::StrCat("fatal: bad configuration: ", loaded.status().message()));
      return 2;
    }
    api_keys = *std::move(loaded);
    Log(absl::StrCat("API keys: ", api_keys.size(), " from ", config.api_keys_file));
  }
  SluiceService service(&supervisor, &metrics, &*model_paths, &api_keys);

  auto credentials = ServerCredentials(config);
  if (!credentials.ok()) {
    Log(absl::StrCat("fatal: bad configuration: ", credentials.status().message()));
    return 2;
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Without this gRPC sets SO_REUSEPORT, and a second sluiced on a busy port
  // would silently share it instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(NewParseErrorInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  int grpc_port = 0;
  builder.AddListeningPort(config.grpc_address, *credentials, &grpc_port);
  builder.RegisterService(&service);
  {
    absl::MutexLock lock(&server_mu);
    server = builder.BuildAndStart();
    if (server == nullptr || grpc_port == 0) {
      Log(absl::StrCat("fatal: cannot listen on --grpc_address=", config.grpc_address));
      return 1;
    }
    // Registers the service's own name too, so that health checks may ask
    // for "sluice.v1.Sluice" as well as for the server ("").
    server->GetHealthCheckService()->SetServingStatus(v1::Sluice::service_full_name(), false);
    server->GetHealthCheckService()->SetServingStatus(false);
  }
  Log(absl::StrCat("gRPC listening on port ", grpc_port,
                   config.tls_cert_file.empty() ? " (plaintext)"
                   : config.tls_client_ca_file.empty() ? " (TLS)"
                                                       : " (TLS, client certificates required)"));

  std::unique_ptr<MetricsHttpServer> http;
  if (!config.metrics_address.empty() && config.metrics_address != "none") {
    HttpLimits limits = MetricsHttpLimits();
    limits.header_timeout =
        std::min(limits.header_timeout, HttpHeaderTimeoutFromFlags());
    auto started = MetricsHttpServer::Start(
        config.metrics_address, [&service] { return service.PrometheusText(); }, limits,
        [&metrics](absl::string_view reason) { metrics.AddHttpRefusal("metrics", reason); });
    if (!started.ok()) {
      Log(absl::StrCat("fatal: ", started.status().message()));
      return 1;
    }
    http = std::move(*started);
    Log(absl::StrCat("metrics on http://", config.metrics_address.substr(
                                               0, config.metrics_address.rfind(':')),
                     ":", http->port(), "/metrics"));
  }

  std::string start_failure;
  if (!config.http_address.empty() && config.http_address != "none") {
    if (absl::Status s = StartHttpApi(config, &supervisor, &metrics, &api_keys, &server_mu, &http_api);
        !s.ok()) {
      Log(absl::StrCat("fatal: ", s.message()));
      return 1;
    }
  }

  if (!config.model_path.empty()) {
    v1::LoadModelRequest load;
    load.set_path(config.model_path);
    load.set_model_id(config.model_id);
    auto loaded = supervisor.LoadModel(load);
    if (loaded.ok()) {
      Log(absl::StrCat("model '", loaded->model.model_id(), "' (", loaded->model.architecture(),
                       ") ready"));
    } else if (std::vector<v1::ModelInfo> models = supervisor.ListModels(); !models.empty()) {
      // The files are valid but the worker could not start (no GPU, ...).
      // Exiting would only make systemd restart us into the same failure;
      // staying up keeps health (NOT_SERVING), metrics and LoadModel there.
      start_failure = absl::StrCat("model '", models[0].model_id(),
                                   "' failed to start: ", loaded.status().message());
      Log(absl::StrCat(start_failure, "; serving with health NOT_SERVING"));
    } else {
      Log(absl::StrCat("fatal: --model: ", loaded.status().message()));
      return 1;
    }
  }
  if (!config.port_file.empty()) {
    if (absl::Status s = WritePortFile(config.port_file, grpc_port, http ? http->port() : 0,
                                       http_api ? http_api->port() : 0);
        !s.ok()) {
      Log(absl::StrCat("fatal: ", s.message()));
      return 1;
    }
  }
  NotifyReady(config.model_path.empty() ? "serving, no model loaded"
              : start_failure.empty()     ? "serving"
                                          : start_failure);

  const absl::Duration watchdog = WatchdogInterval();
  const absl::Duration tick =
      watchdog > absl::ZeroDuration() ? watchdog / 3 : absl::Seconds(1);
  int signal_number = 0;
  while (signal_number <= 0) {
    const timespec ts = absl::ToTimespec(tick);
    signal_number = sigtimedwait(&signals, nullptr, &ts);
    if (watchdog > absl::ZeroDuration()) {
      if (supervisor.Responsive(tick)) {
        NotifyWatchdog();
      } else {
        Log("the supervisor did not respond; withholding the watchdog ping");
      }
    }
  }
  Log(absl::StrCat("signal ", signal_number, " (", sigabbrev_np(signal_number),
                   "): shutting down"));
  NotifyStopping();
  const absl::Time signalled = absl::Now();
  const int unfinished = supervisor.Drain(absl::Seconds(config.drain_timeout_s));
  if (unfinished > 0) {
    Log(absl::StrCat(unfinished, " requests did not finish within --drain_timeout_s=",
                     config.drain_timeout_s, "; they end with UNAVAILABLE"));
  }
  // A balancer still sending here until its next health check gets
  // UNAVAILABLE (which clients retry) rather than streams reset by a closing
  // connection (which they cannot tell from a lost answer).
  absl::SleepFor(signalled + absl::Seconds(config.drain_notice_s) - absl::Now());
  supervisor.Shutdown();
  // Every Generate/Tokenize handler has its answer by now (the supervisor
  // failed what was in flight); the grace period only lets those answers go
  // out. gRPC 1.51 otherwise waits out the whole period after a client-side
  // cancel or deadline, hence a short one.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  if (http) http->Stop();
  if (http_api) http_api->Stop();
  Log("stopped");
  return 0;
}

}  // namespace
}  // namespace sluice::daemon

int main(int argc, char** argv) {
  using namespace sluice::daemon;
  absl::SetProgramUsageMessage("Sluice supervisor daemon. See docs/OPERATIONS.md.");
  auto args = ExpandConfig(argc, argv);
  if (!args.ok()) {
    Log(absl::StrCat("fatal: ", args.status().message()));
    return 2;
  }
  std::vector<char*> argp;
  for (std::string& a : *args) argp.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(argp.size()), argp.data());
  auto config = ConfigFromFlags(Log);
  if (!config.ok()) {
    Log(absl::StrCat("fatal: bad configuration: ", config.status().message()));
    return 2;
  }
  auto worker = FindWorkerBinary(config->worker_binary);
  if (!worker.ok()) {
    Log(absl::StrCat("fatal: bad configuration: ", worker.status().message()));
    return 2;
  }
  // Blocked before any thread starts, so that only sigtimedwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return Run(*config, *worker, signals);
}
