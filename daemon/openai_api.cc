#include "daemon/openai_api.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/bounded_json.h"
#include "daemon/openai_api_tools.h"
#include "nlohmann/json.hpp"

namespace sluice::daemon {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kParamPayload[] = "type.sluice.dev/openai-param";

absl::Status Invalid(absl::string_view param, absl::string_view message) {
  absl::Status s = absl::InvalidArgumentError(absl::StrCat(param, ": ", message));
  s.SetPayload(kParamPayload, absl::Cord(param));
  return s;
}

std::string TypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

absl::Status WrongType(absl::string_view param, absl::string_view expected, const Json& v) {
  return Invalid(param, absl::StrCat("expected ", expected, ", got ", TypeName(v)));
}

// A field that is absent or null counts as not given, as with OpenAI.
const Json* Field(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::optional<double>> Number(const Json& body, const char* name) {
  const Json* v = Field(body, name);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return WrongType(name, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d)) return Invalid(name, "must be finite");
  return std::optional<double>(d);
}

// Integers may be written 16 or 16.0, not 16.5.
absl::StatusOr<std::optional<int64_t>> Integer(const Json& body, const char* name) {
  const Json* v = Field(body, name);
  if (v == nullptr) return std::optional<int64_t>();
  if (v->is_number_integer()) return std::optional<int64_t>(v->get<int64_t>());
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
      return std::optional<int64_t>(static_cast<int64_t>(d));
    }
  }
  return WrongType(name, "an integer", *v);
}

absl::StatusOr<std::optional<bool>> Bool(const Json& body, const char* name) {
  const Json* v = Field(body, name);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return WrongType(name, "a boolean", *v);
  return std::optional<bool>(v->get<bool>());
}

// OpenAI content: a string, or an array of parts of which only "text" parts
// are supported here; null for an assistant turn without text.
absl::StatusOr<std::string> Content(const Json& content, const std::string& param) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return WrongType(param, "a string or an array of parts", content);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string p = absl::StrCat(param, "[", i, "]");
    if (!part.is_object()) return WrongType(p, "an object", part);
    const Json* type = Field(part, "type");
    if (type == nullptr || !type->is_string() || type->get<std::string>() != "text") {
      return Invalid(absl::StrCat(p, ".type"), "only \"text\" parts are supported");
    }
    const Json* t = Field(part, "text");
    if (t == nullptr || !t->is_string()) {
      return WrongType(absl::StrCat(p, ".text"), "a string", t ? *t : Json());
    }
    text += t->get<std::string>();
  }
  return text;
}

absl::Status ParseMessages(const Json& body, v1::GenerateRequest* out) {
  const Json* messages = Field(body, "messages");
  if (messages == nullptr) return Invalid("messages", "is required");
  if (!messages->is_array()) return WrongType("messages", "an array", *messages);
  if (messages->empty()) return Invalid("messages", "must not be empty");
  v1::ChatInput* chat = out->mutable_chat();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string param = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return WrongType(param, "an object", m);
    const Json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) {
      return WrongType(param + ".role", "a string", role ? *role : Json());
    }
    const std::string r = role->get<std::string>();
    for (const auto& [key, value] : m.items()) {
      // A tool result's `name` repeats its call's; a refusal is only ever null here.
      const bool known = key == "role" || key == "content" ||
                         (key == "tool_calls" && r == "assistant") ||
                         (key == "tool_call_id" && r == "tool") || (key == "name" && r == "tool");
      if (!known && !value.is_null()) {
        return Invalid(absl::StrCat(param, ".", key), "is not supported");
      }
    }
    v1::ChatMessage* msg = chat->add_messages();
    RETURN_IF_ERROR(ParseMessageTools(m, param, msg));
    // OpenAI's newer name for the system role.
    msg->set_role(role->get<std::string>() == "developer" ? "system" : role->get<std::string>());
    auto it = m.find("content");
    ASSIGN_OR_RETURN(*msg->mutable_content(),
                     Content(it == m.end() ? Json() : *it, param + ".content"));
  }
  return absl::OkStatus();
}

