#include "worker/request_convert.h"

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
