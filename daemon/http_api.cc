#include "daemon/http_api.h"

#include <httplib.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/openai_api.h"
#include "daemon/openai_api_responses.h"
#include "daemon/openai_api_tools.h"
#include "daemon/request_limits.h"

namespace sluice::daemon {
namespace {

using Event = RequestHandle::Event;

// How often a waiting handler looks at its client's socket (the same
// period as the gRPC handler's cancellation poll).
constexpr absl::Duration kClientPoll = absl::Milliseconds(5);

void SendError(httplib::Response& res, const absl::Status& status,
               absl::string_view code = "") {
  res.status = HttpStatusFor(status.code());
  res.set_content(ErrorJson(status, code), "application/json");
  if (res.status == 401) res.set_header("WWW-Authenticate", "Bearer");
}

// Counts a request that ended in an error the way SluiceService::Generate
// does: the supervisor has already counted "unavailable" and "rejected".
void CountError(Metrics* metrics, const absl::Status& status) {
  if (status.code() == absl::StatusCode::kUnavailable) return;
  metrics->AddRequest(status.code() == absl::StatusCode::kCancelled ? "cancelled" : "error");
}

}  // namespace

// One generation request from its first event to its end; shared by the
// handler and (for streams) the content provider that outlives it.
struct HttpApiServer::Generation {
  Supervisor* supervisor;
  Metrics* metrics;
  std::shared_ptr<RequestHandle> handle;
  ResponseMeta meta;
  bool include_usage = false;
  HttpClient* client = nullptr;  // the connection, while the handler runs
  // Once the stream began: how to probe a half-closed client (http_front.h).
  std::function<bool()> probe;
  bool finished = false;
  Event first;

  // The next event; false (after cancelling) when the client left first.
  bool Next(Event* event) {
    while (!handle->Next(event, kClientPoll)) {
      if (client != nullptr && client->Gone(probe)) return Abandon();
    }
    return true;
  }

  bool Abandon() {
    if (!finished) {
      finished = true;
      supervisor->Cancel(handle);
      metrics->AddRequest("cancelled");
    }
    return false;
  }

  void Answer(httplib::Response& res) {
    std::string text;
    Event e = std::move(first);
    while (true) {
      if (e.type == Event::Type::kChunk) {
        text += e.chunk.text();
      } else if (e.type == Event::Type::kDone) {
        finished = true;
        res.set_content(meta.endpoint == OpenAiEndpoint::kResponses
                            ? ResponseObjectJson(meta, text, e.done)
                            : CompletionJson(meta, text, e.done, ExtensionOf(e.done)),
                        "application/json");
        return;
      } else {
        return Fail(res, e);
      }
      if (!Next(&e)) return;
    }
  }

  void Fail(httplib::Response& res, const Event& e) {
    finished = true;
    const absl::Status status = e.type == Event::Type::kError
                                    ? e.status
                                    : absl::InternalError("unexpected worker reply");
    CountError(metrics, status);
    SendError(res, status);
  }

  // A Responses API stream: typed events (openai_api_responses.h).
  bool StreamResponse(httplib::DataSink& sink) {
    auto send = [&sink](const std::string& events) {
      return events.empty() || sink.write(events.data(), events.size());
    };
    probe = [&sink] { return sink.write(":\n\n", 3); };
    ResponsesStream events(meta);
    if (!send(events.Start())) return Abandon();
    Event e = std::move(first);
    while (true) {
      if (e.type == Event::Type::kChunk) {
        if (!send(events.Text(e.chunk.text()))) return Abandon();
      } else {
        finished = true;
        bool ok;
        if (e.type == Event::Type::kDone) {
          ok = send(events.Finish(e.done));
        } else {
          const absl::Status status = e.type == Event::Type::kError
                                          ? e.status
                                          : absl::InternalError("unexpected worker reply");
          CountError(metrics, status);
          ok = send(absl::StrCat("event: error\ndata: ", ErrorJson(status), "\n\n"));
        }
        if (ok) sink.done();
        return ok;
      }
      if (!Next(&e)) return false;
    }
  }

