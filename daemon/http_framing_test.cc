#include "daemon/http_framing.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

using State = RequestFraming::State;

FramingLimits Small() {
  FramingLimits l;
  l.max_header_bytes = 256;
  l.max_body_bytes = 16;
  return l;
}

TEST(RequestFramingTest, ContentLengthBodyIsReframedAndLeavesThePipelinedRest) {
  RequestFraming f(Small());
  const std::string in =
      "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabcGET /";
  EXPECT_EQ(f.Consume(in), in.size() - 5);
  ASSERT_EQ(f.state(), State::kComplete);
  EXPECT_EQ(f.head(), "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n");
  EXPECT_EQ(f.body(), "abc");
  EXPECT_EQ(f.method(), "POST");
}

TEST(RequestFramingTest, ChunkedBodyIsDecodedByteByByte) {
  RequestFraming f(Small());
  const std::string in =
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n";
  for (char c : in) {
    ASSERT_NE(f.state(), State::kRefused) << f.refusal();
    EXPECT_EQ(f.Consume(std::string(1, c)), 1u);
  }
  ASSERT_EQ(f.state(), State::kComplete);
  EXPECT_EQ(f.body(), "abcde");
  EXPECT_EQ(f.head(), "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n");
}

TEST(RequestFramingTest, OversizedBodiesAreRefusedAsEarlyAsTheBytesAllow) {
  RequestFraming declared(Small());
  declared.Consume("POST / HTTP/1.1\r\nContent-Length: 17\r\n\r\n");
  EXPECT_EQ(declared.state(), State::kRefused);
  EXPECT_EQ(declared.refusal_status(), 413);
  EXPECT_EQ(declared.refusal(), "Content-Length 17 exceeds the limit of 16 bytes");

  RequestFraming chunked(Small());
  chunked.Consume("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n");
  EXPECT_EQ(chunked.state(), State::kBody);
  chunked.Consume(std::string(16, 'x') + "\r\n1\r\n");
  EXPECT_EQ(chunked.state(), State::kRefused);
  EXPECT_EQ(chunked.refusal_status(), 413);
  EXPECT_EQ(chunked.refusal(), "the request body exceeds 16 bytes");
}

TEST(RequestFramingTest, MalformedFramingIsRefusedWithItsStatus) {
  auto refusal = [](const std::string& in) {
    RequestFraming f(Small());
    f.Consume(in);
    return f.state() == State::kRefused ? f.refusal_status() : 0;
  };
  EXPECT_EQ(refusal("GET / HTTP/1.1\r\n" + std::string(300, 'a')), 431);
  EXPECT_EQ(refusal("GET /\r\n\r\n"), 400);
  EXPECT_EQ(refusal("GET / HTTP/1.1\r\nbad\r\n\r\n"), 400);
  EXPECT_EQ(refusal("POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n"), 400);
  EXPECT_EQ(refusal("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), 400);
  EXPECT_EQ(refusal("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), 501);
  EXPECT_EQ(refusal("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"),
            400);
  EXPECT_EQ(refusal("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
}

}  // namespace
}  // namespace sluice::daemon
