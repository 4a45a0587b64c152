// End-to-end: structured outputs over the OpenAI-compatible HTTP API (issue
// 21). The model has random weights, so only the grammar mask can make its
// output valid: every answer is parsed and checked against its schema. Also
// the 400s for fields Sluice does not honour, x-request-id and the
// /v1/embeddings 404.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

using Json = nlohmann::json;

class E2eStructuredTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto path = WriteMicroModel(MakeTempDir("e2e-structured"));
    ASSERT_TRUE(path.ok()) << path.status();
    DaemonOptions options;
    options.model_path = *path;
    options.context_length = 4096;
    auto d = Daemon::Start(options);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    if (daemon_ == nullptr) return;
    const std::string log = daemon_->Log();
    EXPECT_EQ(daemon_->Stop(), 0) << log;
    delete daemon_;
  }

  // POSTs `body` to `path`; the response's headers and body.
  static CommandResult Post(const std::string& path, const std::string& body,
                            std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"/usr/bin/curl", "-sS", "-i", "-H",
                                     "Content-Type: application/json"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--data-raw", body,
                             absl::StrCat("http://127.0.0.1:", daemon_->http_port(), path)});
    return RunCommand(args, {}, "/dev/null", absl::Seconds(120));
  }

  static int Status(const CommandResult& r) {
    int status = 0;
    if (r.out.rfind("HTTP/1.1 ", 0) == 0) status = std::stoi(r.out.substr(9, 3));
    return status;
  }
  static std::string Header(const CommandResult& r, const std::string& name) {
    for (absl::string_view line : absl::StrSplit(r.out.substr(0, r.out.find("\r\n\r\n")), "\r\n")) {
      const size_t colon = line.find(':');
      if (colon != absl::string_view::npos &&
          absl::AsciiStrToLower(line.substr(0, colon)) == name) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
    return "";
  }
  static Json Body(const CommandResult& r) {
    const size_t at = r.out.find("\r\n\r\n");
    return Json::parse(at == std::string::npos ? "" : r.out.substr(at + 4), nullptr, false);
  }

  static Daemon* daemon_;
};

Daemon* E2eStructuredTest::daemon_ = nullptr;

// Bounded everywhere, so that a random model's output ends within max_tokens.
constexpr char kSchema[] = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 12},
  "age": {"type": "integer"},
  "ok": {"type": "boolean"},
  "color": {"enum": ["red", "green", "blue"]},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
  "point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"], "additionalProperties": false},
  "nick": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}},
  "required": ["name", "age", "ok", "color", "tags", "point", "nick"],
  "additionalProperties": false})";

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// kSchema, checked by hand.
void ExpectValid(const std::string& text) {
  const Json v = Json::parse(text, nullptr, false);
  ASSERT_FALSE(v.is_discarded()) << "not JSON: " << text;
  ASSERT_TRUE(v.is_object()) << text;
  EXPECT_EQ(v.size(), 7u) << text;
  ASSERT_TRUE(v["name"].is_string()) << text;
  EXPECT_LE(CodePoints(v["name"].get<std::string>()), 12u) << text;
  EXPECT_TRUE(v["age"].is_number_integer()) << text;
  EXPECT_TRUE(v["ok"].is_boolean()) << text;
  ASSERT_TRUE(v["color"].is_string()) << text;
  const std::string color = v["color"].get<std::string>();
  EXPECT_TRUE(color == "red" || color == "green" || color == "blue") << text;
  ASSERT_TRUE(v["tags"].is_array()) << text;
  EXPECT_LE(v["tags"].size(), 3u) << text;
  for (const Json& t : v["tags"]) {
    ASSERT_TRUE(t.is_string()) << text;
    EXPECT_LE(CodePoints(t.get<std::string>()), 6u) << text;
  }
  ASSERT_TRUE(v["point"].is_object()) << text;
  EXPECT_EQ(v["point"].size(), 2u) << text;
  EXPECT_TRUE(v["point"]["x"].is_number() && v["point"]["y"].is_number()) << text;
  EXPECT_TRUE(v["nick"].is_null() ||
              (v["nick"].is_string() && CodePoints(v["nick"].get<std::string>()) <= 5))
      << text;
}

std::string ChatBody(const Json& extra) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "Describe a person."}}}},
               {"max_tokens", 1500}};
  body.update(extra);
  return body.dump();
}

