// Tool calls in the OpenAI-compatible API (issue 21): `tools`,
// `tool_choice`, `parallel_tool_calls` and the messages that carry calls
// and results become GenerateRequest fields; the calls a model writes
// (Hermes-style "<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>",
// what the worker renders and forces, worker/tool_calls.h) become
// `tool_calls`, whole or as stream deltas.
//
// tool_choice "auto" lets the model write text, calls or both; "required"
// and a named function are forced by the grammar; "none" renders no tools.
//
// Thread-safety: free functions; a ToolCallStream belongs to one response.
#ifndef SLUICE_DAEMON_OPENAI_API_TOOLS_H_
#define SLUICE_DAEMON_OPENAI_API_TOOLS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "proto/sluice/v1/sluice.pb.h"

namespace sluice::daemon {

// tools / tool_choice / parallel_tool_calls of a chat request. *active: the
// answer may hold calls (tools given, choice not "none"). InvalidArgument
// naming the field, e.g. "tools[0].type".
absl::Status ParseTools(const nlohmann::ordered_json& body, v1::GenerateRequest* out,
                        bool* active);

// An assistant message's tool_calls, a tool message's tool_call_id.
absl::Status ParseMessageTools(const nlohmann::ordered_json& message, const std::string& param,
                               v1::ChatMessage* out);

// Generated text as content and calls: the calls only when every block
// after the first "<tool_call>" parses (else all of it is content).
struct ToolCallSplit {
  std::string content;
  std::vector<v1::ToolCall> calls;
};
ToolCallSplit SplitToolCalls(absl::string_view text, absl::string_view id_prefix);

// [{"id", "type": "function", "function": {"name", "arguments"}}], with
// "index" for stream deltas.
nlohmann::ordered_json ToolCallsJson(const std::vector<v1::ToolCall>& calls, bool delta);

// A stream's text with the calls held back: Push() returns the content that
// can be sent now (text that might begin "<tool_call>" waits), Finish() what
// was held and the calls.
class ToolCallStream {
 public:
  explicit ToolCallStream(std::string id_prefix) : id_prefix_(std::move(id_prefix)) {}
  std::string Push(absl::string_view text);
  ToolCallSplit Finish();

 private:
  std::string id_prefix_;
  std::string pending_;
  bool in_calls_ = false;
};

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_OPENAI_API_TOOLS_H_
