#include "daemon/service.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/request_limits.h"

namespace sluice::daemon {
namespace {

// gRPC's default receive limit (4 MiB), less room for framing and metadata.
constexpr size_t kMaxTokenizeResponseBytes = (size_t{4} << 20) - (64 << 10);

// gRPC times deadlines on its own clock; the wall clock read here can trail
// it by a little when the call is cancelled, so a cancel this close to the
// deadline counts as the deadline's.
constexpr absl::Duration kDeadlineSlack = absl::Milliseconds(20);

absl::Time DeadlineOf(const grpc::ServerContext& context) {
  const auto d = context.deadline();
  if (d == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(d);
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

grpc::Status SluiceService::Authorize(const grpc::ServerContext& context, ApiKeys::Role role) {
  if (api_keys_ == nullptr || !api_keys_->enabled()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  const std::string_view value =
      it == metadata.end() ? std::string_view() : std::string_view(it->second.data(),
                                                                   it->second.size());
  const absl::Status s = api_keys_->Check(value, role);
  if (s.ok()) return grpc::Status::OK;
  metrics_->AddAuthFailure(s.code() == absl::StatusCode::kPermissionDenied ? "permission_denied"
                                                                           : "unauthenticated");
  return ToGrpcStatus(s);
}

grpc::Status SluiceService::LoadModel(grpc::ServerContext* context,
                                      const v1::LoadModelRequest* request,
                                      v1::LoadModelResponse* response) {
  if (grpc::Status s = Authorize(*context, ApiKeys::Role::kAdmin); !s.ok()) return s;
  if (model_paths_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "LoadModel: this daemon serves only its --model");
  }
  if (absl::Status s = model_paths_->Check(request->path()); !s.ok()) return ToGrpcStatus(s);
  // The name was checked above; what is opened is checked again by its fd,
  // so that a symlink flipped in between cannot lead outside.
  absl::StatusOr<LoadOutcome> loaded = supervisor_->LoadModel(
      *request, [this, request](const std::string&, int fd) {
        return model_paths_->CheckOpened(request->path(), fd);
      });
  if (!loaded.ok()) return ToGrpcStatus(loaded.status());
  *response->mutable_model() = std::move(loaded->model);
  response->set_replacement(std::move(loaded->replacement));
  return grpc::Status::OK;
}

grpc::Status SluiceService::UnloadModel(grpc::ServerContext* context,
                                        const v1::UnloadModelRequest* request,
                                        v1::UnloadModelResponse*) {
  if (grpc::Status s = Authorize(*context, ApiKeys::Role::kAdmin); !s.ok()) return s;
  return ToGrpcStatus(supervisor_->UnloadModel(*request));
}

grpc::Status SluiceService::ListModels(grpc::ServerContext* context,
                                       const v1::ListModelsRequest*,
                                       v1::ListModelsResponse* response) {
  if (grpc::Status s = Authorize(*context, ApiKeys::Role::kGenerate); !s.ok()) return s;
  for (v1::ModelInfo& m : supervisor_->ListModels()) *response->add_models() = std::move(m);
  if (std::optional<v1::LoadProgress> loading = supervisor_->Loading()) {
    *response->mutable_loading() = *std::move(loading);
  }
  return grpc::Status::OK;
}

namespace {

// Until the deadline: Next() blocks on the handle's events (no polling); the
// call watcher interrupts it when the client goes away.
absl::Duration Remaining(absl::Time deadline) {
  return deadline == absl::InfiniteFuture() ? absl::InfiniteDuration()
                                            : std::max(deadline - absl::Now(),
                                                       absl::ZeroDuration());
}

}  // namespace

uint64_t SluiceService::WatchCall(grpc::ServerContext* context,
                                  const std::shared_ptr<RequestHandle>& handle) {
  std::weak_ptr<RequestHandle> weak = handle;
  return watcher_.Watch(context, [this, weak] {
    if (std::shared_ptr<RequestHandle> h = weak.lock()) {
      supervisor_->Cancel(h);
      h->Interrupt(absl::CancelledError("the client cancelled"));
    }
  });
}

grpc::Status SluiceService::Generate(grpc::ServerContext* context,
                                     const v1::GenerateRequest* request,
                                     grpc::ServerWriter<v1::GenerateResponse>* writer) {
  if (grpc::Status s = Authorize(*context, ApiKeys::Role::kGenerate); !s.ok()) return s;
  const v1::GenerateRequest* submitted = request;
  v1::GenerateRequest with_id;
  if (request->request_id().empty()) {
    const auto metadata = context->client_metadata().find("x-request-id");
    if (metadata != context->client_metadata().end()) {
      std::string id = SaneRequestId(
          absl::string_view(metadata->second.data(), metadata->second.size()));
      if (!id.empty()) {
        with_id = *request;
        with_id.set_request_id(std::move(id));
        submitted = &with_id;
      }
    }
  }
  const absl::Time deadline = DeadlineOf(*context);
  absl::StatusOr<std::shared_ptr<RequestHandle>> handle =
      supervisor_->SubmitGenerate(*submitted, deadline);
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const uint64_t token = WatchCall(context, *handle);
  grpc::Status status = StreamEvents(context, deadline, **handle, writer);
  watcher_.Unwatch(token);
  if (!status.ok() && status.error_code() != grpc::StatusCode::UNAVAILABLE) {
    supervisor_->Cancel(*handle);
  }
  return status;
}

grpc::Status SluiceService::StreamEvents(grpc::ServerContext* context, absl::Time deadline,
                                         RequestHandle& handle,
                                         grpc::ServerWriter<v1::GenerateResponse>* writer) {
  // gRPC cancels a call whose deadline passed: that is not the client's doing.
  auto past_deadline = [deadline] { return absl::Now() + kDeadlineSlack >= deadline; };
  auto deadline_expired = [this] {
    metrics_->AddRequest("deadline_exceeded");
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the deadline expired before the generation finished");
  };
  RequestHandle::Event event;
  while (true) {
    if (!handle.Next(&event, Remaining(deadline))) return deadline_expired();
    v1::GenerateResponse response;
    switch (event.type) {
      case RequestHandle::Event::Type::kChunk:
        *response.mutable_chunk() = std::move(event.chunk);
        if (!writer->Write(response)) {
          // A write fails once gRPC has cancelled the call.
          if (past_deadline()) return deadline_expired();
          metrics_->AddRequest("cancelled");
          return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
        }
        break;
      case RequestHandle::Event::Type::kDone:
        *response.mutable_done() = std::move(event.done);
        writer->Write(response);
        return grpc::Status::OK;
      case RequestHandle::Event::Type::kError:
        // The worker ends a request whose deadline passed too.
        if ((context->IsCancelled() && past_deadline()) ||
            event.status.code() == absl::StatusCode::kDeadlineExceeded) {
          return deadline_expired();
        }
        if (event.status.code() != absl::StatusCode::kUnavailable) {
          metrics_->AddRequest(event.status.code() == absl::StatusCode::kCancelled
                                   ? "cancelled"
                                   : "error");
        }
        return ToGrpcStatus(event.status);
      case RequestHandle::Event::Type::kTokenized:
        return grpc::Status(grpc::StatusCode::INTERNAL, "unexpected tokenize reply");
    }
  }
}

grpc::Status SluiceService::Tokenize(grpc::ServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) {
  if (grpc::Status s = Authorize(*context, ApiKeys::Role::kGenerate); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<RequestHandle>> handle =
      supervisor_->SubmitTokenize(*request);
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const absl::Time deadline = DeadlineOf(*context);
  const uint64_t token = WatchCall(context, *handle);
  RequestHandle::Event event;
  const bool got = (*handle)->Next(&event, Remaining(deadline));
  watcher_.Unwatch(token);
  if (!got || (event.type == RequestHandle::Event::Type::kError && context->IsCancelled())) {
    supervisor_->Cancel(*handle);
    return absl::Now() >= deadline
               ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline expired")
               : grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled");
  }
  if (event.type == RequestHandle::Event::Type::kError) return ToGrpcStatus(event.status);
  // Stock gRPC clients refuse messages over 4 MiB: an answer they cannot read
  // is an error they can act on instead.
  if (const size_t bytes = event.tokenized.ByteSizeLong(); bytes > kMaxTokenizeResponseBytes) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("TokenizeRequest.text: the response would be ", bytes,
                     " bytes, over the ", kMaxTokenizeResponseBytes,
                     " a stock gRPC client accepts; send at most about ",
                     request->text().size() * kMaxTokenizeResponseBytes / bytes,
                     " bytes of text per call"));
  }
  *response = std::move(event.tokenized);
  return grpc::Status::OK;
}

std::string SluiceService::PrometheusText() {
  return metrics_->Render(supervisor_->Snapshot(), ReadHostMemory());
}

grpc::Status SluiceService::GetMetrics(grpc::ServerContext* context,
                                       const v1::GetMetricsRequest*,
                                       v1::GetMetricsResponse* response) {
  if (grpc::Status s = Authorize(*context, ApiKeys::Role::kGenerate); !s.ok()) return s;
  MetricsSnapshot s = supervisor_->Snapshot();
  response->set_requests_running(s.requests_running);
  response->set_requests_waiting(s.requests_waiting);
  response->set_prompt_tokens_total(metrics_->prompt_tokens_total());
  response->set_generated_tokens_total(metrics_->generated_tokens_total());
  *response->mutable_worker() = s.worker;
  response->mutable_worker()->set_restarts(metrics_->restarts_total());
  *response->mutable_slot_cache() = s.slot_cache;
  response->set_prometheus_text(metrics_->Render(s, ReadHostMemory()));
  return grpc::Status::OK;
}

}  // namespace sluice::daemon