TEST_F(E2eStructuredTest, RandomWeightsGiveSchemaValidJsonUnderTheMask) {
  const Json format = {{"type", "json_schema"},
                       {"json_schema", {{"name", "person"}, {"strict", true},
                                        {"schema", Json::parse(kSchema)}}}};
  for (const double temperature : {0.0, 1.0}) {
    for (int seed = 1; seed <= 3; ++seed) {
      const CommandResult r = Post("/v1/chat/completions",
                                   ChatBody({{"response_format", format},
                                             {"temperature", temperature}, {"seed", seed}}));
      ASSERT_EQ(Status(r), 200) << r.out << r.err;
      const Json body = Body(r);
      const Json& choice = body["choices"][0];
      EXPECT_EQ(choice["finish_reason"], "stop") << r.out;
      ExpectValid(choice["message"]["content"].get<std::string>());
      if (temperature == 0) break;  // greedy: one answer
    }
  }
}

TEST_F(E2eStructuredTest, StreamedStructuredOutputIsValidWhole) {
  const Json format = {{"type", "json_schema"},
                       {"json_schema", {{"name", "person"}, {"schema", Json::parse(kSchema)}}}};
  const CommandResult r = Post("/v1/chat/completions",
                               ChatBody({{"response_format", format}, {"temperature", 1.0},
                                         {"seed", 11}, {"stream", true}}));
  ASSERT_EQ(Status(r), 200) << r.out;
  std::string text, finish;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    if (!absl::ConsumePrefix(&line, "data: ") || line == "[DONE]") continue;
    const Json chunk = Json::parse(line, nullptr, false);
    ASSERT_FALSE(chunk.is_discarded()) << line;
    for (const Json& c : chunk["choices"]) {
      if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
      if (c["finish_reason"].is_string()) finish = c["finish_reason"];
    }
  }
  EXPECT_EQ(finish, "stop");
  ExpectValid(text);
}

TEST_F(E2eStructuredTest, JsonObjectAndCompletionsFollowTheFormat) {
  // Any object: long strings may run into max_tokens, so a cut answer must
  // at least be finished by "length".
  const CommandResult r = Post(
      "/v1/completions",
      Json{{"prompt", "{"}, {"max_tokens", 300}, {"seed", 5},
           {"response_format", {{"type", "json_schema"},
                                {"json_schema", {{"name", "n"}, {"schema", {{"type", "integer"}}}}}}}}
          .dump());
  ASSERT_EQ(Status(r), 200) << r.out;
  const Json choice = Body(r)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop") << r.out;
  const Json n = Json::parse(choice["text"].get<std::string>(), nullptr, false);
  EXPECT_TRUE(n.is_number_integer()) << r.out;

  const CommandResult o = Post("/v1/chat/completions",
                               ChatBody({{"response_format", {{"type", "json_object"}}},
                                         {"max_tokens", 400}, {"seed", 3}}));
  ASSERT_EQ(Status(o), 200) << o.out;
  const Json oc = Body(o)["choices"][0];
  const std::string text = oc["message"]["content"];
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text[0], '{') << text;
  if (oc["finish_reason"] == "stop") {
    const Json v = Json::parse(text, nullptr, false);
    EXPECT_TRUE(v.is_object()) << text;
  } else {
    EXPECT_EQ(oc["finish_reason"], "length") << o.out;
  }
}

