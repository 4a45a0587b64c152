// Supervisor: the requests — the handles callers read, admission to the
// queue, dispatch to the serving worker and the worker's answers (the rest
// of the class is in supervisor.cc and supervisor_load.cc).
#include <algorithm>
#include <iostream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/model_desc.h"
#include "daemon/request_limits.h"
#include "daemon/supervisor.h"

namespace sluice::daemon {

using worker::v1::SupervisorMessage;
using worker::v1::WorkerMessage;

bool RequestHandle::Push(Event event) {
  absl::MutexLock lock(&mu_);
  if (finished_) return false;
  finished_ = event.type != Event::Type::kChunk;
  events_.push_back(std::move(event));
  return true;
}

void RequestHandle::Interrupt(absl::Status status) {
  Event e;
  e.type = Event::Type::kError;
  e.status = std::move(status);
  Push(std::move(e));
}

bool RequestHandle::Next(Event* event, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !events_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  return true;
}

namespace {

RequestHandle::Event ErrorEvent(absl::Status status) {
  RequestHandle::Event e;
  e.type = RequestHandle::Event::Type::kError;
  e.status = std::move(status);
  return e;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

}  // namespace

absl::Status Supervisor::CheckTokenIdsLocked(const v1::GenerateRequest& request) {
  if (request.input_case() != v1::GenerateRequest::kTokenIds) return absl::OkStatus();
  const int64_t vocab = serving_.model->info.vocab_size();
  const int64_t context = serving_.model->info.context_length();
  const auto& ids = request.token_ids().ids();
  for (int i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || (vocab > 0 && ids[i] >= vocab)) {
      // The worker's wording (worker/request_convert.cc).
      return absl::InvalidArgumentError(absl::StrCat("GenerateRequest.token_ids.ids[", i, "]=",
                                                     ids[i], ": outside the vocabulary [0, ",
                                                     vocab, ")"));
    }
  }
  if (context > 0 && ids.size() >= context) {
    return absl::InvalidArgumentError(absl::StrCat("GenerateRequest: the prompt has ", ids.size(),
                                                   " tokens; the context holds ", context));
  }
  return absl::OkStatus();
}

void Supervisor::OnRequestMessage(WorkerMessage& msg) {
  const uint64_t id = msg.request_id();
  if (const std::shared_ptr<RequestHandle> in_flight = requests_.InFlight(id)) {
    RequestHandle& h = *in_flight;
    const absl::Time now = clock_->Now();
    hung_.Progress(now);
    if (msg.has_chunk()) {
      if (!h.first_token_seen_) {
        metrics_->time_to_first_token().Observe(absl::ToDoubleSeconds(now - h.accepted_));
        h.first_token_ = now;
        h.first_token_seen_ = true;
      } else {
        metrics_->inter_token_latency().Observe(absl::ToDoubleSeconds(now - h.last_token_));
      }
      h.last_token_ = now;
      RequestHandle::Event e;
      e.type = RequestHandle::Event::Type::kChunk;
      e.chunk = std::move(*msg.mutable_chunk());
      h.Push(std::move(e));
    } else if (msg.has_done()) {
      RequestHandle::Event e;
      e.type = RequestHandle::Event::Type::kDone;
      e.done = std::move(*msg.mutable_done());
      v1::Timings* t = e.done.mutable_timings();
      t->set_queue_ms(Ms(h.started_ - h.accepted_));
      if (h.first_token_seen_) t->set_time_to_first_token_ms(Ms(h.first_token_ - h.accepted_));
      e.done.set_request_id(h.message_.generate().request_id());
      // The access log: one line per finished generation, by its id.
      std::cerr << "sluiced: request " << e.done.request_id() << ": "
                << v1::FinishReason_Name(e.done.finish_reason()) << ", "
                << e.done.usage().prompt_tokens() << " prompt + "
                << e.done.usage().completion_tokens() << " generated tokens, queued "
                << t->queue_ms() << " ms, first token " << t->time_to_first_token_ms()
                << " ms, " << Ms(now - h.accepted_) << " ms in all" << std::endl;
      metrics_->AddTokens(e.done.usage().prompt_tokens(), e.done.usage().completion_tokens());
      metrics_->AddRequest("ok");
      restart_.Succeeded();
      FinishInFlightLocked(id, std::move(e));
    } else if (msg.has_tokenized()) {
      RequestHandle::Event e;
      e.type = RequestHandle::Event::Type::kTokenized;
      e.tokenized = std::move(*msg.mutable_tokenized());
      restart_.Succeeded();
      FinishInFlightLocked(id, std::move(e));
    } else if (msg.has_error()) {
      FinishInFlightLocked(id, ErrorEvent(absl::Status(
          static_cast<absl::StatusCode>(msg.error().code()), msg.error().message())));
    }
  }
}

void Supervisor::FinishInFlightLocked(uint64_t id, RequestHandle::Event event) {
  if (const std::shared_ptr<RequestHandle> h = requests_.Finish(id)) h->Push(std::move(event));
  DispatchLocked();
}

int Supervisor::InFlightLimitLocked() const {
  const uint32_t n = serving_.model != nullptr ? serving_.model->hello.config().max_sequences() : 0;
  return std::max<int>(1, static_cast<int>(n));
}

bool Supervisor::WorkerTakesRequestsLocked() const {
  return serving_.ready() && !hung_.hung();
}

void Supervisor::DispatchLocked() {
  if (!WorkerTakesRequestsLocked()) return;
  for (const std::shared_ptr<RequestHandle>& h : requests_.TakeSendable(InFlightLimitLocked())) {
    h->started_ = clock_->Now();
    hung_.Progress(h->started_);
    // A failed send means the worker is dying: its exit fails the request.
    (void)serving_.worker->Send(h->message_);
  }
}

void Supervisor::FailAllLocked(const absl::Status& status) {
  for (const std::shared_ptr<RequestHandle>& h : requests_.TakeAll()) {
    if (h->Push(ErrorEvent(status))) metrics_->AddRequest("unavailable");
  }
}

absl::StatusOr<std::shared_ptr<RequestHandle>> Supervisor::SubmitGenerate(
    const v1::GenerateRequest& request, absl::Time deadline) {
  // Every field is checked before the request may wait in the queue.
  RETURN_IF_ERROR(CheckGenerateRequest(request));
  absl::MutexLock lock(&mu_);
  if (draining_) return absl::UnavailableError("sluiced is shutting down");
  RETURN_IF_ERROR(CheckModelId(request.model_id()));
  RETURN_IF_ERROR(CheckTokenIdsLocked(request));
  if (absl::Status room = requests_.Admits(/*generate=*/true, InFlightLimitLocked(),
                                           WorkerTakesRequestsLocked());
      !room.ok()) {
    metrics_->AddRequest("rejected");
    return room;
  }
  std::shared_ptr<RequestHandle> h(new RequestHandle(next_request_id_++, true));
  h->message_.set_request_id(h->id());
  *h->message_.mutable_generate() = request;
  if (deadline != absl::InfiniteFuture()) {
    h->message_.set_deadline_unix_micros(std::max<int64_t>(1, absl::ToUnixMicros(deadline)));
  }
  if (request.request_id().empty()) {
    h->message_.mutable_generate()->set_request_id(absl::StrCat("sluiced-", h->id()));
  }
  h->accepted_ = clock_->Now();
  requests_.Push(h);
  DispatchLocked();
  return h;
}

absl::StatusOr<std::shared_ptr<RequestHandle>> Supervisor::SubmitTokenize(
    const v1::TokenizeRequest& request) {
  RETURN_IF_ERROR(CheckTokenizeRequest(request));
  absl::MutexLock lock(&mu_);
  if (draining_) return absl::UnavailableError("sluiced is shutting down");
  RETURN_IF_ERROR(CheckModelId(request.model_id()));
  if (!WorkerTakesRequestsLocked()) {
    return absl::UnavailableError(absl::StrCat(
        "the worker of model '", serving_.model->info.model_id(), "' is not ready (",
        v1::ModelState_Name(serving_.model->info.state()), ")"));
  }
  // Tokenize takes its turn in the queue like a generation (nothing
  // overtakes), and the same bound on what may wait.
  RETURN_IF_ERROR(requests_.Admits(/*generate=*/false, InFlightLimitLocked(),
                                   WorkerTakesRequestsLocked()));
  std::shared_ptr<RequestHandle> h(new RequestHandle(next_request_id_++, false));
  h->message_.set_request_id(h->id());
  *h->message_.mutable_tokenize() = request;
  h->accepted_ = clock_->Now();
  requests_.Push(h);
  DispatchLocked();
  return h;
}

void Supervisor::Cancel(const std::shared_ptr<RequestHandle>& handle) {
  absl::MutexLock lock(&mu_);
  if (requests_.RemoveWaiting(handle)) {
    handle->Push(ErrorEvent(absl::CancelledError("cancelled while waiting in the queue")));
    return;
  }
  if (requests_.InFlight(handle->id()) == handle && !handle->cancel_sent_ &&
      serving_.worker != nullptr) {
    handle->cancel_sent_ = true;
    SupervisorMessage msg;
    msg.set_request_id(handle->id());
    msg.mutable_cancel();
    (void)serving_.worker->Send(msg);
  }
}

}  // namespace sluice::daemon
