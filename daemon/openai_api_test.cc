#include "daemon/openai_api.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace sluice::daemon {
namespace {

using Json = nlohmann::json;
constexpr OpenAiEndpoint kChat = OpenAiEndpoint::kChatCompletions;
constexpr OpenAiEndpoint kCompletions = OpenAiEndpoint::kCompletions;

TEST(ParseOpenAiRequestTest, ChatFieldsMapOntoGenerateRequest) {
  auto r = ParseOpenAiRequest(kChat, R"({
    "model": "m", "messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": null}],
    "max_tokens": 5, "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9,
    "top_k": 40, "seed": -1, "stop": "\n\n", "stream": true,
    "stream_options": {"include_usage": true}, "frequency_penalty": 0, "user": "x"})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::GenerateRequest& g = r->generate;
  EXPECT_EQ(g.model_id(), "m");
  ASSERT_EQ(g.chat().messages_size(), 3);
  EXPECT_EQ(g.chat().messages(0).role(), "system");
  EXPECT_EQ(g.chat().messages(1).content(), "Hi there");
  EXPECT_EQ(g.chat().messages(2).content(), "");
  EXPECT_EQ(g.max_tokens(), 7u);  // max_completion_tokens wins
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().top_k(), 40u);
  EXPECT_EQ(g.sampling().seed(), UINT64_MAX);
  ASSERT_EQ(g.stop_size(), 1);
  EXPECT_EQ(g.stop(0), "\n\n");
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
}

TEST(ParseOpenAiRequestTest, DefaultsFollowOpenAi) {
  auto chat = ParseOpenAiRequest(kChat, R"({"messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->generate.max_tokens(), 0u);  // until EOS or the context is full
  EXPECT_FLOAT_EQ(chat->generate.sampling().temperature(), 1.0f);
  EXPECT_FALSE(chat->generate.sampling().has_top_p());
  EXPECT_FALSE(chat->stream);
  auto completion = ParseOpenAiRequest(kCompletions, R"({"prompt": ["Once"], "ignore_eos": true})");
  ASSERT_TRUE(completion.ok()) << completion.status();
  EXPECT_EQ(completion->generate.prompt(), "Once");
  EXPECT_EQ(completion->generate.max_tokens(), 16u);
  EXPECT_TRUE(completion->generate.ignore_eos());
  EXPECT_FALSE(completion->generate.parse_special());
  auto ids = ParseOpenAiRequest(kCompletions, R"({"prompt": [[1, 2, 3]], "max_tokens": 2.0})");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->generate.token_ids().ids_size(), 3);
  EXPECT_EQ(ids->generate.max_tokens(), 2u);
}

TEST(ParseOpenAiRequestTest, BadFieldsNameTheParam) {
  struct Case {
    OpenAiEndpoint endpoint;
    const char* body;
    const char* message;
    const char* param;
  };
  const Case cases[] = {
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})",
       "temperature: expected a number, got a string", "temperature"},
      {kChat, R"({"messages": []})", "messages: must not be empty", "messages"},
      {kChat, R"({"model": "m"})", "messages: is required", "messages"},
      {kChat, R"({"messages": [{"content": "x"}]})", "messages[0].role: expected a string, got null",
       "messages[0].role"},
      {kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0].type: only \"text\" parts are supported",
       "messages[0].content[0].type"},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "n": 2})",
       "n: only one choice per request (n = 1) is supported", "n"},
      {kCompletions, R"({"prompt": "x", "max_tokens": 0})", "max_tokens: 0 is outside [1, 4294967295]",
       "max_tokens"},
      {kCompletions, R"({"prompt": "x", "max_tokens": 1.5})",
       "max_tokens: expected an integer, got a number", "max_tokens"},
      {kCompletions, R"({"prompt": "x", "stop": [1]})", "stop[0]: expected a string, got an integer",
       "stop[0]"},
      {kCompletions, R"({"prompt": ["a", "b"]})",
       "prompt: expected a string or an array of token ids (one prompt per request)", "prompt"},
      {kCompletions, R"({"prompt": "x", "stream": 1})", "stream: expected a boolean, got an integer",
       "stream"},
      {kCompletions, R"({"prompt": "x", "model": 3})", "model: expected a string, got an integer",
       "model"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    auto r = ParseOpenAiRequest(c.endpoint, c.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
    EXPECT_EQ(ErrorParam(r.status()), c.param);
  }
}

TEST(ParseOpenAiRequestTest, MalformedBodiesAreInvalidArgument) {
  auto r = ParseOpenAiRequest(kChat, "{\"messages\": ");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("the request body is not JSON: ", 0), 0u)
      << r.status().message();
  r = ParseOpenAiRequest(kChat, "[1]");
  EXPECT_EQ(r.status().message(), "the request body must be a JSON object, got an array");
}