TEST_F(E2eStructuredTest, WhatIsNotHonouredIsRefusedWith400NamingIt) {
  struct Case {
    Json extra;
    std::string param;
    std::string message_part;
  };
  const std::vector<Case> cases = {
      {{{"frobnicate", 1}}, "frobnicate", "not a field Sluice supports"},
      {{{"presence_penalty", 0.5}}, "presence_penalty", "only 0"},
      {{{"logit_bias", {{"5", 1}}}}, "logit_bias", "not supported"},
      {{{"store", true}}, "store", "not stored"},
      {{{"response_format", {{"type", "grammar"}}}}, "response_format.type", "must be"},
      {{{"messages", {{{"role", "user"}, {"content", "x"}, {"name", "bob"}}}}},
       "messages[0].name", "not supported"},
  };
  for (const Case& c : cases) {
    const CommandResult r = Post("/v1/chat/completions", ChatBody(c.extra));
    EXPECT_EQ(Status(r), 400) << c.extra << r.out;
    const Json e = Body(r)["error"];
    EXPECT_EQ(e["param"], c.param) << r.out;
    EXPECT_NE(e["message"].get<std::string>().find(c.message_part), std::string::npos) << r.out;
  }
  // A schema keyword the compiler lacks: the worker's 400 names it.
  const CommandResult r = Post(
      "/v1/chat/completions",
      ChatBody({{"response_format",
                 {{"type", "json_schema"},
                  {"json_schema", {{"name", "x"},
                                   {"schema", {{"type", "string"}, {"pattern", "^a+$"}}}}}}}}));
  EXPECT_EQ(Status(r), 400) << r.out;
  EXPECT_NE(Body(r)["error"]["message"].get<std::string>().find("keyword 'pattern'"),
            std::string::npos)
      << r.out;
  // Defaults that ask for nothing pass.
  const CommandResult ok = Post("/v1/chat/completions",
                                ChatBody({{"presence_penalty", 0}, {"frequency_penalty", 0},
                                          {"user", "u1"}, {"tools", Json::array()},
                                          {"max_tokens", 2}}));
  EXPECT_EQ(Status(ok), 200) << ok.out;
}

TEST_F(E2eStructuredTest, EveryResponseCarriesARequestId) {
  const CommandResult echoed = Post("/v1/chat/completions", ChatBody({{"max_tokens", 1}}),
                                    {"-H", "X-Request-Id: client-abc.1"});
  EXPECT_EQ(Status(echoed), 200);
  EXPECT_EQ(Header(echoed, "x-request-id"), "client-abc.1");
  // The daemon's access log names the generation by the same id.
  EXPECT_NE(daemon_->Log().find("sluiced: request client-abc.1: FINISH_REASON_LENGTH, "),
            std::string::npos);
  const CommandResult made = Post("/v1/chat/completions", ChatBody({{"bad", 1}}),
                                  {"-H", "X-Request-Id: not sane!"});
  EXPECT_EQ(Status(made), 400);
  const std::string id = Header(made, "x-request-id");
  EXPECT_EQ(id.rfind("req-", 0), 0u) << made.out;
  const CommandResult other = Post("/v1/chat/completions", ChatBody({{"bad", 1}}));
  EXPECT_NE(Header(other, "x-request-id"), id);
  const CommandResult embeddings = Post("/v1/embeddings", R"({"input": "x"})");
  EXPECT_EQ(Status(embeddings), 404);
  EXPECT_NE(Body(embeddings)["error"]["message"].get<std::string>().find("not served"),
            std::string::npos);
  EXPECT_FALSE(Header(embeddings, "x-request-id").empty());
}

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
   "parameters": {"type": "object", "properties": {
     "city": {"type": "string", "maxLength": 10}, "unit": {"enum": ["c", "f"]}},
     "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
   "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}
])");

// A call's arguments against its tool's schema (kTools), by hand.
void ExpectValidCall(const Json& call) {
  ASSERT_EQ(call["type"], "function") << call;
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u) << call;
  const std::string name = call["function"]["name"];
  const Json args = Json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << call;
  if (name == "get_weather") {
    ASSERT_TRUE(args["city"].is_string()) << call;
    EXPECT_LE(CodePoints(args["city"].get<std::string>()), 10u) << call;
    EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << call;
    EXPECT_EQ(args.size(), 2u) << call;
  } else {
    ASSERT_EQ(name, "add") << call;
    EXPECT_TRUE(args["a"].is_number_integer() && args["b"].is_number_integer()) << call;
  }
}

TEST_F(E2eStructuredTest, RequiredAndNamedToolChoicesForceValidCalls) {
  for (const Json& choice : {Json("required"),
                             Json{{"type", "function"}, {"function", {{"name", "add"}}}}}) {
    for (int seed = 1; seed <= 2; ++seed) {
      const CommandResult r = Post(
          "/v1/chat/completions",
          ChatBody({{"tools", kTools}, {"tool_choice", choice}, {"parallel_tool_calls", false},
                    {"temperature", 1.0}, {"seed", seed}}));
      ASSERT_EQ(Status(r), 200) << r.out;
      const Json choice0 = Body(r)["choices"][0];
      EXPECT_EQ(choice0["finish_reason"], "tool_calls") << r.out;
      const Json& calls = choice0["message"]["tool_calls"];
      ASSERT_EQ(calls.size(), 1u) << r.out;
      ExpectValidCall(calls[0]);
      if (choice.is_object()) {
        EXPECT_EQ(calls[0]["function"]["name"], "add");
      }
      EXPECT_TRUE(choice0["message"]["content"].is_null()) << r.out;
    }
  }
}

