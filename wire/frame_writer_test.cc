#include "wire/frame_writer.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "proto/sluice/worker/v1/worker.pb.h"
#include "wire/channel.h"

namespace sluice::wire {
namespace {

class FrameWriterTest : public ::testing::Test {
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

worker::v1::SupervisorMessage BigTokenize(uint64_t id, size_t bytes) {
  worker::v1::SupervisorMessage m;
  m.set_request_id(id);
  m.mutable_tokenize()->set_text(std::string(bytes, 'a' + id % 26));
  return m;
}

// The property that prevents the wedge: a send returns at once even when the
// peer is not reading and the message is far larger than the socket buffer.
TEST_F(FrameWriterTest, SendNeverBlocksOnAPeerThatDoesNotRead) {
  FrameWriter writer(sv_[0]);
  const absl::Time start = absl::Now();
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(writer.Send(BigTokenize(id, 4 << 20)).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_GT(writer.PendingBytes(), size_t{4} << 20);

  for (uint64_t id = 1; id <= 3; ++id) {
    worker::v1::SupervisorMessage in;
    auto got = ReceiveFrame(sv_[1], &in, nullptr);
    ASSERT_TRUE(got.ok() && *got) << got.status();
    EXPECT_EQ(in.request_id(), id);
    EXPECT_EQ(in.tokenize().text(), std::string(4 << 20, 'a' + id % 26));
  }
  EXPECT_TRUE(writer.Flush(absl::Seconds(5)));
  EXPECT_EQ(writer.PendingBytes(), 0u);
}

// Both ends send large messages at the same time and each reads on its own
// thread: both directions complete.
TEST_F(FrameWriterTest, BothDirectionsProgressWithLargeMessages) {
  FrameWriter a(sv_[0]);
  FrameWriter b(sv_[1]);
  ASSERT_TRUE(a.Send(BigTokenize(1, 3 << 20)).ok());
  ASSERT_TRUE(b.Send(BigTokenize(2, 3 << 20)).ok());
  std::string got_a, got_b;
  std::thread reader_a([&] {
    worker::v1::SupervisorMessage in;
    if (ReceiveFrame(sv_[0], &in, nullptr).ok()) got_a = in.tokenize().text();
  });
  worker::v1::SupervisorMessage in;
  ASSERT_TRUE(ReceiveFrame(sv_[1], &in, nullptr).ok());
  got_b = in.tokenize().text();
  reader_a.join();
  EXPECT_EQ(got_a.size(), size_t{3} << 20);
  EXPECT_EQ(got_a[0], 'c');
  EXPECT_EQ(got_b.size(), size_t{3} << 20);
  EXPECT_EQ(got_b[0], 'b');
}

TEST_F(FrameWriterTest, SendsTheIdleFrameWhenNothingElseWasWritten) {
  worker::v1::WorkerMessage beat;
  beat.mutable_heartbeat();
  FrameWriter::Options options;
  options.idle_frame = *EncodeFrame(beat);
  options.idle_interval = absl::Milliseconds(20);
  FrameWriter writer(sv_[0], options);
  for (int i = 0; i < 3; ++i) {
    worker::v1::WorkerMessage in;
    auto got = ReceiveFrame(sv_[1], &in, nullptr);
    ASSERT_TRUE(got.ok() && *got) << got.status();
    EXPECT_TRUE(in.has_heartbeat()) << in.DebugString();
  }
}

// Close() must not hang on a write that a non-reading peer blocks.
TEST_F(FrameWriterTest, CloseEndsAWriteBlockedOnAPeerThatDoesNotRead) {
  auto writer = std::make_unique<FrameWriter>(sv_[0]);
  ASSERT_TRUE(writer->Send(BigTokenize(1, 8 << 20)).ok());
  absl::SleepFor(absl::Milliseconds(50));  // let the thread block in sendmsg
  const absl::Time start = absl::Now();
  writer->Close();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(writer->Send(BigTokenize(2, 10)).code(), absl::StatusCode::kUnavailable);
}

TEST_F(FrameWriterTest, SendFailsOnceThePeerHasGone) {
  FrameWriter writer(sv_[0]);
  close(sv_[1]);
  sv_[1] = -1;
  (void)writer.Send(BigTokenize(1, 10));  // the write that discovers EPIPE
  writer.Flush(absl::Seconds(5));
  EXPECT_EQ(writer.Send(BigTokenize(2, 10)).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace sluice::wire
