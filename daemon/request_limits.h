// Limits on every field of a Generate or Tokenize request, checked by the
// supervisor before a request is queued.
//
// Why: requests used to be checked only by the worker, after waiting in the
// queue (a bad temperature waited behind a running generation), and errors
// quoted unbounded client input (a 1 MB model_id turned NOT_FOUND into
// RESOURCE_EXHAUSTED). Here every field is bounded and every message quotes
// at most a short prefix of what the client sent. The sampling checks repeat
// the worker's (model/sampler.h) with the same messages, so a request gets
// the same answer from either.
#ifndef SLUICE_DAEMON_REQUEST_LIMITS_H_
#define SLUICE_DAEMON_REQUEST_LIMITS_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "proto/sluice/v1/sluice.pb.h"

namespace sluice::daemon {

struct RequestLimits {
  size_t max_text_bytes = 1 << 20;   // a prompt, a Tokenize text, all chat contents
  size_t max_token_ids = 1 << 20;    // GenerateRequest.token_ids (and < context)
  size_t max_chat_messages = 1024;
  size_t max_stop_strings = 16;
  size_t max_stop_bytes = 256;       // each stop string
  size_t max_model_id_bytes = 256;
  size_t max_role_bytes = 32;
  uint32_t max_top_k = 1u << 30;
  uint32_t max_repetition_window = 1u << 20;
};

// InvalidArgument naming the field (and, for chat/stop/token ids, the index).
absl::Status CheckGenerateRequest(const v1::GenerateRequest& request,
                                  const RequestLimits& limits = {});
absl::Status CheckTokenizeRequest(const v1::TokenizeRequest& request,
                                  const RequestLimits& limits = {});

// At most `max_bytes` of `text` for a message, "... (N bytes)" marking a cut,
// with non-printable bytes escaped.
std::string QuoteForMessage(std::string_view text, size_t max_bytes = 64);

// A request id (x-request-id, GenerateRequest.request_id): the client's own when it is 1 to 128
// characters of [A-Za-z0-9._:-], else "" (the server makes one).
std::string SaneRequestId(absl::string_view client_id);

// What the loader or a worker found in a model file, as an API client may
// see it: the field and the rule, not what the file holds. A leading
// "PATH: " is kept; quoted strings are withheld unless they are a
// well-known key or tensor name (general.*, tokenizer.*, split.*, blk.*,
// ...); numbers are written N (counts and offsets come from the file's
// bytes). The daemon logs the full finding.
// `numbers`: false for a worker's start error, whose numbers are its own.
std::string WithoutFileContent(std::string_view finding, bool numbers = true);


}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_REQUEST_LIMITS_H_