TEST_F(E2eStructuredTest, StreamedToolCallsComeAsDeltas) {
  const CommandResult r = Post("/v1/chat/completions",
                               ChatBody({{"tools", kTools}, {"tool_choice", "required"},
                                         {"seed", 4}, {"stream", true}}));
  ASSERT_EQ(Status(r), 200) << r.out;
  Json calls = Json::array();
  std::string finish;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    if (!absl::ConsumePrefix(&line, "data: ") || line == "[DONE]") continue;
    const Json chunk = Json::parse(line, nullptr, false);
    for (const Json& c : chunk["choices"]) {
      if (c["delta"].contains("tool_calls")) {
        for (const Json& d : c["delta"]["tool_calls"]) {
          EXPECT_EQ(d["index"], calls.size());
          calls.push_back(d);
        }
      }
      if (c["finish_reason"].is_string()) finish = c["finish_reason"];
    }
  }
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_GE(calls.size(), 1u) << r.out;
  for (const Json& c : calls) ExpectValidCall(c);
}

TEST_F(E2eStructuredTest, ToolResultsRoundTripAndAutoAnswers) {
  const Json messages = {
      {{"role", "user"}, {"content", "Weather in Oslo?"}},
      {{"role", "assistant"}, {"content", nullptr},
       {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                        {"function", {{"name", "get_weather"},
                                      {"arguments", R"({"city": "Oslo", "unit": "c"})"}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "-3 C, snow"}}};
  const CommandResult r = Post("/v1/chat/completions",
                               ChatBody({{"messages", messages}, {"tools", kTools},
                                         {"max_tokens", 16}, {"seed", 2}}));
  ASSERT_EQ(Status(r), 200) << r.out;
  const Json choice = Body(r)["choices"][0];
  // "auto": whatever the random model wrote, text or calls, in OpenAI's shape.
  if (choice["finish_reason"] == "tool_calls") {
    for (const Json& c : choice["message"]["tool_calls"]) EXPECT_TRUE(c["function"].is_object());
  } else {
    EXPECT_TRUE(choice["message"]["content"].is_string()) << r.out;
  }
  // Bad calls in history and unknown tool names are refused.
  Json bad = messages;
  bad[1]["tool_calls"][0]["function"]["arguments"] = "[1]";
  const CommandResult b = Post("/v1/chat/completions",
                               ChatBody({{"messages", bad}, {"tools", kTools}, {"max_tokens", 4}}));
  EXPECT_EQ(Status(b), 400) << b.out;
  EXPECT_NE(Body(b)["error"]["message"].get<std::string>().find("tool_calls[0].arguments"),
            std::string::npos)
      << b.out;
  const CommandResult u = Post(
      "/v1/chat/completions",
      ChatBody({{"tools", kTools},
                {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}));
  EXPECT_EQ(Status(u), 400);
  EXPECT_EQ(Body(u)["error"]["param"], "tool_choice.function.name") << u.out;
}

// The Responses API's SSE events: (type, data) pairs in order.
std::vector<std::pair<std::string, Json>> Events(const std::string& out) {
  std::vector<std::pair<std::string, Json>> events;
  std::string type;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "event: ")) type = std::string(line);
    if (absl::ConsumePrefix(&line, "data: ")) events.push_back({type, Json::parse(line, nullptr, false)});
  }
  return events;
}

