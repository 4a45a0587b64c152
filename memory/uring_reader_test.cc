#include "memory/uring_reader.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"

namespace sluice::memory {
namespace {

// Byte i of the test file: differs between neighbouring blocks and pieces,
// so a piece landed at the wrong place or from the wrong offset shows.
uint8_t Pattern(uint64_t i) { return static_cast<uint8_t>((i * 13) ^ (i >> 12)); }

class UringReaderTest : public ::testing::Test {
 protected:
  // A file of `bytes` in the test's temporary directory, reopened with
  // O_DIRECT where the filesystem allows it.
  void SetUp() override { Make(::testing::TempDir()); }
  // The file in `dir`, reopened (direct_ says whether O_DIRECT was had).
  void Make(const std::string& dir) {
    if (fd_ >= 0) close(fd_);
    free(buffer_);
    path_ = dir + "/uring_reader_test." + std::to_string(getpid()) + ".bin";
    std::vector<uint8_t> data(kFileBytes);
    for (uint64_t i = 0; i < kFileBytes; ++i) data[i] = Pattern(i);
    FILE* f = std::fopen(path_.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
    std::fclose(f);
    const int plain = open(path_.c_str(), O_RDONLY);
    ASSERT_GE(plain, 0);
    auto fd = ReopenDirect(plain, path_);
    close(plain);
    ASSERT_TRUE(fd.ok()) << fd.status();
    fd_ = fd->fd;
    direct_ = fd->direct;
    std::printf("%s: O_DIRECT %s\n", path_.c_str(), fd->direct ? "yes" : "no (page cache)");
    void* raw = nullptr;
    ASSERT_EQ(posix_memalign(&raw, kDirectAlign, kBufferBytes), 0);
    buffer_ = static_cast<uint8_t*>(raw);
    std::fill(buffer_, buffer_ + kBufferBytes, 0xee);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    free(buffer_);
    unlink(path_.c_str());
  }
  // A reader over the test's buffer; skips the test where io_uring is off.
  std::unique_ptr<UringReader> Reader(uint32_t depth) {
    auto r = UringReader::Create({.queue_depth = depth,
                                  .buffers = {absl::MakeSpan(buffer_, kBufferBytes)}});
    if (absl::IsUnavailable(r.status())) return nullptr;
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : nullptr;
  }
  // Whether [dst, dst + n) holds the file's bytes from `offset`.
  static bool Holds(const uint8_t* dst, uint64_t offset, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) {
      if (dst[i] != Pattern(offset + i)) return false;
    }
    return true;
  }