bool IsTokenArray(const Json& a) {
  for (const Json& t : a) {
    if (!t.is_number_integer()) return false;
  }
  return !a.empty();
}

// A string, an array of one string, an array of token ids, or an array of
// one array of token ids (n and batching are not supported).
absl::Status ParsePrompt(const Json& body, v1::GenerateRequest* out) {
  const Json* prompt = Field(body, "prompt");
  if (prompt == nullptr) return Invalid("prompt", "is required");
  const Json* p = prompt;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    p = &(*p)[0];
  }
  if (p->is_string()) {
    out->set_prompt(p->get<std::string>());
    return absl::OkStatus();
  }
  if (p->is_array() && IsTokenArray(*p)) {
    for (const Json& t : *p) {
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
        return Invalid("prompt", absl::StrCat("token id ", id, " is out of range"));
      }
      out->mutable_token_ids()->add_ids(static_cast<int32_t>(id));
    }
    return absl::OkStatus();
  }
  return Invalid("prompt",
                 "expected a string or an array of token ids (one prompt per request)");
}

absl::Status ParseStop(const Json& body, v1::GenerateRequest* out) {
  const Json* stop = Field(body, "stop");
  if (stop == nullptr) return absl::OkStatus();
  if (stop->is_string()) {
    out->add_stop(stop->get<std::string>());
    return absl::OkStatus();
  }
  if (!stop->is_array()) return WrongType("stop", "a string or an array of strings", *stop);
  for (size_t i = 0; i < stop->size(); ++i) {
    if (!(*stop)[i].is_string()) {
      return WrongType(absl::StrCat("stop[", i, "]"), "a string", (*stop)[i]);
    }
    out->add_stop((*stop)[i].get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ParseSampling(const Json& body, v1::GenerateRequest* out) {
  v1::SamplingParams* s = out->mutable_sampling();
  ASSIGN_OR_RETURN(std::optional<double> temperature, Number(body, "temperature"));
  // OpenAI samples at temperature 1 unless told otherwise (gRPC: greedy).
  s->set_temperature(static_cast<float>(temperature.value_or(1.0)));
  ASSIGN_OR_RETURN(std::optional<double> top_p, Number(body, "top_p"));
  if (top_p) s->set_top_p(static_cast<float>(*top_p));
  ASSIGN_OR_RETURN(std::optional<double> min_p, Number(body, "min_p"));
  if (min_p) s->set_min_p(static_cast<float>(*min_p));
  ASSIGN_OR_RETURN(std::optional<double> penalty, Number(body, "repetition_penalty"));
  if (penalty) s->set_repetition_penalty(static_cast<float>(*penalty));
  ASSIGN_OR_RETURN(std::optional<int64_t> top_k, Integer(body, "top_k"));
  if (top_k) {
    if (*top_k < 0 || *top_k > std::numeric_limits<uint32_t>::max()) {
      return Invalid("top_k", absl::StrCat(*top_k, " is outside [0, 4294967295]"));
    }
    s->set_top_k(static_cast<uint32_t>(*top_k));
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> seed, Integer(body, "seed"));
  // OpenAI seeds are signed 64-bit; the bits are the seed.
  if (seed) s->set_seed(static_cast<uint64_t>(*seed));
  return absl::OkStatus();
}

absl::Status ParseLimits(OpenAiEndpoint endpoint, const Json& body, v1::GenerateRequest* out) {
  ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, Integer(body, "max_tokens"));
  ASSIGN_OR_RETURN(std::optional<int64_t> max_completion,
                   Integer(body, "max_completion_tokens"));
  const char* name = max_completion ? "max_completion_tokens" : "max_tokens";
  std::optional<int64_t> limit = max_completion ? max_completion : max_tokens;
  // OpenAI's completions endpoint defaults to 16 tokens; chat runs until the
  // model stops or the context is full.
  if (!limit && endpoint == OpenAiEndpoint::kCompletions) limit = 16;
  if (limit) {
    if (*limit < 1 || *limit > std::numeric_limits<uint32_t>::max()) {
      return Invalid(name, absl::StrCat(*limit, " is outside [1, 4294967295]"));
    }
    out->set_max_tokens(static_cast<uint32_t>(*limit));
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> n, Integer(body, "n"));
  if (n && *n != 1) return Invalid("n", "only one choice per request (n = 1) is supported");
  ASSIGN_OR_RETURN(std::optional<bool> echo, Bool(body, "echo"));
  if (echo.value_or(false)) return Invalid("echo", "is not supported");
  const Json* logprobs = Field(body, "logprobs");
  if (logprobs != nullptr && !(logprobs->is_boolean() && !logprobs->get<bool>())) {
    return Invalid("logprobs", "is not supported");
  }
  return absl::OkStatus();
}

bool IsRequestField(const std::string& name) {
  static const auto* const kFields = new absl::flat_hash_set<std::string>{
      "model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature",
      "top_p", "min_p", "repetition_penalty", "top_k", "seed", "stop", "ignore_eos", "stream",
      "stream_options", "parse_special", "n", "echo", "logprobs", "response_format",
      // Accepted only at the value that changes nothing (CheckNoOps).
      "frequency_penalty", "presence_penalty", "logit_bias", "top_logprobs", "store", "tools",
      "tool_choice", "parallel_tool_calls", "service_tier",
      // Bookkeeping for the caller, no effect on the output.
      "user", "metadata"};
  return kFields->contains(name);
}

// Fields Sluice does not implement, accepted only where their value asks
// for nothing (OpenAI's defaults); anything else is refused, never ignored.
absl::Status CheckNoOps(const Json& body) {
  for (const char* name : {"frequency_penalty", "presence_penalty"}) {
    ASSIGN_OR_RETURN(std::optional<double> v, Number(body, name));
    if (v && *v != 0) return Invalid(name, "is not supported (only 0)");
  }
  if (const Json* v = Field(body, "logit_bias"); v != nullptr && !(v->is_object() && v->empty())) {
    return Invalid("logit_bias", "is not supported");
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> top_logprobs, Integer(body, "top_logprobs"));
  if (top_logprobs && *top_logprobs != 0) return Invalid("top_logprobs", "is not supported");
  ASSIGN_OR_RETURN(std::optional<bool> store, Bool(body, "store"));
  if (store.value_or(false)) return Invalid("store", "is not supported (responses are not stored)");

  if (const Json* v = Field(body, "service_tier");
      v != nullptr && !(v->is_string() && (*v == "auto" || *v == "default"))) {
    return Invalid("service_tier", "only \"auto\" or \"default\"");
  }
  return absl::OkStatus();
}

// response_format: text, json_object, or json_schema {name, schema, strict,
// description}; both JSON kinds constrain the output with the grammar.
absl::Status ParseResponseFormat(const Json& body, v1::GenerateRequest* out) {
  const Json* rf = Field(body, "response_format");
  if (rf == nullptr) return absl::OkStatus();
  if (!rf->is_object()) return WrongType("response_format", "an object", *rf);
  const Json* type = Field(*rf, "type");
  if (type == nullptr || !type->is_string()) {
    return WrongType("response_format.type", "a string", type ? *type : Json());
  }
  for (const auto& [key, value] : rf->items()) {
    if (key != "type" && key != "json_schema") {
      return Invalid(absl::StrCat("response_format.", key), "is not supported");
    }
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return absl::OkStatus();
  if (t == "json_object") {
    out->mutable_format()->set_json_object(true);
    return absl::OkStatus();
  }
  if (t != "json_schema") {
    return Invalid("response_format.type",
                   "must be \"text\", \"json_object\" or \"json_schema\"");
  }
  const Json* js = Field(*rf, "json_schema");
  if (js == nullptr || !js->is_object()) {
    return WrongType("response_format.json_schema", "an object", js ? *js : Json());
  }
  for (const auto& [key, value] : js->items()) {
    if (key != "name" && key != "description" && key != "strict" && key != "schema") {
      return Invalid(absl::StrCat("response_format.json_schema.", key), "is not supported");
    }
  }
  // `strict` false or absent is enforced too: the schema is always the grammar.
  const Json* schema = Field(*js, "schema");
  out->mutable_format()->set_json_schema(schema == nullptr ? "{}" : schema->dump());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint,
                                                 absl::string_view body) {
  // Unknown fields are never built (see bounded_json.h), but refused: a
  // field ignored silently is the worst answer to a client that relies on it.
  OpenAiRequest r;
  std::string unknown;
  auto keep = [&unknown](const std::string& name) {
    if (IsRequestField(name)) return true;
    if (unknown.empty()) unknown = name.substr(0, 64);
    return false;
  };
  ASSIGN_OR_RETURN(Json json, ParseBoundedJson(body, keep));
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request body must be a JSON object, got ", TypeName(json)));
  }
  if (!unknown.empty()) {
    return Invalid(unknown, "is not a field Sluice supports (docs/API.md lists them)");
  }
  RETURN_IF_ERROR(CheckNoOps(json));
  RETURN_IF_ERROR(ParseResponseFormat(json, &r.generate));
  r.endpoint = endpoint;
  if (const Json* model = Field(json, "model"); model != nullptr) {
    if (!model->is_string()) return WrongType("model", "a string", *model);
    r.generate.set_model_id(model->get<std::string>());
  }
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    RETURN_IF_ERROR(ParseMessages(json, &r.generate));
    RETURN_IF_ERROR(ParseTools(json, &r.generate, &r.tools));
    if (r.tools && r.generate.has_format() &&
        r.generate.tool_choice().mode() != v1::ToolChoice::TOOL_CHOICE_AUTO) {
      return Invalid("response_format", "cannot be combined with a forced tool_choice");
    }
  } else {
    for (const char* name : {"tools", "tool_choice", "parallel_tool_calls"}) {
      if (Field(json, name) != nullptr) return Invalid(name, "is for /v1/chat/completions");
    }
    RETURN_IF_ERROR(ParsePrompt(json, &r.generate));
    ASSIGN_OR_RETURN(std::optional<bool> special, Bool(json, "parse_special"));
    r.generate.set_parse_special(special.value_or(false));
  }
  RETURN_IF_ERROR(ParseLimits(endpoint, json, &r.generate));
  RETURN_IF_ERROR(ParseSampling(json, &r.generate));
  RETURN_IF_ERROR(ParseStop(json, &r.generate));
  ASSIGN_OR_RETURN(std::optional<bool> ignore_eos, Bool(json, "ignore_eos"));
  r.generate.set_ignore_eos(ignore_eos.value_or(false));
  ASSIGN_OR_RETURN(std::optional<bool> stream, Bool(json, "stream"));
  r.stream = stream.value_or(false);
  if (const Json* options = Field(json, "stream_options"); options != nullptr) {
    if (!options->is_object()) return WrongType("stream_options", "an object", *options);
    ASSIGN_OR_RETURN(std::optional<bool> usage, Bool(*options, "include_usage"));
    r.include_usage = usage.value_or(false);
  }
  return r;
}

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists: return 409;
    case absl::StatusCode::kResourceExhausted: return 429;
    // The client went away (nginx's convention); nobody reads the answer.
    case absl::StatusCode::kCancelled: return 499;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

std::string ErrorParam(const absl::Status& status) {
  auto p = status.GetPayload(kParamPayload);
  return p ? std::string(*p) : std::string();
}

std::string ErrorJson(const absl::Status& status, absl::string_view code_override) {
  const int http = HttpStatusFor(status.code());
  std::string type = http == 401   ? "authentication_error"
                     : http == 403 ? "permission_error"
                     : http == 429 ? "rate_limit_error"
                     : http == 503 ? "service_unavailable_error"
                     : http >= 500 ? "server_error"
                                   : "invalid_request_error";
  std::string code = absl::AsciiStrToLower(absl::StatusCodeToString(status.code()));
  for (char& c : code) {
    if (c == ' ') c = '_';
  }
  if (status.code() == absl::StatusCode::kNotFound) code = "model_not_found";
  if (status.code() == absl::StatusCode::kUnauthenticated) code = "invalid_api_key";
  if (!code_override.empty()) code = std::string(code_override);
  const std::string param = ErrorParam(status);
  Json error = {{"message", std::string(status.message())},
                {"type", type},
                {"param", param.empty() ? Json() : Json(param)},
                {"code", code}};
  return Json{{"error", std::move(error)}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

absl::string_view FinishReasonName(v1::FinishReason reason) {
  return reason == v1::FINISH_REASON_LENGTH ? "length" : "stop";
}

SluiceExtension ExtensionOf(const v1::GenerateDone& done) {
  SluiceExtension e;
  e.timings = done.timings();
  if (done.has_experts()) {
    const v1::ExpertRequestStats& x = done.experts();
    v1::SlotCacheStats& s = e.slot_cache.emplace();
    s.set_hits(x.hits());
    s.set_misses(x.misses());
    s.set_evictions(x.evictions());
    s.set_forced(x.forced());
    s.set_host_computed(x.host_computed());
    s.set_skipped(x.skipped());
    s.set_bytes_host(x.bytes_host());
    s.set_bytes_disk(x.bytes_disk());
    s.set_bytes_streamed(x.bytes_host() + x.bytes_disk());
    s.set_prefetches_issued(x.prefetches_issued());
    s.set_prefetches_useful(x.prefetches_useful());
  }
  return e;
}

namespace {

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

bool IsChat(const ResponseMeta& meta) {
  return meta.endpoint == OpenAiEndpoint::kChatCompletions;
}

Json Envelope(const ResponseMeta& meta, bool chunk) {
  return {{"id", meta.id},
          {"object", IsChat(meta) ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                  : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", nullptr}};
}

Json UsageJson(const v1::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens()},
          {"completion_tokens", u.completion_tokens()},
          {"total_tokens", u.prompt_tokens() + u.completion_tokens()}};
}

Json ExtensionJson(const SluiceExtension& e) {
  const v1::Timings& t = e.timings;
  Json out = {{"timings",
               {{"queue_ms", t.queue_ms()},
                {"prompt_ms", t.prompt_ms()},
                {"time_to_first_token_ms", t.time_to_first_token_ms()},
                {"decode_ms", t.decode_ms()},
                {"prompt_tokens_per_second", t.prompt_tokens_per_second()},
                {"decode_tokens_per_second", t.decode_tokens_per_second()}}}};
  if (e.slot_cache) {
    const v1::SlotCacheStats& s = *e.slot_cache;
    const uint64_t lookups = s.hits() + s.misses();
    out["slot_cache"] = {{"hits", s.hits()},
                         {"misses", s.misses()},
                         {"hit_rate", lookups == 0 ? 0.0 : double(s.hits()) / lookups},
                         {"evictions", s.evictions()},
                         {"forced", s.forced()},
                         {"host_computed", s.host_computed()},
                         {"skipped", s.skipped()},
                         {"bytes_streamed", s.bytes_streamed()},
                         {"bytes_host", s.bytes_host()},
                         {"bytes_disk", s.bytes_disk()},
                         {"prefetch_accuracy", s.prefetches_issued() == 0
                                                   ? 0.0
                                                   : double(s.prefetches_useful()) /
                                                         s.prefetches_issued()}};
  }
  return out;
}

// One choice of a stream chunk: a chat delta or completion text.
Json StreamChoice(const ResponseMeta& meta, Json delta_or_text, Json finish_reason) {
  Json choice = {{"index", 0}};
  if (IsChat(meta)) {
    choice["delta"] = std::move(delta_or_text);
  } else {
    choice["text"] = std::move(delta_or_text);
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = std::move(finish_reason);
  return choice;
}

std::string Chunk(const ResponseMeta& meta, Json choice, bool include_usage) {
  Json j = Envelope(meta, true);
  j["choices"] = Json::array({std::move(choice)});
  if (include_usage) j["usage"] = nullptr;
  return Dump(j);
}

}  // namespace

std::string RoleChunkJson(const ResponseMeta& meta, bool include_usage) {
  return Chunk(meta, StreamChoice(meta, {{"role", "assistant"}, {"content", ""}}, nullptr),
               include_usage);
}

std::string TextChunkJson(const ResponseMeta& meta, absl::string_view text,
                          bool include_usage) {
  Json content = IsChat(meta) ? Json{{"content", std::string(text)}} : Json(std::string(text));
  return Chunk(meta, StreamChoice(meta, std::move(content), nullptr), include_usage);
}

std::string ToolCallsChunkJson(const ResponseMeta& meta, const std::vector<v1::ToolCall>& calls,
                               bool include_usage) {
  return Chunk(meta,
               StreamChoice(meta, {{"tool_calls", ToolCallsJson(calls, /*delta=*/true)}}, nullptr),
               include_usage);
}

std::string FinalChunkJson(const ResponseMeta& meta, const v1::GenerateDone& done,
                           const SluiceExtension& extension, bool include_usage,
                           bool tool_calls) {
  Json empty = IsChat(meta) ? Json::object() : Json("");
  Json j = Envelope(meta, true);
  j["choices"] = Json::array(
      {StreamChoice(meta, std::move(empty),
                    tool_calls ? std::string("tool_calls")
                               : std::string(FinishReasonName(done.finish_reason())))});
  if (include_usage) j["usage"] = nullptr;
  j["sluice"] = ExtensionJson(extension);
  return Dump(j);
}

std::string UsageChunkJson(const ResponseMeta& meta, const v1::GenerateDone& done) {
  Json j = Envelope(meta, true);
  j["choices"] = Json::array();
  j["usage"] = UsageJson(done.usage());
  return Dump(j);
}

std::string CompletionJson(const ResponseMeta& meta, absl::string_view text,
                           const v1::GenerateDone& done, const SluiceExtension& extension) {
  Json choice = {{"index", 0}};
  std::string finish(FinishReasonName(done.finish_reason()));
  if (IsChat(meta) && meta.tools) {
    ToolCallSplit split = SplitToolCalls(text, meta.id);
    choice["message"] = {{"role", "assistant"},
                         {"content", split.calls.empty() || !split.content.empty()
                                         ? Json(split.content)
                                         : Json()},
                         {"refusal", nullptr}};
    if (!split.calls.empty()) {
      choice["message"]["tool_calls"] = ToolCallsJson(split.calls, /*delta=*/false);
      finish = "tool_calls";
    }
  } else if (IsChat(meta)) {
    choice["message"] = {{"role", "assistant"}, {"content", std::string(text)}, {"refusal", nullptr}};
  } else {
    choice["text"] = std::string(text);
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish;
  Json j = Envelope(meta, false);
  j["choices"] = Json::array({std::move(choice)});
  j["usage"] = UsageJson(done.usage());
  j["sluice"] = ExtensionJson(extension);
  return Dump(j);
}

std::string ModelJson(const v1::ModelInfo& model) {
  return Dump({{"id", model.model_id()},
               {"object", "model"},
               {"created", 0},
               {"owned_by", "sluice"},
               {"sluice",
                {{"architecture", model.architecture()},
                 {"state", v1::ModelState_Name(model.state())},
                 {"context_length", model.context_length()}}}});
}

std::string ModelListJson(const std::vector<v1::ModelInfo>& models) {
  Json data = Json::array();
  for (const v1::ModelInfo& m : models) data.push_back(Json::parse(ModelJson(m)));
  return Dump({{"object", "list"}, {"data", std::move(data)}});
}

}  // namespace sluice::daemon
