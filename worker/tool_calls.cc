#include "worker/tool_calls.h"

#include "absl/strings/str_cat.h"
#include "model/grammar_json.h"
#include "nlohmann/json.hpp"

namespace sluice::worker {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kToolsIntro[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr char kToolsOutro[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

// json.dumps' separators, as the template's tojson writes them.
std::string Dumps(const Json& v) {
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      absl::StrAppend(&out, first ? "" : ", ", Json(k).dump(), ": ", Dumps(x));
      first = false;
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) absl::StrAppend(&out, i ? ", " : "", Dumps(v[i]));
    return out + "]";
  }
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

absl::StatusOr<Json> ParseObject(const std::string& text, const std::string& what) {
  if (text.empty()) return Json::object();
  Json v = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded() || !v.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a JSON object"));
  }
  return v;
}

absl::StatusOr<std::string> ToolsBlock(const sluice::v1::ChatInput& chat) {
  std::string out = kToolsIntro;
  for (int i = 0; i < chat.tools_size(); ++i) {
    const sluice::v1::Tool& t = chat.tools(i);
    absl::StatusOr<Json> params =
        ParseObject(t.parameters(), absl::StrCat("GenerateRequest.chat.tools[", i, "].parameters"));
    if (!params.ok()) return params.status();
    Json fn = {{"name", t.name()}};
    if (!t.description().empty()) fn["description"] = t.description();
    fn["parameters"] = *params;
    absl::StrAppend(&out, "\n", Dumps(Json{{"type", "function"}, {"function", fn}}));
  }
  return out + kToolsOutro;
}

}  // namespace

absl::StatusOr<std::vector<ChatMessage>> RenderChat(const sluice::v1::ChatInput& chat,
                                                    bool render_tools) {
  std::vector<ChatMessage> out;
  const bool tools = render_tools && chat.tools_size() > 0;
  if (tools) {
    absl::StatusOr<std::string> block = ToolsBlock(chat);
    if (!block.ok()) return block.status();
    if (chat.messages_size() > 0 && chat.messages(0).role() == "system") {
      out.push_back({"system", absl::StrCat(chat.messages(0).content(), "\n\n", *block)});
    } else {
      out.push_back({"system", *block});
    }
  }
  for (int i = tools && !out.empty() && chat.messages_size() > 0 &&
                       chat.messages(0).role() == "system"
                   ? 1
                   : 0;
       i < chat.messages_size(); ++i) {
    const sluice::v1::ChatMessage& m = chat.messages(i);
    if (m.role() == "tool") {
      // Consecutive results share one user turn.
      const std::string part = absl::StrCat("<tool_response>\n", m.content(), "\n</tool_response>");
      const bool joins = i > 0 && chat.messages(i - 1).role() == "tool";
      if (joins) {
        absl::StrAppend(&out.back().content, "\n", part);
      } else {
        out.push_back({"user", part});
      }
      continue;
    }
    std::string content = m.content();
    for (int c = 0; c < m.tool_calls_size(); ++c) {
      const sluice::v1::ToolCall& call = m.tool_calls(c);
      absl::StatusOr<Json> args = ParseObject(
          call.arguments(), absl::StrCat("GenerateRequest.chat.messages[", i, "].tool_calls[", c,
                                         "].arguments"));
      if (!args.ok()) return args.status();
      if (!content.empty()) content += "\n";
      absl::StrAppend(&content, "<tool_call>\n{\"name\": ", Json(call.name()).dump(),
                      ", \"arguments\": ", Dumps(*args), "}\n</tool_call>");
    }
    out.push_back({m.role(), std::move(content)});
  }
  return out;
}

absl::StatusOr<std::string> ToolCallGrammar(const sluice::v1::ChatInput& chat,
                                            const sluice::v1::ToolChoice& choice) {
  using Mode = sluice::v1::ToolChoice;
  if (choice.mode() != Mode::TOOL_CHOICE_REQUIRED && choice.mode() != Mode::TOOL_CHOICE_FUNCTION) {
    return std::string();
  }
  JsonSchemaCompiler c;
  std::string calls;
  for (int i = 0; i < chat.tools_size(); ++i) {
    const sluice::v1::Tool& t = chat.tools(i);
    if (choice.mode() == Mode::TOOL_CHOICE_FUNCTION && t.name() != choice.function()) continue;
    const std::string what = absl::StrCat("GenerateRequest.chat.tools[", i, "].parameters");
    absl::StatusOr<std::string> args =
        c.Add(t.parameters().empty() ? std::string(R"({"type": "object"})") : t.parameters(),
              absl::StrCat("args-", t.name()), what);
    if (!args.ok()) return args.status();
    const std::string head = absl::StrCat("<tool_call>\n{\"name\": ", Json(t.name()).dump(),
                                          ", \"arguments\": ");
    absl::StrAppend(&calls, calls.empty() ? "" : " | ", GrammarLiteral(head), " ", *args, " ",
                    GrammarLiteral("}\n</tool_call>"));
  }
  if (calls.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        choice.mode() == Mode::TOOL_CHOICE_FUNCTION
            ? absl::StrCat("GenerateRequest.tool_choice.function: no tool is named '",
                           choice.function().substr(0, 64), "'")
            : "GenerateRequest.tool_choice: REQUIRED needs at least one tool"));
  }
  c.AddRule("tool-call", calls);
  const bool parallel = !choice.has_parallel_tool_calls() || choice.parallel_tool_calls();
  c.AddRule("root", parallel ? R"(tool-call ( "\n" tool-call )*)" : "tool-call");
  return c.Grammar();
}

}  // namespace sluice::worker