  // 6 MiB and a ragged tail, so the last aligned span runs past the end.
  static constexpr uint64_t kFileBytes = (6u << 20) + 1234;
  // Under RLIMIT_MEMLOCK's usual 8 MiB (a sandbox without CAP_IPC_LOCK),
  // so the ring can register it.
  static constexpr uint64_t kBufferBytes = (6u << 20) + (512u << 10);
  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
  uint8_t* buffer_ = nullptr;
};

#define SKIP_WITHOUT_URING(r)                                         \
  if ((r) == nullptr) GTEST_SKIP() << "io_uring refused on this host"

// 1 MiB pieces of the whole file submitted in shuffled order over a queue
// shallower than their number; each piece is checked the moment its own
// Wait returns, before any later one is waited.
TEST_F(UringReaderTest, PiecesLandWhereTheyBelongAndCanBeWaitedOneByOne) {
  auto reader = Reader(/*depth=*/4);
  SKIP_WITHOUT_URING(reader);
  EXPECT_TRUE(reader->registered());
  const DirectRead whole = AlignedSpan(fd_, 0, kFileBytes, buffer_);
  std::vector<DirectRead> pieces = SplitReads({whole}, 1u << 20);
  ASSERT_EQ(pieces.size(), 7u);  // 6 full pieces and the 4 KiB tail
  std::mt19937 rng(5);
  std::shuffle(pieces.begin(), pieces.end(), rng);
  const uint64_t first = reader->Submit(pieces);
  for (size_t i = 0; i < pieces.size(); ++i) {
    ASSERT_TRUE(reader->Wait(first + i).ok());
    const DirectRead& p = pieces[i];
    const uint64_t n = std::min(p.length, kFileBytes - p.offset);  // tail
    EXPECT_TRUE(Holds(p.dst, p.offset, n)) << "piece at " << p.offset;
  }
  // Waited once each: a second wait is refused.
  EXPECT_EQ(reader->Wait(first).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(reader->WaitAll().ok());
}

// Scattered slices (as a step's missed experts are), each as its aligned
// span, into a buffer the ring did not register (plain reads), from several
// submitting threads at once.
TEST_F(UringReaderTest, ScatteredSpansFromSeveralThreads) {
  auto reader = Reader(/*depth=*/16);
  SKIP_WITHOUT_URING(reader);
  constexpr int kThreads = 4, kSlices = 24;
  constexpr uint64_t kSlot = 64 * 1024 + 2 * kDirectAlign;
  std::vector<uint8_t*> own(kThreads);
  for (uint8_t*& p : own) {
    void* raw = nullptr;
    ASSERT_EQ(posix_memalign(&raw, kDirectAlign, kSlices * kSlot), 0);
    p = static_cast<uint8_t*>(raw);
  }
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<DirectRead> spans;
      std::vector<uint64_t> offsets;
      for (int s = 0; s < kSlices; ++s) {
        const uint64_t offset = (static_cast<uint64_t>(s) * 251977 + t * 4099) % (5u << 20);
        offsets.push_back(offset);
        spans.push_back(AlignedSpan(fd_, offset, 60000, own[t] + s * kSlot));
      }
      const uint64_t first = reader->Submit(spans);
      for (int s = 0; s < kSlices; ++s) {
        if (!reader->Wait(first + s).ok() ||
            !Holds(spans[s].dst + offsets[s] % kDirectAlign, offsets[s], 60000)) {
          ++wrong[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  for (uint8_t* p : own) free(p);
}

TEST_F(UringReaderTest, ErrorsNameTheOffsetAndOthersStillLand) {
  auto reader = Reader(/*depth=*/8);
  SKIP_WITHOUT_URING(reader);
  const uint64_t past = AlignUpDirect(kFileBytes) + (1u << 20);
  std::vector<DirectRead> reads = {
      {fd_, 0, 8192, buffer_},               // fine
      {fd_, past, 4096, buffer_ + 8192},     // past the end: nothing read
      {-1, 0, 4096, buffer_ + 16384},        // a bad fd
      {fd_, 1u << 20, 4096, buffer_ + 20480}};
  const uint64_t first = reader->Submit(reads);
  EXPECT_TRUE(reader->Wait(first).ok());
  const absl::Status eof = reader->Wait(first + 1);
  EXPECT_EQ(eof.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(eof.message().find(absl::StrCat("at offset ", past)), std::string::npos) << eof;
  EXPECT_NE(eof.message().find("end of file"), std::string::npos) << eof;
  const absl::Status badf = reader->Wait(first + 2);
  EXPECT_EQ(badf.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(badf.message().find(std::strerror(EBADF)), std::string::npos) << badf;
  EXPECT_TRUE(reader->Wait(first + 3).ok());
  EXPECT_TRUE(Holds(buffer_ + 20480, 1u << 20, 4096));
  // WaitAll reports an error left unwaited.
  reader->Submit({{-1, 0, 4096, buffer_}});
  EXPECT_EQ(reader->WaitAll().code(), absl::StatusCode::kDataLoss);
}

// tmpfs refuses O_DIRECT: the same reads go through the page cache.
TEST_F(UringReaderTest, TmpfsFallsBackToThePageCache) {
  if (access("/dev/shm", W_OK) != 0) GTEST_SKIP() << "no writable /dev/shm";
  Make("/dev/shm");
  if (direct_) GTEST_SKIP() << "/dev/shm accepts O_DIRECT here";
  auto reader = Reader(/*depth=*/8);
  SKIP_WITHOUT_URING(reader);
  const std::vector<DirectRead> pieces =
      SplitReads({AlignedSpan(fd_, 0, kFileBytes, buffer_)}, 1u << 20);
  const uint64_t first = reader->Submit(pieces);
  for (size_t i = 0; i < pieces.size(); ++i) ASSERT_TRUE(reader->Wait(first + i).ok());
  EXPECT_TRUE(Holds(buffer_, 0, kFileBytes));
}

TEST(UringReaderCreateTest, RejectsABadDepth) {
  EXPECT_EQ(UringReader::Create({.queue_depth = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UringReader::Create({.queue_depth = 5000}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::memory
