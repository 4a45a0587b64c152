// The sluice.v1.Sluice gRPC service on top of the Supervisor.
//
// absl::Status codes map 1:1 onto grpc::StatusCode. Generate streams the
// worker's chunks as they arrive. A waiting handler blocks on its request's
// events until its deadline (no polling); one CallWatcher thread notices
// cancelled calls for all handlers. On a cancel or deadline the supervisor is
// told to cancel (the worker stops within one decode step).
//
// Thread-safety: gRPC calls the handlers concurrently; all state lives in the
// Supervisor and Metrics, which are thread-safe.
#ifndef SLUICE_DAEMON_SERVICE_H_
#define SLUICE_DAEMON_SERVICE_H_

#include "absl/status/status.h"
#include "daemon/api_keys.h"
#include "daemon/call_watcher.h"
#include "daemon/metrics.h"
#include "daemon/model_paths.h"
#include "daemon/supervisor.h"
#include "grpcpp/grpcpp.h"
#include "proto/sluice/v1/sluice.grpc.pb.h"

namespace sluice::daemon {

grpc::Status ToGrpcStatus(const absl::Status& status);

class SluiceService final : public v1::Sluice::Service {
 public:
  // `model_paths` confines LoadModel (null: LoadModel is refused).
  // `api_keys` guards every RPC (null or disabled: open); health checks are
  // a separate service and stay open.
  SluiceService(Supervisor* supervisor, Metrics* metrics,
                const ModelPathPolicy* model_paths = nullptr,
                const ApiKeys* api_keys = nullptr)
      : supervisor_(supervisor),
        metrics_(metrics),
        model_paths_(model_paths),
        api_keys_(api_keys) {}

  grpc::Status LoadModel(grpc::ServerContext* context, const v1::LoadModelRequest* request,
                         v1::LoadModelResponse* response) override;
  grpc::Status UnloadModel(grpc::ServerContext* context,
                           const v1::UnloadModelRequest* request,
                           v1::UnloadModelResponse* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;
  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Tokenize(grpc::ServerContext* context, const v1::TokenizeRequest* request,
                        v1::TokenizeResponse* response) override;
  grpc::Status GetMetrics(grpc::ServerContext* context, const v1::GetMetricsRequest* request,
                          v1::GetMetricsResponse* response) override;

  // The Prometheus exposition (also served on the metrics HTTP endpoint).
  std::string PrometheusText();

 private:
  // OK, or the refusal (counted in metrics).
  grpc::Status Authorize(const grpc::ServerContext& context, ApiKeys::Role role);
  uint64_t WatchCall(grpc::ServerContext* context, const std::shared_ptr<RequestHandle>& handle);
  grpc::Status StreamEvents(grpc::ServerContext* context, absl::Time deadline,
                            RequestHandle& handle,
                            grpc::ServerWriter<v1::GenerateResponse>* writer);

  Supervisor* const supervisor_;
  Metrics* const metrics_;
  const ModelPathPolicy* const model_paths_;
  const ApiKeys* const api_keys_;
  CallWatcher watcher_;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_SERVICE_H_
