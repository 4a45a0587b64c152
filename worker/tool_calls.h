// Tool calls on the worker side (issue 21): tool definitions, assistant
// calls and tool results rendered into ChatML turns the way the Qwen3 /
// Qwen3.5 chat templates do (Hermes-style markup), and the grammar that
// forces calls for tool_choice "required" or a named function.
//
//   system turn:  <system text>\n\n# Tools\n...<tools>\n{"type": "function",
//                 "function": {...}}\n</tools>\n...
//   assistant:    <text>\n<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   tool results: one user turn, each "<tool_response>\n...\n</tool_response>"
//
// Thread-safety: free functions.
#ifndef SLUICE_WORKER_TOOL_CALLS_H_
#define SLUICE_WORKER_TOOL_CALLS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/chat_template.h"
#include "proto/sluice/v1/sluice.pb.h"

namespace sluice::worker {

// The ChatML messages of `chat` with tools, calls and results rendered
// (tools only when `render_tools`). InvalidArgument naming the message for a
// role other than system, user, assistant, tool, or a call whose arguments
// are not a JSON object.
absl::StatusOr<std::vector<ChatMessage>> RenderChat(const sluice::v1::ChatInput& chat,
                                                    bool render_tools);

// The grammar text that forces tool calls (REQUIRED: any of the tools;
// FUNCTION: the named one), or "" for AUTO and NONE. InvalidArgument naming
// the tool whose parameters do not compile, or an unknown function.
absl::StatusOr<std::string> ToolCallGrammar(const sluice::v1::ChatInput& chat,
                                            const sluice::v1::ToolChoice& choice);

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_TOOL_CALLS_H_
