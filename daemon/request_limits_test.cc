#include "daemon/request_limits.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

v1::GenerateRequest Prompt(const std::string& text) {
  v1::GenerateRequest r;
  r.set_prompt(text);
  return r;
}

TEST(RequestLimitsTest, AcceptsAnOrdinaryRequest) {
  v1::GenerateRequest r = Prompt("hello");
  r.mutable_sampling()->set_temperature(0.7f);
  r.add_stop("\n");
  EXPECT_TRUE(CheckGenerateRequest(r).ok());
  v1::TokenizeRequest t;
  t.set_text("hello");
  EXPECT_TRUE(CheckTokenizeRequest(t).ok());
}

TEST(RequestLimitsTest, HugeModelIdIsQuotedShort) {
  v1::GenerateRequest r = Prompt("x");
  r.set_model_id(std::string(1 << 20, 'm'));
  const absl::Status s = CheckGenerateRequest(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "GenerateRequest.model_id='" + std::string(64, 'm') +
                             "... (1048576 bytes)': longer than 256 bytes");
}

TEST(RequestLimitsTest, TextSizesAreBounded) {
  EXPECT_EQ(CheckGenerateRequest(Prompt(std::string((1 << 20) + 1, 'a'))).message(),
            "GenerateRequest.prompt: 1048577 bytes exceed the limit of 1048576");
  v1::TokenizeRequest t;
  t.set_text(std::string(4 << 20, 'a'));
  EXPECT_EQ(CheckTokenizeRequest(t).message(),
            "TokenizeRequest.text: 4194304 bytes exceed the limit of 1048576");
}

TEST(RequestLimitsTest, SamplingMatchesTheWorkersWording) {
  v1::GenerateRequest r = Prompt("x");
  r.mutable_sampling()->set_temperature(-1);
  EXPECT_EQ(CheckGenerateRequest(r).message(),
            "GenerateRequest.sampling: sampler: temperature = -1 is outside [0, inf)");
  r = Prompt("x");
  r.mutable_sampling()->set_top_p(0);
  EXPECT_EQ(CheckGenerateRequest(r).message(),
            "GenerateRequest.sampling: sampler: top_p = 0 is outside (0, 1]");
}

TEST(RequestLimitsTest, ChatRoleIsEscapedAndCut) {
  v1::GenerateRequest r;
  auto* m = r.mutable_chat()->add_messages();
  m->set_role(std::string("ro\x01le", 5) + std::string(100, 'x'));
  EXPECT_EQ(CheckGenerateRequest(r).message(),
            "GenerateRequest.chat: chat message 0: role \"ro\\x01le" + std::string(27, 'x') +
                "... (105 bytes)\" is not one of \"system\", \"user\", \"assistant\", \"tool\"");
}

TEST(QuoteForMessageTest, EscapesAndCuts) {
  EXPECT_EQ(QuoteForMessage("a\nb"), "a\\nb");
  EXPECT_EQ(QuoteForMessage(std::string(10, 'z'), 3), "zzz... (10 bytes)");
}

}  // namespace
}  // namespace sluice::daemon
