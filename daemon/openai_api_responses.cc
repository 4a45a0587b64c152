#include "daemon/openai_api_responses.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/bounded_json.h"

namespace sluice::daemon {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Invalid(const std::string& param, absl::string_view message) {
  absl::Status s = absl::InvalidArgumentError(absl::StrCat(param, ": ", message));
  s.SetPayload("type.sluice.dev/openai-param", absl::Cord(param));
  return s;
}

bool IsResponsesField(const std::string& name) {
  static const auto* const kFields = new absl::flat_hash_set<std::string>{
      "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream",
      "text", "tools", "tool_choice", "parallel_tool_calls", "store", "user", "metadata",
      "truncation", "service_tier", "reasoning", "include", "previous_response_id",
      "top_logprobs", "background", "seed"};
  return kFields->contains(name);
}

const Json* Field(const Json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// A message item's content: a string or input_text / output_text parts.
absl::StatusOr<std::string> ItemText(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return Invalid(param, "expected a string or an array of parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const Json* type = part.is_object() ? Field(part, "type") : nullptr;
    const Json* t = part.is_object() ? Field(part, "text") : nullptr;
    if (type == nullptr || !(*type == "input_text" || *type == "output_text") || t == nullptr ||
        !t->is_string()) {
      return Invalid(absl::StrCat(param, "[", i, "]"), "only input_text / output_text parts are supported");
    }
    text += t->get<std::string>();
  }
  return text;
}

absl::Status Messages(const Json& body, Json* messages) {
  if (const Json* instr = Field(body, "instructions"); instr != nullptr) {
    if (!instr->is_string()) return Invalid("instructions", "expected a string");
    messages->push_back({{"role", "system"}, {"content", *instr}});
  }
  const Json* input = Field(body, "input");
  if (input == nullptr) return Invalid("input", "is required");
  if (input->is_string()) {
    messages->push_back({{"role", "user"}, {"content", *input}});
    return absl::OkStatus();
  }
  if (!input->is_array()) return Invalid("input", "expected a string or an array of items");
  for (size_t i = 0; i < input->size(); ++i) {
    const Json& item = (*input)[i];
    const std::string p = absl::StrCat("input[", i, "]");
    if (!item.is_object()) return Invalid(p, "expected an object");
    const Json* type = Field(item, "type");
    const std::string t = type != nullptr && type->is_string() ? type->get<std::string>() : "message";
    if (t == "message") {
      const Json* role = Field(item, "role");
      const Json* content = Field(item, "content");
      if (role == nullptr || !role->is_string()) return Invalid(p + ".role", "expected a string");
      ASSIGN_OR_RETURN(std::string text, ItemText(content ? *content : Json(""), p + ".content"));
      messages->push_back({{"role", *role}, {"content", text}});
    } else if (t == "function_call") {
      const Json* name = Field(item, "name");
      const Json* args = Field(item, "arguments");
      if (name == nullptr || !name->is_string()) return Invalid(p + ".name", "expected a string");
      Json call = {{"id", item.value("call_id", "")},
                   {"type", "function"},
                   {"function", {{"name", *name}, {"arguments", args ? *args : Json("{}")}}}};
      // Consecutive calls are one assistant turn.
      if (!messages->empty() && messages->back()["role"] == "assistant" &&
          messages->back().contains("tool_calls")) {
        messages->back()["tool_calls"].push_back(std::move(call));
      } else {
        messages->push_back({{"role", "assistant"}, {"content", nullptr},
                             {"tool_calls", Json::array({std::move(call)})}});
      }
    } else if (t == "function_call_output") {
      const Json* output = Field(item, "output");
      if (output == nullptr || !output->is_string()) return Invalid(p + ".output", "expected a string");
      messages->push_back({{"role", "tool"}, {"tool_call_id", item.value("call_id", "")},
                           {"content", *output}});
    } else {
      return Invalid(p + ".type", absl::StrCat("'", t.substr(0, 32), "' items are not supported"));
    }
  }
  return absl::OkStatus();
}

absl::Status Tools(const Json& body, Json* chat) {
  if (const Json* tools = Field(body, "tools"); tools != nullptr) {
    if (!tools->is_array()) return Invalid("tools", "expected an array");
    Json out = Json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& t = (*tools)[i];
      const std::string p = absl::StrCat("tools[", i, "]");
      if (!t.is_object() || Field(t, "type") == nullptr || *Field(t, "type") != "function") {
        return Invalid(p + ".type", "only \"function\" tools are supported");
      }
      Json fn = Json::object();
      for (const auto& [k, v] : t.items()) {
        if (k != "type") fn[k] = v;
      }
      out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    (*chat)["tools"] = std::move(out);
  }
  if (const Json* choice = Field(body, "tool_choice"); choice != nullptr) {
    if (choice->is_object()) {
      const Json* name = Field(*choice, "name");
      if (Field(*choice, "type") == nullptr || *Field(*choice, "type") != "function" || name == nullptr) {
        return Invalid("tool_choice", "expected \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}");
      }
      (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
    } else {
      (*chat)["tool_choice"] = *choice;
    }
  }
  return absl::OkStatus();
}

absl::Status TextFormat(const Json& body, Json* chat) {
  const Json* text = Field(body, "text");
  if (text == nullptr) return absl::OkStatus();
  if (!text->is_object()) return Invalid("text", "expected an object");
  for (const auto& [k, v] : text->items()) {
    if (k != "format" && !v.is_null()) return Invalid("text." + k, "is not supported");
  }
  const Json* format = Field(*text, "format");
  if (format == nullptr) return absl::OkStatus();
  const Json* type = format->is_object() ? Field(*format, "type") : nullptr;
  if (type == nullptr || !type->is_string()) return Invalid("text.format.type", "expected a string");
  if (*type != "json_schema") {
    (*chat)["response_format"] = {{"type", *type}};
    return absl::OkStatus();
  }
  Json js = Json::object();
  for (const auto& [k, v] : format->items()) {
    if (k != "type") js[k] = v;
  }
  (*chat)["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseResponsesRequest(absl::string_view body) {
  std::string unknown;
  auto keep = [&unknown](const std::string& name) {
    if (IsResponsesField(name)) return true;
    if (unknown.empty()) unknown = name.substr(0, 64);
    return false;
  };
  ASSIGN_OR_RETURN(Json json, ParseBoundedJson(body, keep));
  if (!json.is_object()) return absl::InvalidArgumentError("the request body must be a JSON object");
  if (!unknown.empty()) return Invalid(unknown, "is not a field Sluice supports (docs/API.md lists them)");
  for (const char* name : {"previous_response_id", "reasoning"}) {
    if (Field(json, name) != nullptr) return Invalid(name, "is not supported");
  }
  if (const Json* include = Field(json, "include"); include != nullptr &&
                                                     !(include->is_array() && include->empty())) {
    return Invalid("include", "is not supported");
  }
  if (const Json* bg = Field(json, "background"); bg != nullptr && !(bg->is_boolean() && !bg->get<bool>())) {
    return Invalid("background", "is not supported");
  }
  if (const Json* t = Field(json, "truncation"); t != nullptr && *t != "disabled") {
    return Invalid("truncation", "only \"disabled\"");
  }
  Json chat = Json::object();
  Json messages = Json::array();
  RETURN_IF_ERROR(Messages(json, &messages));
  chat["messages"] = std::move(messages);
  RETURN_IF_ERROR(Tools(json, &chat));
  RETURN_IF_ERROR(TextFormat(json, &chat));
  // Same names, same meaning; responses are never stored, whatever `store` says.
  for (const char* name : {"model", "temperature", "top_p", "stream", "parallel_tool_calls", "user",
                           "metadata", "service_tier", "top_logprobs", "seed"}) {
    if (const Json* v = Field(json, name); v != nullptr) chat[name] = *v;
  }
  if (const Json* v = Field(json, "max_output_tokens"); v != nullptr) chat["max_completion_tokens"] = *v;
  ASSIGN_OR_RETURN(OpenAiRequest r,
                   ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, chat.dump()));
  r.endpoint = OpenAiEndpoint::kResponses;
  return r;
}

namespace {

Json Usage(const v1::GenerateDone& done) {
  const v1::Usage& u = done.usage();
  return {{"input_tokens", u.prompt_tokens()},
          {"input_tokens_details", {{"cached_tokens", 0}}},
          {"output_tokens", u.completion_tokens()},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens() + u.completion_tokens()}};
}

Json MessageItem(const ResponseMeta& meta, const std::string& text, const char* status) {
  return {{"type", "message"}, {"id", absl::StrCat("msg_", meta.id)}, {"status", status},
          {"role", "assistant"},
          {"content", Json::array({{{"type", "output_text"}, {"text", text},
                                    {"annotations", Json::array()}}})}};
}

Json CallItem(const v1::ToolCall& c, const char* status, bool with_arguments) {
  return {{"type", "function_call"}, {"id", absl::StrCat("fc_", c.id())}, {"call_id", c.id()},
          {"name", c.name()}, {"arguments", with_arguments ? c.arguments() : ""}, {"status", status}};
}

Json ResponseObject(const ResponseMeta& meta, const char* status, Json output,
                    const v1::GenerateDone* done) {
  const bool cut = done != nullptr && done->finish_reason() == v1::FINISH_REASON_LENGTH;
  return {{"id", meta.id},
          {"object", "response"},
          {"created_at", meta.created},
          {"status", cut ? "incomplete" : status},
          {"error", nullptr},
          {"incomplete_details", cut ? Json{{"reason", "max_output_tokens"}} : Json()},
          {"model", meta.model},
          {"output", std::move(output)},
          {"parallel_tool_calls", true},
          {"tool_choice", "auto"},
          {"tools", Json::array()},
          {"usage", done != nullptr ? Usage(*done) : Json()}};
}

Json Output(const ResponseMeta& meta, absl::string_view text) {
  Json output = Json::array();
  ToolCallSplit split = meta.tools ? SplitToolCalls(text, meta.id)
                                   : ToolCallSplit{std::string(text), {}};
  if (!split.content.empty() || split.calls.empty()) {
    output.push_back(MessageItem(meta, split.content, "completed"));
  }
  for (const v1::ToolCall& c : split.calls) output.push_back(CallItem(c, "completed", true));
  return output;
}

}  // namespace

std::string ResponseObjectJson(const ResponseMeta& meta, absl::string_view text,
                               const v1::GenerateDone& done) {
  return ResponseObject(meta, "completed", Output(meta, text), &done)
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string ResponsesStream::Event(const char* type, Json data) {
  Json j = {{"type", type}, {"sequence_number", sequence_++}};
  j.update(data);
  return absl::StrCat("event: ", type, "\ndata: ",
                      j.dump(-1, ' ', false, Json::error_handler_t::replace), "\n\n");
}

std::string ResponsesStream::Start() {
  // One statement per event: the order of StrCat's arguments is unspecified,
  // and sequence_number must follow the order sent.
  std::string out = Event("response.created",
                          {{"response", ResponseObject(meta_, "in_progress", Json::array(), nullptr)}});
  out += Event("response.in_progress",
               {{"response", ResponseObject(meta_, "in_progress", Json::array(), nullptr)}});
  return out;
}

std::string ResponsesStream::OpenMessage() {
  if (message_open_) return "";
  message_open_ = true;
  Json item = MessageItem(meta_, "", "in_progress");
  item["content"] = Json::array();
  std::string out = Event("response.output_item.added", {{"output_index", 0}, {"item", item}});
  out += Event("response.content_part.added",
               {{"item_id", absl::StrCat("msg_", meta_.id)}, {"output_index", 0}, {"content_index", 0},
                {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}}});
  return out;
}

std::string ResponsesStream::Text(absl::string_view piece) {
  const std::string text = meta_.tools ? calls_.Push(piece) : std::string(piece);
  return Delta(text);
}

std::string ResponsesStream::Delta(const std::string& text) {
  if (text.empty()) return "";
  std::string out = OpenMessage();
  text_ += text;
  absl::StrAppend(&out, Event("response.output_text.delta",
                              {{"item_id", absl::StrCat("msg_", meta_.id)}, {"output_index", 0},
                               {"content_index", 0}, {"delta", text}}));
  return out;
}

std::string ResponsesStream::Finish(const v1::GenerateDone& done) {
  ToolCallSplit split = meta_.tools ? calls_.Finish() : ToolCallSplit{};
  // Held text that held no call goes out as text.
  std::string out = split.calls.empty() ? Delta(split.content) : "";
  const std::string item_id = absl::StrCat("msg_", meta_.id);
  Json output = Json::array();
  int index = 0;
  if (message_open_ || split.calls.empty()) {
    out += OpenMessage();  // an empty answer still has its message
    Json part = {{"type", "output_text"}, {"text", text_}, {"annotations", Json::array()}};
    out += Event("response.output_text.done", {{"item_id", item_id}, {"output_index", 0},
                                               {"content_index", 0}, {"text", text_}});
    out += Event("response.content_part.done", {{"item_id", item_id}, {"output_index", 0},
                                                {"content_index", 0}, {"part", part}});
    out += Event("response.output_item.done",
                 {{"output_index", 0}, {"item", MessageItem(meta_, text_, "completed")}});
    output.push_back(MessageItem(meta_, text_, "completed"));
    index = 1;
  }
  for (const v1::ToolCall& c : split.calls) {
    const std::string id = absl::StrCat("fc_", c.id());
    out += Event("response.output_item.added",
                 {{"output_index", index}, {"item", CallItem(c, "in_progress", false)}});
    out += Event("response.function_call_arguments.delta",
                 {{"item_id", id}, {"output_index", index}, {"delta", c.arguments()}});
    out += Event("response.function_call_arguments.done",
                 {{"item_id", id}, {"output_index", index}, {"arguments", c.arguments()}});
    out += Event("response.output_item.done",
                 {{"output_index", index}, {"item", CallItem(c, "completed", true)}});
    output.push_back(CallItem(c, "completed", true));
    ++index;
  }
  Json response = ResponseObject(meta_, "completed", std::move(output), &done);
  const bool cut = response["status"] == "incomplete";
  absl::StrAppend(&out, Event(cut ? "response.incomplete" : "response.completed", {{"response", response}}));
  return out;
}

}  // namespace sluice::daemon
