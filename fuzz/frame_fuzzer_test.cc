// Replays fixed inputs through the frame decoder's fuzz entry point (without
// libFuzzer), and checks the decoder's verdict on each directly.
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "proto/sluice/worker/v1/worker.pb.h"
#include "wire/channel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace sluice {
namespace {

std::string Frame(const std::string& body) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((body.size() >> (8 * i)) & 0xff);
  return out + body;
}

// The status of decoding `bytes` as one WorkerMessage.
absl::StatusCode Decode(const std::string& bytes) {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  EXPECT_EQ(write(sv[0], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  shutdown(sv[0], SHUT_WR);
  worker::v1::WorkerMessage msg;
  absl::StatusOr<bool> got = wire::ReceiveFrame(sv[1], &msg, nullptr);
  close(sv[0]);
  close(sv[1]);
  return got.status().code();
}

TEST(FrameFuzzerTest, DecoderVerdicts) {
  worker::v1::WorkerMessage beat;
  beat.mutable_heartbeat();
  EXPECT_EQ(Decode(Frame(beat.SerializeAsString())), absl::StatusCode::kOk);
  EXPECT_EQ(Decode(""), absl::StatusCode::kOk);  // a clean end of stream
  EXPECT_EQ(Decode(std::string("\x05\x00", 2)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Decode(std::string("\x05\x00\x00\x00\x0a", 5)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Decode(std::string("\xff\xff\xff\xff", 4)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Decode(Frame("\x12\x05\x0a\x03\xc3\x28z")), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Decode(Frame("\xff\xff")), absl::StatusCode::kInvalidArgument);
}

TEST(FrameFuzzerTest, EntryPointSurvivesHandMadeInputs) {
  worker::v1::WorkerMessage chunk;
  chunk.set_request_id(7);
  chunk.mutable_chunk()->add_token_ids(3);
  chunk.mutable_chunk()->set_text("hi");
  const std::string good = Frame(chunk.SerializeAsString());
  const std::string inputs[] = {
      "",
      good,
      good + good + good,
      good.substr(0, good.size() - 1),
      std::string("\x00\x00\x00\x00", 4) + good,
      std::string("\xff\xff\xff\x7f", 4),
      std::string(100, '\x01'),
      Frame(std::string(1000, '\xff')),
  };
  for (const std::string& in : inputs) {
    EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size()), 0);
  }
}

// The committed seeds (fuzz/make_text_seeds.sh) are streams of valid frames,
// WorkerMessage and SupervisorMessage alternately, as the entry point reads
// them: each decodes to its clean end with at least two frames.
TEST(FrameFuzzerTest, SeedsAreWholeValidStreams) {
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator("fuzz/corpus_frame")) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string data = bytes.str();
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ASSERT_EQ(write(sv[0], data.data(), data.size()), static_cast<ssize_t>(data.size()));
    shutdown(sv[0], SHUT_WR);
    int frames = 0;
    for (;; ++frames) {
      worker::v1::WorkerMessage w;
      worker::v1::SupervisorMessage s;
      google::protobuf::MessageLite* msg =
          frames % 2 == 0 ? static_cast<google::protobuf::MessageLite*>(&w) : &s;
      absl::StatusOr<bool> got = wire::ReceiveFrame(sv[1], msg, nullptr);
      ASSERT_TRUE(got.ok()) << entry.path() << " frame " << frames << ": " << got.status();
      if (!*got) break;
    }
    close(sv[0]);
    close(sv[1]);
    EXPECT_GE(frames, 2) << entry.path();
    ++seeds;
  }
  EXPECT_EQ(seeds, 5);
}

}  // namespace
}  // namespace sluice
