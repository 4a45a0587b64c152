// The Responses API subset (POST /v1/responses, issue 21) that the official
// client's responses.create, the Vercel AI SDK's openai('m') and
// LangChain's useResponsesApi send: input as a string or items (messages,
// function_call, function_call_output), instructions, max_output_tokens,
// temperature, top_p, text.format (text, json_object, json_schema), function
// tools with tool_choice and parallel_tool_calls, stream.
//
// A request is translated into the chat-completions request it means and
// parsed by ParseOpenAiRequest, so both endpoints share one set of rules
// (and refuse the same things); what only the Responses API has (other
// tool types, previous_response_id, reasoning, include, background) is
// refused here, naming the field.
//
// Thread-safety: free functions; a ResponsesStream belongs to one response.
#ifndef SLUICE_DAEMON_OPENAI_API_RESPONSES_H_
#define SLUICE_DAEMON_OPENAI_API_RESPONSES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/openai_api.h"
#include "daemon/openai_api_tools.h"

namespace sluice::daemon {

absl::StatusOr<OpenAiRequest> ParseResponsesRequest(absl::string_view body);

// The response object ("object": "response"): output items (a message with
// output_text, function_call items), status "completed" or "incomplete"
// (max_output_tokens), usage.
std::string ResponseObjectJson(const ResponseMeta& meta, absl::string_view text,
                               const v1::GenerateDone& done);

// The stream's events, each "event: TYPE\ndata: {...}\n\n" with a
// sequence_number: response.created and .in_progress, then for text
// output_item.added, content_part.added, output_text.delta..., and at the
// end the .done events, function_call items (arguments in one delta) and
// response.completed / response.incomplete with the whole object.
class ResponsesStream {
 public:
  explicit ResponsesStream(ResponseMeta meta) : meta_(std::move(meta)), calls_(meta_.id) {}
  std::string Start();
  std::string Text(absl::string_view text);
  std::string Finish(const v1::GenerateDone& done);

 private:
  std::string Event(const char* type, nlohmann::ordered_json data);
  std::string OpenMessage();
  std::string Delta(const std::string& text);
  ResponseMeta meta_;
  ToolCallStream calls_;
  std::string text_;
  bool message_open_ = false;
  int sequence_ = 0;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_OPENAI_API_RESPONSES_H_
