#include "wire/channel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "proto/sluice/worker/v1/worker.pb.h"

namespace sluice::wire {
namespace {

class ChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv_), 0);
  }
  void TearDown() override {
    if (sv_[0] >= 0) close(sv_[0]);
    if (sv_[1] >= 0) close(sv_[1]);
  }
  int sv_[2] = {-1, -1};
};

TEST_F(ChannelTest, RoundTripsMessagesAndFds) {
  worker::v1::SupervisorMessage out;
  out.set_request_id(42);
  out.mutable_hello()->mutable_config()->set_model_id("tiny");
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ASSERT_TRUE(SendFrame(sv_[0], out, {pipe_fds[1]}).ok());
  worker::v1::SupervisorMessage second;
  second.set_request_id(43);
  second.mutable_cancel();
  ASSERT_TRUE(SendFrame(sv_[0], second).ok());

  worker::v1::SupervisorMessage in;
  std::vector<int> fds;
  auto got = ReceiveFrame(sv_[1], &in, &fds);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got);
  EXPECT_EQ(in.request_id(), 42u);
  EXPECT_EQ(in.hello().config().model_id(), "tiny");
  ASSERT_EQ(fds.size(), 1u);
  // The received fd is the pipe's write end: a byte written through it
  // arrives at the read end.
  ASSERT_EQ(write(fds[0], "x", 1), 1);
  char c = 0;
  ASSERT_EQ(read(pipe_fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  EXPECT_NE(fcntl(fds[0], F_GETFD) & FD_CLOEXEC, 0);

  got = ReceiveFrame(sv_[1], &in, nullptr);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(in.request_id(), 43u);
  EXPECT_TRUE(in.has_cancel());
  close(fds[0]);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST_F(ChannelTest, CleanEofIsFalse) {
  close(sv_[0]);
  sv_[0] = -1;
  worker::v1::SupervisorMessage in;
  auto got = ReceiveFrame(sv_[1], &in, nullptr);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
}

TEST_F(ChannelTest, TruncatedFrameIsDataLoss) {
  const unsigned char partial[] = {10, 0, 0, 0, 1, 2};
  ASSERT_EQ(write(sv_[0], partial, sizeof(partial)), 6);
  close(sv_[0]);
  sv_[0] = -1;
  worker::v1::SupervisorMessage in;
  auto got = ReceiveFrame(sv_[1], &in, nullptr);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("after 2 of 10"), std::string::npos)
      << got.status();
}

// A length prefix alone (200 MiB announced, nothing sent) is DataLoss; the
// reader's buffer grows only with bytes that arrive.
TEST_F(ChannelTest, AnnouncedButUnsentBodyIsDataLoss) {
  const unsigned char announce[] = {0x00, 0x00, 0x80, 0x0c, 'x'};
  ASSERT_EQ(write(sv_[0], announce, sizeof(announce)), 5);
  close(sv_[0]);
  sv_[0] = -1;
  worker::v1::SupervisorMessage in;
  auto got = ReceiveFrame(sv_[1], &in, nullptr);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got.status().message(),
            "worker channel: stream ended after 1 of 209715200 frame bytes");
}

TEST_F(ChannelTest, OversizedLengthIsRejected) {
  const unsigned char huge[] = {0xff, 0xff, 0xff, 0x7f};
  ASSERT_EQ(write(sv_[0], huge, sizeof(huge)), 4);
  worker::v1::SupervisorMessage in;
  auto got = ReceiveFrame(sv_[1], &in, nullptr);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("exceeds"), std::string::npos);
}

TEST_F(ChannelTest, UnparsableFrameIsInvalidArgument) {
  // A frame of 3 bytes that are not a valid protobuf (field 0 is illegal).
  const unsigned char bad[] = {3, 0, 0, 0, 0x00, 0x00, 0x00};
  ASSERT_EQ(write(sv_[0], bad, sizeof(bad)), 7);
  worker::v1::SupervisorMessage in;
  auto got = ReceiveFrame(sv_[1], &in, nullptr);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("does not parse as sluice.worker.v1.SupervisorMessage"),
            std::string::npos)
      << got.status();
}

// The reader's buffer grows in steps (4 KiB doubling to 1 MiB): a 3 MiB frame
// crosses every step and arrives byte for byte, and a stream cut inside a
// later step counts the bytes of all earlier ones.
TEST_F(ChannelTest, LargeFrameCrossesEveryReadStep) {
  worker::v1::WorkerMessage out;
  std::string text(3 << 20, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 26);
  out.mutable_chunk()->set_text(text);
  // The frame is larger than the socket buffer: the writer needs its own thread.
  std::thread writer([&] { ASSERT_TRUE(SendFrame(sv_[0], out).ok()); });
  worker::v1::WorkerMessage in;
  auto got = ReceiveFrame(sv_[1], &in, nullptr);
  writer.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(in.chunk().text(), text);

  const std::string frame = *EncodeFrame(out);
  std::thread cut([&] {
    ASSERT_TRUE(SendEncoded(sv_[0], std::string_view(frame).substr(0, 4 + 1500000)).ok());
    close(sv_[0]);
    sv_[0] = -1;
  });
  got = ReceiveFrame(sv_[1], &in, nullptr);
  cut.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got.status().message(),
            absl::StrCat("worker channel: stream ended after 1500000 of ",
                         frame.size() - 4, " frame bytes"));
}

}  // namespace
}  // namespace sluice::wire