TEST_F(E2eStructuredTest, ResponsesApiAnswersStreamedAndNot) {
  const Json schema_format = {{"format", {{"type", "json_schema"}, {"name", "person"},
                                          {"strict", true}, {"schema", Json::parse(kSchema)}}}};
  const CommandResult r = Post("/v1/responses",
                               Json{{"input", "Describe a person."}, {"instructions", "Be brief."},
                                    {"text", schema_format}, {"max_output_tokens", 1500},
                                    {"temperature", 1.0}, {"seed", 9}}.dump());
  ASSERT_EQ(Status(r), 200) << r.out;
  const Json body = Body(r);
  EXPECT_EQ(body["object"], "response");
  EXPECT_EQ(body["status"], "completed") << r.out;
  EXPECT_EQ(body["id"].get<std::string>().rfind("resp_", 0), 0u);
  ASSERT_EQ(body["output"].size(), 1u) << r.out;
  const Json& item = body["output"][0];
  EXPECT_EQ(item["type"], "message");
  EXPECT_EQ(item["role"], "assistant");
  EXPECT_EQ(item["content"][0]["type"], "output_text");
  ExpectValid(item["content"][0]["text"].get<std::string>());
  EXPECT_GT(body["usage"]["input_tokens"].get<int>(), 0);
  EXPECT_EQ(body["usage"]["total_tokens"].get<int>(),
            body["usage"]["input_tokens"].get<int>() + body["usage"]["output_tokens"].get<int>());

  // Streamed, cut by max_output_tokens: the event sequence and "incomplete".
  const CommandResult s = Post("/v1/responses", Json{{"input", {{{"role", "user"}, {"content", "Hi"}}}},
                                                     {"max_output_tokens", 5}, {"stream", true},
                                                     {"seed", 1}}.dump());
  ASSERT_EQ(Status(s), 200) << s.out;
  const auto events = Events(s.out);
  ASSERT_GE(events.size(), 6u) << s.out;
  EXPECT_EQ(events[0].first, "response.created");
  EXPECT_EQ(events[1].first, "response.in_progress");
  EXPECT_EQ(events.back().first, "response.incomplete");
  std::string deltas;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].second["type"], events[i].first);
    EXPECT_EQ(events[i].second["sequence_number"], i);
    if (events[i].first == "response.output_text.delta") deltas += events[i].second["delta"].get<std::string>();
  }
  const Json& done = events.back().second["response"];
  EXPECT_EQ(done["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(done["output"][0]["content"][0]["text"], deltas);
  EXPECT_EQ(done["usage"]["output_tokens"], 5);
}

TEST_F(E2eStructuredTest, ResponsesApiFunctionCalls) {
  Json tools = Json::array();
  for (const Json& t : kTools) {
    Json flat = t["function"];
    flat["type"] = "function";
    tools.push_back(flat);
  }
  for (const bool stream : {false, true}) {
    const CommandResult r = Post("/v1/responses",
                                 Json{{"input", "Weather in Oslo?"}, {"tools", tools},
                                      {"tool_choice", "required"}, {"parallel_tool_calls", false},
                                      {"stream", stream}, {"seed", 3}}.dump());
    ASSERT_EQ(Status(r), 200) << r.out;
    Json output;
    if (stream) {
      const auto events = Events(r.out);
      ASSERT_FALSE(events.empty());
      EXPECT_EQ(events.back().first, "response.completed") << r.out;
      bool saw_args = false;
      for (const auto& [type, data] : events) saw_args |= type == "response.function_call_arguments.done";
      EXPECT_TRUE(saw_args) << r.out;
      output = events.back().second["response"]["output"];
    } else {
      output = Body(r)["output"];
    }
    ASSERT_EQ(output.size(), 1u) << r.out;
    EXPECT_EQ(output[0]["type"], "function_call");
    ExpectValidCall({{"type", "function"}, {"id", output[0]["call_id"]},
                     {"function", {{"name", output[0]["name"]}, {"arguments", output[0]["arguments"]}}}});
  }
  // A round trip through function_call / function_call_output items.
  const CommandResult rt = Post(
      "/v1/responses",
      Json{{"input", {{{"role", "user"}, {"content", "Weather?"}},
                      {{"type", "function_call"}, {"call_id", "c1"}, {"name", "get_weather"},
                       {"arguments", R"({"city": "Oslo", "unit": "c"})"}},
                      {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "-3 C"}}}},
           {"tools", tools}, {"max_output_tokens", 4}}.dump());
  EXPECT_EQ(Status(rt), 200) << rt.out;
  const CommandResult bad = Post("/v1/responses",
                                 Json{{"input", "x"}, {"previous_response_id", "resp_1"}}.dump());
  EXPECT_EQ(Status(bad), 400);
  EXPECT_EQ(Body(bad)["error"]["param"], "previous_response_id");
  const CommandResult web = Post("/v1/responses",
                                 Json{{"input", "x"}, {"tools", {{{"type", "web_search"}}}}}.dump());
  EXPECT_EQ(Status(web), 400);
  EXPECT_EQ(Body(web)["error"]["param"], "tools[0].type");
}

}  // namespace
}  // namespace sluice::testing
