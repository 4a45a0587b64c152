// End-to-end, issue 20 items 3, 6 and 7 (gRPC side): a symlink flipped
// between LoadModel's check and its open, file contents in load errors, a
// Tokenize answer larger than stock clients accept, a long unknown model id.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(E2eLoadEdgeTest, FlippedSymlinkNeverLoadsTheOutsideFile) {
  const std::string root = MakeTempDir("e2e-load-edge");
  const std::string dir = root + "/models";
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  // Inside: not a GGUF (refused for its magic). Outside: GGUF-looking, with
  // a tensor count only its parse would report.
  WriteFile(dir + "/inside.gguf", "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX");
  // The harness allows all of $TEST_TMPDIR: outside is a directory of /tmp.
  char outside_dir[] = "/tmp/sluice-outside-XXXXXX";
  ASSERT_NE(mkdtemp(outside_dir), nullptr);
  const std::string outside = std::string(outside_dir) + "/outside.gguf";
  WriteFile(outside, std::string("GGUF\3\0\0\0", 8) + "SECRET!!" + "COUNT!!!");
  auto d = Daemon::Start({.flags = {"--model_dir=" + dir}});
  ASSERT_TRUE(d.ok()) << d.status();
  const auto load = [&](const std::string& path) {
    grpc::ClientContext ctx;
    v1::LoadModelRequest req;
    req.set_path(path);
    v1::LoadModelResponse resp;
    return (*d)->stub().LoadModel(&ctx, req, &resp);
  };
  const auto point_at = [&](const std::string& target) {
    const std::string tmp = dir + "/.flip.tmp";
    symlink(target.c_str(), tmp.c_str());
    rename(tmp.c_str(), (dir + "/flip.gguf").c_str());
  };
  // Held still, each target gets its own answer: the check and the open agree.
  point_at(dir + "/inside.gguf");
  grpc::Status s = load(dir + "/flip.gguf");
  EXPECT_TRUE(absl::StrContains(s.error_message(), "not a GGUF file")) << s.error_message();
  point_at(outside);
  s = load(dir + "/flip.gguf");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  // Flipping while the daemon checks and opens: whichever state each load
  // sees (how often each comes up depends on the scheduler, so only the
  // outcomes are asserted, not their counts), the outside file is never parsed.
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    for (int i = 0; !stop; ++i) point_at(i % 2 ? outside : dir + "/inside.gguf");
  });
  int denied = 0, refused_inside = 0;
  std::string other;
  for (int i = 0; i < 400 && other.empty(); ++i) {
    s = load(dir + "/flip.gguf");
    if (s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      ++denied;
    } else if (absl::StrContains(s.error_message(), "not a GGUF file")) {
      ++refused_inside;
    } else {
      other = absl::StrCat(s.error_code(), ": ", s.error_message());
    }
  }
  stop = true;
  flipper.join();
  std::cout << denied << " denied, " << refused_inside << " refused as the inside file"
            << std::endl;
  EXPECT_EQ(other, "") << "the outside file was opened";
  EXPECT_EQ(denied + refused_inside, 400);
  EXPECT_EQ((*d)->Stop(), 0);
  unlink(outside.c_str());
  rmdir(outside_dir);
}

TEST(E2eLoadEdgeTest, ErrorsNameTheRuleNotTheFilesBytesAndAnswersStayReadable) {
  const std::string dir = MakeTempDir("e2e-load-edge-2");
  auto good = WriteMicroModel(dir);
  ASSERT_TRUE(good.ok()) << good.status();
  std::ifstream in(*good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find("qwen35moe");  // general.architecture's value
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 9, "TOPSECRET");
  WriteFile(dir + "/secret.gguf", bytes);
  DaemonOptions options;
  options.model_path = *good;
  options.flags = {"--model_dir=" + dir};
  options.context_length = 1 << 20;
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  {
    grpc::ClientContext ctx;
    v1::LoadModelRequest req;
    req.set_path(dir + "/secret.gguf");
    v1::LoadModelResponse resp;
    const grpc::Status s = (*d)->stub().LoadModel(&ctx, req, &resp);
    EXPECT_FALSE(s.ok());
    EXPECT_FALSE(absl::StrContains(s.error_message(), "TOPSECRET")) << s.error_message();
    EXPECT_TRUE(absl::StrContains((*d)->Log(), "TOPSECRET")) << "the log keeps the detail";
  }
  {
    grpc::ClientContext ctx;
    v1::TokenizeRequest req;
    std::string text;
    while (text.size() < (1 << 20) - 16) text += "a b c d e f g h ";
    req.set_text(text);
    v1::TokenizeResponse resp;
    const grpc::Status s = (*d)->stub().Tokenize(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_TRUE(absl::StrContains(s.error_message(), "a stock gRPC client accepts"))
        << s.error_message();
  }
  {
    v1::GenerateRequest req = GreedyRequest("hi", 1);
    req.set_model_id(std::string(256, 'm'));
    const Generation g = RunGenerate((*d)->stub(), req);
    EXPECT_EQ(g.status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(g.status.error_message(), "... (256 bytes)"))
        << g.status.error_message();
    EXPECT_LT(g.status.error_message().size(), 120u) << g.status.error_message();
  }
  EXPECT_EQ((*d)->Stop(), 0);
}

}  // namespace
}  // namespace sluice::testing
