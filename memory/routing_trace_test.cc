#include "memory/routing_trace.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace sluice::memory {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

RoutingTrace SmallTrace() {
  RoutingTrace t;
  t.header = {3, 8, 2};
  t.Add(0, 0, {1, 7});
  t.Add(0, 1, {0, 2});
  t.Add(0, 2, {5, 4});
  t.Add(1, 0, {7, 1});
  return t;
}

void ExpectSame(const RoutingTrace& a, const RoutingTrace& b) {
  EXPECT_EQ(a.header.n_layer, b.header.n_layer);
  EXPECT_EQ(a.header.n_expert, b.header.n_expert);
  EXPECT_EQ(a.header.k, b.header.k);
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(a.layer, b.layer);
  EXPECT_EQ(a.experts, b.experts);
}

TEST(RoutingTraceTest, SerializedBytesFollowTheDocumentedLayout) {
  auto bytes = SerializeRoutingTrace(SmallTrace());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  // 20-byte header + 4 records of 4 x (2 + 2) bytes.
  ASSERT_EQ(bytes->size(), 20u + 4 * 16);
  EXPECT_EQ(bytes->substr(0, 4), "SLRT");
  EXPECT_EQ((*bytes)[4], 1);   // version
  EXPECT_EQ((*bytes)[8], 3);   // n_layer
  EXPECT_EQ((*bytes)[12], 8);  // n_expert
  EXPECT_EQ((*bytes)[16], 2);  // k
  // Record 3: token 1, layer 0, experts 7, 1.
  EXPECT_EQ((*bytes)[20 + 48], 1);
  EXPECT_EQ((*bytes)[20 + 52], 0);
  EXPECT_EQ((*bytes)[20 + 56], 7);
  EXPECT_EQ((*bytes)[20 + 60], 1);
}

TEST(RoutingTraceTest, WriterThenReaderRoundTrips) {
  const std::string path = TempPath("rt.trace");
  const RoutingTrace want = SmallTrace();
  auto w = RoutingTraceWriter::Create(path, want.header);
  ASSERT_TRUE(w.ok()) << w.status();
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE((*w)->Append(want.token[i], want.layer[i], want.Experts(i)).ok());
  }
  EXPECT_EQ((*w)->records(), 4u);
  ASSERT_TRUE((*w)->Close().ok());
  auto got = ReadRoutingTrace(path);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSame(*got, want);
  EXPECT_EQ(got->Experts(2)[0], 5);

  // WriteRoutingTrace writes the same bytes.
  const std::string path2 = TempPath("rt2.trace");
  ASSERT_TRUE(WriteRoutingTrace(path2, want).ok());
  auto got2 = ReadRoutingTrace(path2);
  ASSERT_TRUE(got2.ok()) << got2.status();
  ExpectSame(*got2, want);
}

TEST(RoutingTraceTest, EmptyTraceIsJustTheHeader) {
  RoutingTrace t;
  t.header = {1, 4, 4};
  auto bytes = SerializeRoutingTrace(t);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), 20u);
  auto back = ParseRoutingTrace(*bytes, "empty");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->size(), 0u);
  EXPECT_EQ(back->header.k, 4u);
}

TEST(RoutingTraceTest, WriterRejectsRecordsThatDoNotFit) {
  auto w = RoutingTraceWriter::Create(TempPath("bad.trace"), {2, 4, 2});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->Append(0, 2, {0, 1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*w)->Append(0, 0, {0, 4}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*w)->Append(0, 0, {1}).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status rep = (*w)->Append(0, 0, {3, 3});
  EXPECT_EQ(rep.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rep.message().find("repeated"), std::string::npos) << rep;
  EXPECT_EQ((*w)->records(), 0u);
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ((*w)->Append(0, 0, {0, 1}).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RoutingTraceTest, BadHeadersAreRefused) {
  EXPECT_EQ(RoutingTraceWriter::Create(TempPath("h.trace"), {1, 4, 5})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RoutingTraceWriter::Create(TempPath("h.trace"), {0, 4, 1})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  auto dir = RoutingTraceWriter::Create("/nonexistent-dir/x.trace", {1, 4, 1});
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(dir.status().message().find("/nonexistent-dir/x.trace"),
            std::string::npos);
}

// Each malformed input: the message names the file and the byte offset.
struct Malformed {
  const char* what;
  std::string bytes;
  std::string expect;  // a substring of the message
};

TEST(RoutingTraceTest, MalformedInputNamesFileAndOffset) {
  const std::string good = *SerializeRoutingTrace(SmallTrace());
  auto with = [&](size_t offset, char value) {
    std::string b = good;
    b[offset] = value;
    return b;
  };
  const Malformed cases[] = {
      {"short", good.substr(0, 10), "10 bytes, shorter than the 20-byte"},
      {"magic", with(0, 'X'), "byte offset 0: not a routing trace"},
      {"version", with(4, 2), "byte offset 4: routing trace version 2"},
      {"k > n_expert", with(16, 9), "byte offset 8: bad routing trace header"},
      {"truncated", good.substr(0, good.size() - 3),
       "byte offset 68: truncated record (13 of 16 bytes)"},
      {"layer", with(20 + 16 + 4, 3),
       "byte offset 36 (record 1): layer 3 >= n_layer 3"},
      {"expert", with(20 + 32 + 12, 8),
       "byte offset 52 (record 2): layer 2 expert 8 out of range [0, 8)"},
      {"repeat", with(20 + 12, 1),
       "byte offset 20 (record 0): layer 0 expert 1 repeated"},
  };
  for (const Malformed& c : cases) {
    auto got = ParseRoutingTrace(c.bytes, "/x/t.trace");
    ASSERT_FALSE(got.ok()) << c.what;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << c.what;
    EXPECT_EQ(got.status().message().rfind("/x/t.trace: ", 0), 0u)
        << c.what << ": " << got.status();
    EXPECT_NE(got.status().message().find(c.expect), std::string::npos)
        << c.what << ": " << got.status();
  }
}

TEST(RoutingTraceTest, MissingFileIsNotFoundWithThePath) {
  auto got = ReadRoutingTrace(TempPath("does-not-exist.trace"));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("does-not-exist.trace"),
            std::string::npos);
}

}  // namespace
}  // namespace sluice::memory
