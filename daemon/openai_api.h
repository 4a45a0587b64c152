// The OpenAI-compatible HTTP API's JSON, apart from any network code:
// request bodies of POST /v1/chat/completions and /v1/completions become a
// sluice.v1.GenerateRequest, and the worker's chunks and final message become
// OpenAI-shaped responses, stream chunks and errors. docs/API.md lists the
// fields and how they map onto the gRPC API.
//
// Parsing follows OpenAI's rules where Sluice can honour them: a known field
// of the wrong type is InvalidArgument naming the field, and a field Sluice
// does not know, or a feature it lacks (n > 1, logprobs, echo, a non-zero
// presence_penalty, tools), is refused the same way rather than silently
// dropped. response_format json_object / json_schema becomes
// GenerateRequest.format (constrained decoding).
//
// Thread-safety: free functions and value types only.
#ifndef SLUICE_DAEMON_OPENAI_API_H_
#define SLUICE_DAEMON_OPENAI_API_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/sluice/v1/sluice.pb.h"

namespace sluice::daemon {

enum class OpenAiEndpoint { kChatCompletions, kCompletions, kResponses };

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kChatCompletions;
  v1::GenerateRequest generate;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool tools = false;          // the answer may hold tool calls (openai_api_tools.h)
};

// Parses a request body. Errors are InvalidArgument naming the field (also
// attached as the payload read by ErrorParam, OpenAI's `param`).
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint,
                                                 absl::string_view body);


// The HTTP status for a status code: 400 bad input, 401/403 keys, 404 unknown
// model, 429 queue full, 503 no worker or shutting down, 504 deadline; 500
// only for faults of the server itself (Internal, Unknown, DataLoss).
int HttpStatusFor(absl::StatusCode code);

// The OpenAI field a parse error is about, or "" (JSON null).
std::string ErrorParam(const absl::Status& status);

// {"error": {"message", "type", "param", "code"}}. `type` follows the HTTP
// status (invalid_request_error, authentication_error, permission_error,
// rate_limit_error, service_unavailable_error, server_error); `code` is
// model_not_found, invalid_api_key or the status code's snake-case name,
// unless `code` is given.
std::string ErrorJson(const absl::Status& status, absl::string_view code = "");

// The fields shared by every object of one response.
struct ResponseMeta {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kChatCompletions;
  std::string id;       // chatcmpl-... / cmpl-...
  int64_t created = 0;  // Unix seconds
  std::string model;    // the served model id
  bool tools = false;   // OpenAiRequest::tools: parse tool calls out of the text
};

// "stop" for STOP and EOS, "length" for LENGTH (max_tokens or the context).
absl::string_view FinishReasonName(v1::FinishReason reason);

// What the final chunk (and the non-streamed object) carry beyond OpenAI's
// fields, under "sluice": the request's timings and, when present, its
// expert slot-cache counters with hit_rate. ExtensionOf copies them from
// GenerateDone.experts, which the worker sets only where experts stream
// through a slot cache (never on the CPU worker).
struct SluiceExtension {
  v1::Timings timings;
  std::optional<v1::SlotCacheStats> slot_cache;
};
SluiceExtension ExtensionOf(const v1::GenerateDone& done);

// One `data:` payload of a stream (without the "data: " framing).
// The first chat chunk carries delta.role = "assistant".
std::string RoleChunkJson(const ResponseMeta& meta, bool include_usage);
std::string TextChunkJson(const ResponseMeta& meta, absl::string_view text,
                          bool include_usage);
// A delta with the whole of each call (index, id, type, name, arguments).
std::string ToolCallsChunkJson(const ResponseMeta& meta, const std::vector<v1::ToolCall>& calls,
                               bool include_usage);
// The chunk with finish_reason ("tool_calls" when `tool_calls`) and the
// "sluice" extension.
std::string FinalChunkJson(const ResponseMeta& meta, const v1::GenerateDone& done,
                           const SluiceExtension& extension, bool include_usage,
                           bool tool_calls = false);
// The usage-only chunk (choices: []) sent last when include_usage is set.
std::string UsageChunkJson(const ResponseMeta& meta, const v1::GenerateDone& done);

// The non-streamed answer: chat.completion or text_completion; with
// meta.tools, calls in the text become message.tool_calls and finish_reason
// "tool_calls".
std::string CompletionJson(const ResponseMeta& meta, absl::string_view text,
                           const v1::GenerateDone& done, const SluiceExtension& extension);

// GET /v1/models and GET /v1/models/{id}.
std::string ModelJson(const v1::ModelInfo& model);
std::string ModelListJson(const std::vector<v1::ModelInfo>& models);

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_OPENAI_API_H_