  // The content provider of a stream: every event until the end, in one call.
  bool Stream(httplib::DataSink& sink) {
    if (meta.endpoint == OpenAiEndpoint::kResponses) return StreamResponse(sink);
    auto send = [&sink](const std::string& payload) {
      const std::string event = absl::StrCat("data: ", payload, "\n\n");
      return sink.write(event.data(), event.size());
    };
    // An SSE comment: clients ignore it.
    probe = [&sink] { return sink.write(":\n\n", 3); };
    if (meta.endpoint == OpenAiEndpoint::kChatCompletions &&
        !send(RoleChunkJson(meta, include_usage))) {
      return Abandon();
    }
    Event e = std::move(first);
    ToolCallStream calls(meta.id);
    while (true) {
      if (e.type == Event::Type::kChunk) {
        // A chunk may hold a token without text (part of a UTF-8 character).
        const std::string text = meta.tools ? calls.Push(e.chunk.text()) : e.chunk.text();
        if (!text.empty() && !send(TextChunkJson(meta, text, include_usage))) {
          return Abandon();
        }
      } else if (e.type == Event::Type::kDone) {
        finished = true;
        bool ok = true;
        bool has_calls = false;
        if (meta.tools) {
          // Calls go out whole once they are known to parse.
          ToolCallSplit split = calls.Finish();
          has_calls = !split.calls.empty();
          if (has_calls) {
            ok = send(ToolCallsChunkJson(meta, split.calls, include_usage));
          } else if (!split.content.empty()) {
            ok = send(TextChunkJson(meta, split.content, include_usage));
          }
        }
        ok = ok && send(FinalChunkJson(meta, e.done, ExtensionOf(e.done), include_usage, has_calls));
        if (ok && include_usage) ok = send(UsageChunkJson(meta, e.done));
        if (ok) ok = send("[DONE]");
        if (ok) sink.done();
        return ok;
      } else {
        finished = true;
        const absl::Status status = e.type == Event::Type::kError
                                        ? e.status
                                        : absl::InternalError("unexpected worker reply");
        CountError(metrics, status);
        const bool ok = send(ErrorJson(status));
        if (ok) sink.done();
        return ok;
      }
      if (!Next(&e)) return false;
    }
  }
};

HttpApiServer::HttpApiServer(HttpApiOptions options, Supervisor* supervisor, Metrics* metrics)
    : options_(std::move(options)),
      supervisor_(supervisor),
      metrics_(metrics),
      id_prefix_(absl::StrCat(absl::Hex(absl::ToUnixMillis(absl::Now())))) {}

HttpApiServer::~HttpApiServer() { Stop(); }

absl::StatusOr<std::unique_ptr<HttpApiServer>> HttpApiServer::Start(HttpApiOptions options,
                                                                     Supervisor* supervisor,
                                                                     Metrics* metrics) {
  std::unique_ptr<HttpApiServer> s(new HttpApiServer(std::move(options), supervisor, metrics));
  const HttpApiOptions& o = s->options_;
  s->server_ = std::make_unique<RoutedServer>();
  s->server_->set_payload_max_length(o.limits.framing.max_body_bytes);
  s->Route();
  HttpFrontOptions front;
  front.flag = "--http_address";
  front.address = o.address;
  front.tls_cert_file = o.tls_cert_file;
  front.tls_key_file = o.tls_key_file;
  front.tls_client_ca_file = o.tls_client_ca_file;
  front.threads = std::max(1, o.threads);
  front.limits = o.limits;
  front.error_body = [](int status, const std::string& message) {
    return ErrorJson(absl::Status(status == 413 || status == 431 || status == 400 || status == 408
                                      ? absl::StatusCode::kInvalidArgument
                                      : absl::StatusCode::kUnavailable,
                                  message),
                     status == 413 ? "request_too_large"
                     : status == 408 ? "request_timeout"
                                     : "");
  };
  front.error_content_type = "application/json";
  if (metrics != nullptr) {
    front.on_refused = [metrics](absl::string_view reason) {
      metrics->AddHttpRefusal("http", reason);
    };
  }
  auto started = HttpFront::Start(std::move(front), s->server_.get());
  if (!started.ok()) return started.status();
  s->front_ = *std::move(started);
  s->port_ = s->front_->port();
  return s;
}

void HttpApiServer::Stop() {
  if (front_) front_->Stop();
}

void HttpApiServer::Route() {
  using httplib::Request;
  using httplib::Response;
  using HandlerResponse = httplib::Server::HandlerResponse;
  server_->set_pre_routing_handler([this](const Request& req, Response& res) {
    // Every routed response carries one, also the errors below.
    std::string request_id = SaneRequestId(req.get_header_value("X-Request-Id"));
    if (request_id.empty()) {
      request_id = absl::StrCat("req-", id_prefix_, "-", next_request_id_.fetch_add(1));
    }
    res.set_header("x-request-id", request_id);
    if (req.path == "/health" || !options_.authorize) return HandlerResponse::Unhandled;
    const absl::Status allowed =
        options_.authorize(req.get_header_value("Authorization"), /*admin=*/false);
    if (allowed.ok()) return HandlerResponse::Unhandled;
    SendError(res, allowed);
    // The body was not read; the connection cannot carry another request.
    res.set_header("Connection", "close");
    return HandlerResponse::Handled;
  });
  // Every status >= 400 passes here; ours already carry an OpenAI-shaped body,
  // cpp-httplib's own (unknown route, oversized body, bad request line) not.
  server_->set_error_handler(httplib::Server::HandlerWithResponse(
      [](const Request& req, Response& res) {
    if (!res.body.empty()) return HandlerResponse::Unhandled;
    const int status = res.status;
    if (status == 404) {
      SendError(res, absl::NotFoundError(absl::StrCat("no route for ", req.method, " ", req.path)),
                "unknown_url");
    } else {
      SendError(res, absl::InvalidArgumentError(
                         absl::StrCat("the HTTP request was refused with status ", status)));
    }
    res.status = status;
    return HandlerResponse::Handled;
  }));
  server_->set_exception_handler([](const Request&, Response& res, std::exception_ptr) {
    SendError(res, absl::InternalError("the request handler failed"));
  });
  server_->Get("/health", [this](const Request&, Response& res) {
    if (serving_) {
      res.set_content(R"({"status":"ok"})", "application/json");
    } else {
      SendError(res, absl::UnavailableError(
                         "no worker is ready (no model loaded, or it is starting or restarting)"));
    }
  });
  server_->Get("/v1/models", [this](const Request&, Response& res) {
    res.set_content(ModelListJson(supervisor_->ListModels()), "application/json");
  });
  server_->Get("/v1/models/(.+)", [this](const Request& req, Response& res) {
    for (const v1::ModelInfo& m : supervisor_->ListModels()) {
      if (m.model_id() == req.matches[1].str()) {
        return res.set_content(ModelJson(m), "application/json");
      }
    }
    SendError(res, absl::NotFoundError(absl::StrCat(
                       "model '", QuoteForMessage(req.matches[1].str(), 32), "' is not loaded")));
  });
  auto generate = [this](OpenAiEndpoint endpoint) {
    return [this, endpoint](const Request& req, Response& res) {
      auto parsed = endpoint == OpenAiEndpoint::kResponses ? ParseResponsesRequest(req.body)
                                                           : ParseOpenAiRequest(endpoint, req.body);
      if (!parsed.ok()) return SendError(res, parsed.status());
      // The response's x-request-id (set before routing) names the generation
      // in the daemon's log too.
      parsed->generate.set_request_id(res.get_header_value("x-request-id"));
      // Now() + an infinite timeout is InfiniteFuture(): no deadline.
      auto handle =
          supervisor_->SubmitGenerate(parsed->generate, absl::Now() + options_.request_timeout);
      if (!handle.ok()) return SendError(res, handle.status());
      auto gen = std::make_shared<Generation>();
      gen->supervisor = supervisor_;
      gen->metrics = metrics_;
      gen->handle = *std::move(handle);
      gen->include_usage = parsed->include_usage;
      gen->client = HttpFront::CurrentClient();
      gen->meta.endpoint = endpoint;
      gen->meta.id = absl::StrCat(
          endpoint == OpenAiEndpoint::kChatCompletions ? "chatcmpl-"
          : endpoint == OpenAiEndpoint::kResponses     ? "resp_"
                                                       : "cmpl-",
          id_prefix_,
          "-", gen->handle->id());
      gen->meta.created = absl::ToUnixSeconds(absl::Now());
      gen->meta.tools = parsed->tools;
      gen->meta.model = parsed->generate.model_id();
      if (gen->meta.model.empty()) {
        for (const v1::ModelInfo& m : supervisor_->ListModels()) gen->meta.model = m.model_id();
      }
      // The status line waits for the first event: see the header.
      if (!gen->Next(&gen->first)) return SendError(res, absl::CancelledError("client left"));
      if (gen->first.type != Event::Type::kChunk && gen->first.type != Event::Type::kDone) {
        return gen->Fail(res, gen->first);
      }
      if (!parsed->stream) return gen->Answer(res);
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [gen](size_t, httplib::DataSink& sink) { return gen->Stream(sink); },
          // Runs however the response ends, also when it never started.
          [gen](bool) { gen->Abandon(); });
    };
  };
  server_->Post("/v1/embeddings", [](const Request&, Response& res) {
    SendError(res, absl::NotFoundError("/v1/embeddings is not served: Sluice serves text "
                                       "generation only (docs/API.md)"),
              "unknown_url");
  });
  server_->Post("/v1/chat/completions", generate(OpenAiEndpoint::kChatCompletions));
  server_->Post("/v1/completions", generate(OpenAiEndpoint::kCompletions));
  server_->Post("/v1/responses", generate(OpenAiEndpoint::kResponses));
}

}  // namespace sluice::daemon