TEST(ErrorJsonTest, HttpStatusAndOpenAiShape) {
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kFailedPrecondition), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInternal), 500);
  Json e = Json::parse(ErrorJson(absl::NotFoundError("model_id 'x' is not loaded")));
  EXPECT_EQ(e, Json::parse(R"({"error": {"message": "model_id 'x' is not loaded",
      "type": "invalid_request_error", "param": null, "code": "model_not_found"}})"));
  e = Json::parse(ErrorJson(absl::ResourceExhaustedError("full")));
  EXPECT_EQ(e["error"]["type"], "rate_limit_error");
  EXPECT_EQ(e["error"]["code"], "resource_exhausted");
  auto bad = ParseOpenAiRequest(kChat, R"({"messages": [{"role": "user", "content": "x"}], "top_p": []})");
  e = Json::parse(ErrorJson(bad.status()));
  EXPECT_EQ(e["error"]["param"], "top_p");
  EXPECT_EQ(e["error"]["code"], "invalid_argument");
}

v1::GenerateDone Done(v1::FinishReason reason) {
  v1::GenerateDone done;
  done.set_finish_reason(reason);
  done.mutable_usage()->set_prompt_tokens(5);
  done.mutable_usage()->set_completion_tokens(3);
  done.mutable_timings()->set_queue_ms(1.5);
  return done;
}

TEST(ResponseJsonTest, ChatStreamChunks) {
  const ResponseMeta meta{kChat, "chatcmpl-1", 1700000000, "micro"};
  Json role = Json::parse(RoleChunkJson(meta, false));
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"], Json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_FALSE(role.contains("usage"));
  Json text = Json::parse(TextChunkJson(meta, "héllo", true));
  EXPECT_EQ(text["choices"][0]["delta"]["content"], "héllo");
  EXPECT_TRUE(text["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(text["usage"].is_null());
  const v1::GenerateDone done = Done(v1::FINISH_REASON_EOS);
  Json final = Json::parse(FinalChunkJson(meta, done, ExtensionOf(done), true));
  EXPECT_EQ(final["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(final["choices"][0]["delta"], Json::object());
  EXPECT_EQ(final["sluice"]["timings"]["queue_ms"], 1.5);
  EXPECT_FALSE(final["sluice"].contains("slot_cache"));
  Json usage = Json::parse(UsageChunkJson(meta, done));
  EXPECT_EQ(usage["choices"], Json::array());
  EXPECT_EQ(usage["usage"],
            Json::parse(R"({"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8})"));
}

TEST(ResponseJsonTest, CompletionObjectsAndSlotCacheExtension) {
  const ResponseMeta meta{kCompletions, "cmpl-2", 1, "micro"};
  const v1::GenerateDone done = Done(v1::FINISH_REASON_LENGTH);
  SluiceExtension ext = ExtensionOf(done);
  ext.slot_cache.emplace();
  ext.slot_cache->set_hits(3);
  ext.slot_cache->set_misses(1);
  Json c = Json::parse(CompletionJson(meta, "abc", done, ext));
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["text"], "abc");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["total_tokens"], 8);
  EXPECT_EQ(c["sluice"]["slot_cache"]["hit_rate"], 0.75);
  Json chunk = Json::parse(TextChunkJson(meta, "d", false));
  EXPECT_EQ(chunk["choices"][0]["text"], "d");
  const ResponseMeta chat{kChat, "chatcmpl-3", 1, "micro"};
  // The request's figures from GenerateDone.experts.
  v1::GenerateDone streamed = done;
  streamed.mutable_experts()->set_hits(6);
  streamed.mutable_experts()->set_misses(2);
  streamed.mutable_experts()->set_host_computed(1);
  streamed.mutable_experts()->set_bytes_host(3000);
  streamed.mutable_experts()->set_bytes_disk(1000);
  streamed.mutable_experts()->set_prefetches_issued(4);
  streamed.mutable_experts()->set_prefetches_useful(1);
  Json x = Json::parse(CompletionJson(meta, "abc", streamed, ExtensionOf(streamed)));
  EXPECT_EQ(x["sluice"]["slot_cache"]["hit_rate"], 0.75);
  EXPECT_EQ(x["sluice"]["slot_cache"]["bytes_streamed"], 4000);
  EXPECT_EQ(x["sluice"]["slot_cache"]["bytes_disk"], 1000);
  EXPECT_EQ(x["sluice"]["slot_cache"]["host_computed"], 1);
  EXPECT_EQ(x["sluice"]["slot_cache"]["prefetch_accuracy"], 0.25);
  Json m = Json::parse(CompletionJson(chat, "hi", done, ExtensionOf(done)));
  EXPECT_EQ(m["object"], "chat.completion");
  EXPECT_EQ(m["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(m["choices"][0]["message"]["role"], "assistant");
}

TEST(ResponseJsonTest, ModelList) {
  v1::ModelInfo info;
  info.set_model_id("micro");
  info.set_architecture("qwen35moe");
  info.set_state(v1::MODEL_STATE_READY);
  Json list = Json::parse(ModelListJson({info}));
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], "micro");
  EXPECT_EQ(list["data"][0]["object"], "model");
  EXPECT_EQ(list["data"][0]["sluice"]["state"], "MODEL_STATE_READY");
  EXPECT_EQ(Json::parse(ModelListJson({}))["data"], Json::array());
}

}  // namespace
}  // namespace sluice::daemon
