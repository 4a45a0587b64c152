#include "daemon/openai_api_tools.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "absl/strings/str_cat.h"

namespace sluice::daemon {
namespace {

using Json = nlohmann::ordered_json;
constexpr char kOpen[] = "<tool_call>";
constexpr char kClose[] = "</tool_call>";

absl::Status Invalid(const std::string& param, absl::string_view message) {
  absl::Status s = absl::InvalidArgumentError(absl::StrCat(param, ": ", message));
  s.SetPayload("type.sluice.dev/openai-param", absl::Cord(param));
  return s;
}

bool SaneName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

const Json* Field(const Json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

absl::Status OnlyKeys(const Json& j, const std::string& param,
                      std::initializer_list<const char*> keys) {
  for (const auto& [k, v] : j.items()) {
    bool known = false;
    for (const char* key : keys) known = known || k == key;
    if (!known && !v.is_null()) return Invalid(absl::StrCat(param, ".", k), "is not supported");
  }
  return absl::OkStatus();
}

absl::Status ParseTool(const Json& t, const std::string& p, v1::Tool* out) {
  if (!t.is_object()) return Invalid(p, "expected an object");
  RETURN_IF_ERROR(OnlyKeys(t, p, {"type", "function"}));
  const Json* type = Field(t, "type");
  if (type == nullptr || *type != "function") return Invalid(p + ".type", "must be \"function\"");
  const Json* fn = Field(t, "function");
  if (fn == nullptr || !fn->is_object()) return Invalid(p + ".function", "expected an object");
  RETURN_IF_ERROR(
      OnlyKeys(*fn, p + ".function", {"name", "description", "parameters", "strict"}));
  const Json* name = Field(*fn, "name");
  if (name == nullptr || !name->is_string() || !SaneName(name->get<std::string>())) {
    return Invalid(p + ".function.name", "must be 1 to 64 characters of [A-Za-z0-9_-]");
  }
  out->set_name(name->get<std::string>());
  if (const Json* d = Field(*fn, "description"); d != nullptr) {
    if (!d->is_string()) return Invalid(p + ".function.description", "expected a string");
    out->set_description(d->get<std::string>());
  }
  if (const Json* params = Field(*fn, "parameters"); params != nullptr) {
    if (!params->is_object()) return Invalid(p + ".function.parameters", "expected an object");
    out->set_parameters(params->dump());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseTools(const Json& body, v1::GenerateRequest* out, bool* active) {
  *active = false;
  const Json* tools = Field(body, "tools");
  const bool any = tools != nullptr && tools->is_array() && !tools->empty();
  if (tools != nullptr && !tools->is_array()) return Invalid("tools", "expected an array");
  v1::ChatInput* chat = out->mutable_chat();
  if (any) {
    for (size_t i = 0; i < tools->size(); ++i) {
      RETURN_IF_ERROR(ParseTool((*tools)[i], absl::StrCat("tools[", i, "]"), chat->add_tools()));
    }
  }
  v1::ToolChoice* choice = out->mutable_tool_choice();
  if (const Json* parallel = Field(body, "parallel_tool_calls"); parallel != nullptr) {
    if (!parallel->is_boolean()) return Invalid("parallel_tool_calls", "expected a boolean");
    choice->set_parallel_tool_calls(parallel->get<bool>());
  }
  const Json* tc = Field(body, "tool_choice");
  if (tc == nullptr || *tc == "auto") {
    choice->set_mode(v1::ToolChoice::TOOL_CHOICE_AUTO);
  } else if (*tc == "none") {
    choice->set_mode(v1::ToolChoice::TOOL_CHOICE_NONE);
  } else if (*tc == "required") {
    choice->set_mode(v1::ToolChoice::TOOL_CHOICE_REQUIRED);
  } else if (tc->is_object()) {
    const Json* fn = Field(*tc, "function");
    const Json* name = fn != nullptr && fn->is_object() ? Field(*fn, "name") : nullptr;
    if (Field(*tc, "type") == nullptr || *Field(*tc, "type") != "function" || name == nullptr ||
        !name->is_string()) {
      return Invalid("tool_choice", "expected {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    choice->set_mode(v1::ToolChoice::TOOL_CHOICE_FUNCTION);
    choice->set_function(name->get<std::string>());
    bool found = false;
    for (const v1::Tool& t : chat->tools()) found = found || t.name() == choice->function();
    if (!found) return Invalid("tool_choice.function.name", "names no tool in `tools`");
  } else {
    return Invalid("tool_choice", "must be \"auto\", \"none\", \"required\" or a named function");
  }
  if (!any && (choice->mode() == v1::ToolChoice::TOOL_CHOICE_REQUIRED ||
               choice->mode() == v1::ToolChoice::TOOL_CHOICE_FUNCTION)) {
    return Invalid("tool_choice", "needs `tools`");
  }
  *active = any && choice->mode() != v1::ToolChoice::TOOL_CHOICE_NONE;
  return absl::OkStatus();
}

absl::Status ParseMessageTools(const Json& m, const std::string& param, v1::ChatMessage* out) {
  if (const Json* id = Field(m, "tool_call_id"); id != nullptr) {
    if (!id->is_string()) return Invalid(param + ".tool_call_id", "expected a string");
    out->set_tool_call_id(id->get<std::string>());
  }
  const Json* calls = Field(m, "tool_calls");
  if (calls == nullptr) return absl::OkStatus();
  if (!calls->is_array()) return Invalid(param + ".tool_calls", "expected an array");
  for (size_t i = 0; i < calls->size(); ++i) {
    const std::string p = absl::StrCat(param, ".tool_calls[", i, "]");
    const Json& c = (*calls)[i];
    if (!c.is_object()) return Invalid(p, "expected an object");
    RETURN_IF_ERROR(OnlyKeys(c, p, {"id", "type", "function", "index"}));
    const Json* fn = Field(c, "function");
    if (fn == nullptr || !fn->is_object()) return Invalid(p + ".function", "expected an object");
    const Json* name = Field(*fn, "name");
    const Json* args = Field(*fn, "arguments");
    if (name == nullptr || !name->is_string()) return Invalid(p + ".function.name", "expected a string");
    v1::ToolCall* call = out->add_tool_calls();
    call->set_name(name->get<std::string>());
    if (const Json* id = Field(c, "id"); id != nullptr && id->is_string()) call->set_id(id->get<std::string>());
    if (args != nullptr) {
      if (!args->is_string()) return Invalid(p + ".function.arguments", "expected a string of JSON");
      call->set_arguments(args->get<std::string>());
    }
  }
  return absl::OkStatus();
}

ToolCallSplit SplitToolCalls(absl::string_view text, absl::string_view id_prefix) {
  ToolCallSplit out;
  const size_t first = text.find(kOpen);
  if (first == absl::string_view::npos) {
    out.content = std::string(text);
    return out;
  }
  absl::string_view rest = text.substr(first);
  std::vector<v1::ToolCall> calls;
  while (!(rest = absl::StripLeadingAsciiWhitespace(rest)).empty()) {
    const size_t close = rest.find(kClose);
    if (!absl::ConsumePrefix(&rest, kOpen) || close == absl::string_view::npos) break;
    const absl::string_view inner = rest.substr(0, close - (sizeof(kOpen) - 1));
    rest.remove_prefix(inner.size() + sizeof(kClose) - 1);
    const Json call = Json::parse(inner.begin(), inner.end(), nullptr, /*allow_exceptions=*/false);
    const Json* name = call.is_object() ? Field(call, "name") : nullptr;
    const Json* args = call.is_object() ? Field(call, "arguments") : nullptr;
    if (name == nullptr || !name->is_string() || (args != nullptr && !args->is_object())) break;
    v1::ToolCall& c = calls.emplace_back();
    c.set_id(absl::StrCat("call_", id_prefix, "_", calls.size() - 1));
    c.set_name(name->get<std::string>());
    c.set_arguments(args == nullptr ? "{}" : args->dump());
  }
  if (!rest.empty() || calls.empty()) {  // not all calls: the text as it is
    out.content = std::string(text);
    return out;
  }
  out.content = std::string(absl::StripTrailingAsciiWhitespace(text.substr(0, first)));
  out.calls = std::move(calls);
  return out;
}

Json ToolCallsJson(const std::vector<v1::ToolCall>& calls, bool delta) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json c;
    if (delta) c["index"] = i;
    c["id"] = calls[i].id();
    c["type"] = "function";
    c["function"] = {{"name", calls[i].name()}, {"arguments", calls[i].arguments()}};
    out.push_back(std::move(c));
  }
  return out;
}

std::string ToolCallStream::Push(absl::string_view text) {
  pending_.append(text.data(), text.size());
  if (in_calls_) return "";
  const size_t at = pending_.find(kOpen);
  if (at != std::string::npos) {
    in_calls_ = true;
    std::string out = pending_.substr(0, at);
    pending_.erase(0, at);
    return out;
  }
  // Hold back a suffix that could begin the marker.
  size_t keep = 0;
  const absl::string_view open = kOpen;
  for (size_t len = std::min(pending_.size(), open.size() - 1); len > 0; --len) {
    if (absl::string_view(pending_).substr(pending_.size() - len) == open.substr(0, len)) {
      keep = len;
      break;
    }
  }
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

ToolCallSplit ToolCallStream::Finish() {
  ToolCallSplit split = SplitToolCalls(pending_, id_prefix_);
  pending_.clear();
  return split;
}

}  // namespace sluice::daemon
