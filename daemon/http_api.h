// The OpenAI-compatible HTTP API of sluiced (cpp-httplib), beside gRPC:
//
//   POST /v1/chat/completions   messages through the model's chat template
//   POST /v1/completions        a raw prompt
//   POST /v1/responses          the Responses API subset (openai_api_responses.h)
//   GET  /v1/models, /v1/models/{id}
//   GET  /health                200 while a worker is ready, else 503
//   POST /v1/embeddings         404 with a body saying it is not served
//
// Every routed response carries x-request-id: the client's X-Request-Id
// when sane (SaneRequestId), else one made here.
//
// Requests go through the same Supervisor entry points as the gRPC service
// (SubmitGenerate, Cancel, ListModels): one queue, one worker. JSON mapping
// is in openai_api.h; docs/API.md documents both APIs side by side.
//
// Status codes are chosen before the first byte of a response: a handler
// waits for the request's first event (a chunk or an error), so a bad
// parameter the worker finds, a full queue or a missing worker is a 400, 429
// or 503 even for `stream: true`. An error after streaming began ends the
// stream with a `data: {"error": ...}` event and no `[DONE]`.
//
// Connections are accepted, read and bounded by the HTTP front
// (http_front.h: deadlines, connection caps, body cap, memory budget); a
// handler runs only once its request has arrived whole.
//
// A client that disconnects is noticed while the handler waits for the next
// token (its socket is polled every 5 ms, as the gRPC handler polls its
// call; a half-close is probed, see HttpClient::Gone) or when a write fails;
// the generation is then cancelled, which stops the worker within one decode
// step.
//
// Thread-safety: handlers run on the server's thread pool; all state they
// share lives in the Supervisor and Metrics (thread-safe) or is atomic.
#ifndef SLUICE_DAEMON_HTTP_API_H_
#define SLUICE_DAEMON_HTTP_API_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/http_front.h"
#include "daemon/metrics.h"
#include "daemon/supervisor.h"

namespace sluice::daemon {

// The one authorization decision for every HTTP request but GET /health.
// `authorization` is the Authorization header's value ("" when absent);
// `admin` is true for endpoints that change the server (none yet). Return
// OK to serve, Unauthenticated (401) or PermissionDenied (403) to refuse;
// the message goes to the client in OpenAI's error shape.
using HttpAuthorizer =
    std::function<absl::Status(absl::string_view authorization, bool admin)>;

struct HttpApiOptions {
  std::string address;  // HOST:PORT; port 0 picks a free one
  // TLS with the gRPC port's PEM files: both or neither (plaintext). With a
  // client CA, clients must present a certificate it signed.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // Generation requests served at once; each streaming or waiting request
  // holds a handler thread (complete requests beyond wait for one).
  // sluiced uses queue_limit + 8. GET requests have their own few threads.
  int threads = 8;
  HttpLimits limits;
  HttpAuthorizer authorize;  // empty: every request is allowed
  // A generation's deadline from its arrival (queue wait included), which
  // travels to the worker as a gRPC client's deadline does: 504 before the
  // first token, an error event in a stream. Infinite: none.
  absl::Duration request_timeout = absl::InfiniteDuration();
};

class HttpApiServer {
 public:
  // Binds and starts serving. InvalidArgument for a bad address or TLS files,
  // Unavailable when the address cannot be bound; both name the address.
  static absl::StatusOr<std::unique_ptr<HttpApiServer>> Start(HttpApiOptions options,
                                                               Supervisor* supervisor,
                                                               Metrics* metrics);
  ~HttpApiServer();  // Stop()

  int port() const { return port_; }
  // What GET /health answers; sluiced forwards the supervisor's serving
  // callback here (as it does to the gRPC health service).
  void SetServing(bool serving) { serving_ = serving; }
  // Stops accepting and waits for the handlers; call after the supervisor
  // has failed what was in flight, so that streams end promptly.
  void Stop();

 private:
  struct Generation;
  HttpApiServer(HttpApiOptions options, Supervisor* supervisor, Metrics* metrics);
  void Route();

  const HttpApiOptions options_;
  Supervisor* const supervisor_;
  Metrics* const metrics_;
  std::unique_ptr<RoutedServer> server_;
  std::unique_ptr<HttpFront> front_;
  int port_ = 0;
  std::atomic<bool> serving_{false};
  const std::string id_prefix_;  // makes response ids unique across restarts
  std::atomic<uint64_t> next_request_id_{1};
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_HTTP_API_H_
