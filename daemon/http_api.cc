#include "daemon/http_api.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <httplib.h>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/openai_api.h"

namespace sluice::daemon {
namespace {

using Event = RequestHandle::Event;

// How often a waiting handler looks at its client's socket (the same
// period as the gRPC handler's cancellation poll).
constexpr absl::Duration kClientPoll = absl::Milliseconds(5);
constexpr size_t kMaxBodyBytes = 64 << 20;

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

std::string NumericHost(const sockaddr_storage& addr, socklen_t len, int* port) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), serv,
                  sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "";
  }
  *port = atoi(serv);
  return host;
}

// The descriptor of the connection `req` arrived on. cpp-httplib 0.11 does
// not hand it to handlers, so it is found by its address pair among our
// sockets; the connection's thread is running this handler, so the
// descriptor stays open meanwhile. -1 when not found (then only a failed
// write notices a departed client).
int ConnectionFd(const httplib::Request& req) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    int fd = -1;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(dir)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
      continue;
    }
    int local_port = -1, peer_port = -1;
    NumericHost(local, local_len, &local_port);
    const std::string peer_host = NumericHost(peer, peer_len, &peer_port);
    if (local_port == req.local_port && peer_port == req.remote_port &&
        peer_host == req.remote_addr) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return found;
}

// True once the client has closed or reset its end. HTTP clients do not
// half-close while waiting for an answer, so a hang-up means it left.
bool ClientGone(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

absl::StatusOr<std::pair<std::string, int>> SplitAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_address='", address, "': expected HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host, port);
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
  int fd = -1;
  bool finished = false;
  Event first;

  // The next event; false (after cancelling) when the client left first.
  bool Next(Event* event) {
    while (!handle->Next(event, kClientPoll)) {
      if (ClientGone(fd)) return Abandon();
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
        res.set_content(CompletionJson(meta, text, e.done, ExtensionOf(e.done)),
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

  // The content provider of a stream: every event until the end, in one call.
  bool Stream(httplib::DataSink& sink) {
    auto send = [&sink](const std::string& payload) {
      const std::string event = absl::StrCat("data: ", payload, "\n\n");
      return sink.write(event.data(), event.size());
    };
    if (meta.endpoint == OpenAiEndpoint::kChatCompletions &&
        !send(RoleChunkJson(meta, include_usage))) {
      return Abandon();
    }
    Event e = std::move(first);
    while (true) {
      if (e.type == Event::Type::kChunk) {
        // A chunk may hold a token without text (part of a UTF-8 character).
        if (!e.chunk.text().empty() && !send(TextChunkJson(meta, e.chunk.text(), include_usage))) {
          return Abandon();
        }
      } else if (e.type == Event::Type::kDone) {
        finished = true;
        bool ok = send(FinalChunkJson(meta, e.done, ExtensionOf(e.done), include_usage));
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
  auto address = SplitAddress(options.address);
  if (!address.ok()) return address.status();
  std::unique_ptr<HttpApiServer> s(new HttpApiServer(std::move(options), supervisor, metrics));
  const HttpApiOptions& o = s->options_;
  if (!o.tls_cert_file.empty()) {
    auto tls = std::make_unique<httplib::SSLServer>(
        o.tls_cert_file.c_str(), o.tls_key_file.c_str(),
        o.tls_client_ca_file.empty() ? nullptr : o.tls_client_ca_file.c_str());
    if (!tls->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--http_address='", o.address, "': cannot set up TLS with --tls_cert_file='",
          o.tls_cert_file, "', --tls_key_file='", o.tls_key_file, "'",
          o.tls_client_ca_file.empty() ? "" : ", --tls_client_ca_file='" + o.tls_client_ca_file + "'"));
    }
    s->server_ = std::move(tls);
  } else {
    s->server_ = std::make_unique<httplib::Server>();
  }
  const int threads = std::max(1, o.threads);
  s->server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s->server_->set_payload_max_length(kMaxBodyBytes);
  s->Route();
  const auto& [host, port] = *address;
  s->port_ = port == 0 ? s->server_->bind_to_any_port(host)
                       : (s->server_->bind_to_port(host, port) ? port : -1);
  if (s->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("--http_address='", o.address, "': cannot listen there"));
  }
  httplib::Server* raw = s->server_.get();
  s->thread_ = std::thread([raw] { raw->listen_after_bind(); });
  return s;
}

void HttpApiServer::Stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

void HttpApiServer::Route() {
  using httplib::Request;
  using httplib::Response;
  using HandlerResponse = httplib::Server::HandlerResponse;
  server_->set_pre_routing_handler([this](const Request& req, Response& res) {
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
    SendError(res, absl::NotFoundError(
                       absl::StrCat("model '", req.matches[1].str(), "' is not loaded")));
  });
  auto generate = [this](OpenAiEndpoint endpoint) {
    return [this, endpoint](const Request& req, Response& res) {
      auto parsed = ParseOpenAiRequest(endpoint, req.body);
      if (!parsed.ok()) return SendError(res, parsed.status());
      auto handle = supervisor_->SubmitGenerate(parsed->generate);
      if (!handle.ok()) return SendError(res, handle.status());
      auto gen = std::make_shared<Generation>();
      gen->supervisor = supervisor_;
      gen->metrics = metrics_;
      gen->handle = *std::move(handle);
      gen->include_usage = parsed->include_usage;
      gen->fd = ConnectionFd(req);
      gen->meta.endpoint = endpoint;
      gen->meta.id = absl::StrCat(
          endpoint == OpenAiEndpoint::kChatCompletions ? "chatcmpl-" : "cmpl-", id_prefix_,
          "-", gen->handle->id());
      gen->meta.created = absl::ToUnixSeconds(absl::Now());
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
  server_->Post("/v1/chat/completions", generate(OpenAiEndpoint::kChatCompletions));
  server_->Post("/v1/completions", generate(OpenAiEndpoint::kCompletions));
}

}  // namespace sluice::daemon
