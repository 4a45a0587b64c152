#include "worker/request_convert.h"

#include "worker/tool_calls.h"

#include "gtest/gtest.h"

namespace sluice::worker {
namespace {

TEST(ToSamplerParamsTest, UnsetFieldsTakeTheApiDefaults) {
  auto p = ToSamplerParams(sluice::v1::SamplingParams());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->temperature, 0);
  EXPECT_EQ(p->top_k, 0);
  EXPECT_EQ(p->top_p, 1);
  EXPECT_EQ(p->min_p, 0);
  EXPECT_EQ(p->repetition_penalty, 1);
  EXPECT_EQ(p->repetition_window, 64);
  EXPECT_EQ(p->seed, 0u);
}

TEST(ToSamplerParamsTest, SetFieldsPassThrough) {
  sluice::v1::SamplingParams s;
  s.set_temperature(0.7f);
  s.set_top_k(40);
  s.set_top_p(0.9f);
  s.set_min_p(0.05f);
  s.set_repetition_penalty(1.1f);
  s.set_repetition_window(32);
  s.set_seed(99);
  auto p = ToSamplerParams(s);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FLOAT_EQ(p->temperature, 0.7f);
  EXPECT_EQ(p->top_k, 40);
  EXPECT_FLOAT_EQ(p->top_p, 0.9f);
  EXPECT_FLOAT_EQ(p->min_p, 0.05f);
  EXPECT_FLOAT_EQ(p->repetition_penalty, 1.1f);
  EXPECT_EQ(p->repetition_window, 32);
  EXPECT_EQ(p->seed, 99u);
}

TEST(ToSamplerParamsTest, OutOfRangeIsInvalidArgumentNamingTheField) {
  sluice::v1::SamplingParams s;
  s.set_temperature(-1);
  auto p = ToSamplerParams(s);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("GenerateRequest.sampling: "), std::string::npos);
  EXPECT_NE(p.status().message().find("temperature"), std::string::npos) << p.status();

  sluice::v1::SamplingParams k;
  k.set_top_k(4000000000u);
  EXPECT_NE(ToSamplerParams(k).status().message().find("top_k=4000000000"), std::string::npos);
}

TEST(ToGenerateDoneTest, UsageTimingsAndReason) {
  GenerateResult r;
  r.prompt_tokens = 10;
  r.generated_tokens = 5;
  r.finish_reason = FinishReason::kStop;
  r.ttft_s = 0.25;
  r.prefill_tok_per_s = 100;
  r.decode_tok_per_s = 20;
  sluice::v1::GenerateDone d = ToGenerateDone(r);
  EXPECT_EQ(d.finish_reason(), sluice::v1::FINISH_REASON_STOP);
  EXPECT_EQ(d.usage().prompt_tokens(), 10u);
  EXPECT_EQ(d.usage().completion_tokens(), 5u);
  EXPECT_DOUBLE_EQ(d.timings().prompt_ms(), 100.0);
  EXPECT_DOUBLE_EQ(d.timings().decode_ms(), 200.0);
  EXPECT_DOUBLE_EQ(d.timings().time_to_first_token_ms(), 250.0);
  EXPECT_EQ(ToProtoFinishReason(FinishReason::kEos), sluice::v1::FINISH_REASON_EOS);
  EXPECT_EQ(ToProtoFinishReason(FinishReason::kLength), sluice::v1::FINISH_REASON_LENGTH);
}

}  // namespace
}  // namespace sluice::worker

namespace sluice::worker {
namespace {

TEST(RenderChatTest, ToolsCallsAndResultsBecomeChatMLTurns) {
  sluice::v1::ChatInput chat;
  auto* tool = chat.add_tools();
  tool->set_name("add");
  tool->set_parameters(R"({"type": "object"})");
  auto* user = chat.add_messages();
  user->set_role("user");
  user->set_content("1+2?");
  auto* assistant = chat.add_messages();
  assistant->set_role("assistant");
  auto* call = assistant->add_tool_calls();
  call->set_name("add");
  call->set_arguments(R"({"a":1,"b":2})");
  for (const char* result : {"3", "three"}) {
    auto* t = chat.add_messages();
    t->set_role("tool");
    t->set_content(result);
  }
  auto out = RenderChat(chat, /*render_tools=*/true);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 4u);
  EXPECT_EQ((*out)[0].role, "system");
  EXPECT_NE((*out)[0].content.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"add\", "
                                   "\"parameters\": {\"type\": \"object\"}}}\n</tools>"),
            std::string::npos)
      << (*out)[0].content;
  EXPECT_EQ((*out)[2].content,
            "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>");
  EXPECT_EQ((*out)[3].role, "user");
  EXPECT_EQ((*out)[3].content,
            "<tool_response>\n3\n</tool_response>\n<tool_response>\nthree\n</tool_response>");
  auto plain = RenderChat(chat, /*render_tools=*/false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->size(), 3u);
}

TEST(ToolCallGrammarTest, ForcedChoicesCompileAndNamesAreChecked) {
  sluice::v1::ChatInput chat;
  chat.add_tools()->set_name("add");
  sluice::v1::ToolChoice choice;
  choice.set_mode(sluice::v1::ToolChoice::TOOL_CHOICE_AUTO);
  EXPECT_EQ(*ToolCallGrammar(chat, choice), "");
  choice.set_mode(sluice::v1::ToolChoice::TOOL_CHOICE_REQUIRED);
  auto g = ToolCallGrammar(chat, choice);
  ASSERT_TRUE(g.ok()) << g.status();
  auto parsed = Grammar::Parse(*g);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE((*parsed)->Matches("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"));
  choice.set_mode(sluice::v1::ToolChoice::TOOL_CHOICE_FUNCTION);
  choice.set_function("sub");
  EXPECT_NE(ToolCallGrammar(chat, choice).status().message().find("no tool is named 'sub'"),
            std::string::npos);
}

}  // namespace
}  // namespace sluice::worker
