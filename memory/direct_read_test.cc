#include "memory/direct_read.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::memory {
namespace {

// An aligned buffer, as O_DIRECT needs.
struct Aligned {
  explicit Aligned(size_t bytes) {
    EXPECT_EQ(posix_memalign(&p, kDirectAlign, bytes), 0);
    std::memset(p, 0xee, bytes);
  }
  ~Aligned() { free(p); }
  uint8_t* get() const { return static_cast<uint8_t*>(p); }
  void* p = nullptr;
};

// A file of `bytes` bytes where byte i is (i * 7 + i / 4096) & 0xff, so a
// piece read from the wrong offset shows.
std::string WriteFile(const std::string& name, size_t bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(std::fwrite(data.data(), 1, bytes, f), bytes);
  std::fclose(f);
  return path;
}

uint8_t Expected(uint64_t i) { return static_cast<uint8_t>(i * 7 + i / 4096); }

TEST(DirectReadTest, AlignedSpanCoversTheSliceAndStaysInItsBuffer) {
  uint8_t* dst = reinterpret_cast<uint8_t*>(uintptr_t{0x100000});
  const DirectRead r = AlignedSpan(3, 10000, 5000, dst);
  EXPECT_EQ(r.offset, 8192u);          // 10000 rounded down
  EXPECT_EQ(r.length, 16384u - 8192);  // to 15000 rounded up
  EXPECT_EQ(r.dst, dst);
  // The worst case: a slice starting one byte before a block boundary.
  for (uint64_t len : {1ull, 4095ull, 4096ull, 1000000ull}) {
    const DirectRead w = AlignedSpan(3, 4095, len, dst);
    EXPECT_LE(w.length, DirectSpanBytes(len)) << len;
    EXPECT_EQ(w.length % kDirectAlign, 0u);
  }
}

TEST(DirectReadTest, SplitReadsGivesExactAlignedPiecesInOrder) {
  uint8_t* a = reinterpret_cast<uint8_t*>(uintptr_t{0x200000});
  uint8_t* b = reinterpret_cast<uint8_t*>(uintptr_t{0x800000});
  const std::vector<DirectRead> in = {{5, 4096, 3 * 4096 + 8192, a},  // 5 blocks
                                      {6, 0, 4096, b}};
  // 8192 + 100: rounded down to two blocks.
  const std::vector<DirectRead> out = SplitReads(in, 8192 + 100);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].fd, 5);
  EXPECT_EQ(out[0].offset, 4096u);
  EXPECT_EQ(out[0].length, 8192u);
  EXPECT_EQ(out[0].dst, a);
  EXPECT_EQ(out[1].offset, 4096u + 8192);
  EXPECT_EQ(out[1].length, 8192u);
  EXPECT_EQ(out[1].dst, a + 8192);
  EXPECT_EQ(out[2].offset, 4096u + 16384);
  EXPECT_EQ(out[2].length, 4096u);  // the rest
  EXPECT_EQ(out[2].dst, a + 16384);
  EXPECT_EQ(out[3].fd, 6);
  EXPECT_EQ(out[3].offset, 0u);
  EXPECT_EQ(out[3].length, 4096u);
  EXPECT_EQ(out[3].dst, b);
}

TEST(DirectReadTest, SplitReadsCoversEveryByteOnceAtAnyChunkSize) {
  uint8_t* a = reinterpret_cast<uint8_t*>(uintptr_t{0x400000});
  const DirectRead r{1, 40960, 37 * 4096, a};
  for (uint64_t chunk : {0ull, 1ull, 4096ull, 5000ull, 65536ull, 1ull << 30}) {
    const std::vector<DirectRead> out = SplitReads({r}, chunk);
    uint64_t next = r.offset;
    for (const DirectRead& p : out) {
      EXPECT_EQ(p.offset, next) << chunk;  // contiguous, no gap or overlap
      EXPECT_EQ(p.offset % kDirectAlign, 0u);
      EXPECT_EQ(p.length % kDirectAlign, 0u);
      EXPECT_GT(p.length, 0u);
      EXPECT_EQ(p.dst, a + (p.offset - r.offset));
      next += p.length;
    }
    EXPECT_EQ(next, r.offset + r.length) << chunk;
  }
  // Chunks below one block become one block; above the read, one piece.
  EXPECT_EQ(SplitReads({r}, 1).size(), 37u);
  EXPECT_EQ(SplitReads({r}, 1ull << 30).size(), 1u);
}

TEST(DirectReadTest, ReadAllReadsSlicesAcrossTheEndOfTheFile) {
  // 10 blocks and 100 bytes: the last slice's aligned span runs past the end.
  const uint64_t size = 10 * 4096 + 100;
  const std::string path = WriteFile("direct_read_eof.bin", size);
  const int plain = open(path.c_str(), O_RDONLY);
  ASSERT_GE(plain, 0);
  absl::StatusOr<DirectFd> fd = ReopenDirect(plain, path);
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(plain);

  // Three slices at unaligned offsets; the third ends at the end of the file.
  const uint64_t offsets[3] = {5, 3 * 4096 + 17, size - 6000};
  const uint64_t lengths[3] = {9000, 4096, 6000};
  Aligned buf(3 * DirectSpanBytes(9000));
  std::vector<DirectRead> spans;
  for (int i = 0; i < 3; ++i) {
    spans.push_back(AlignedSpan(fd->fd, offsets[i], lengths[i],
                                buf.get() + i * DirectSpanBytes(9000)));
  }
  ThreadPool pool(3);
  ASSERT_TRUE(ReadAll(pool, SplitReads(spans, 4096)).ok());
  for (int i = 0; i < 3; ++i) {
    const uint8_t* slice = spans[i].dst + (offsets[i] - spans[i].offset);
    for (uint64_t j = 0; j < lengths[i]; ++j) {
      ASSERT_EQ(slice[j], Expected(offsets[i] + j)) << "slice " << i << " byte " << j;
    }
  }
  close(fd->fd);
}

TEST(DirectReadTest, ReadFullyNamesTheOffsetOfAFailedRead) {
  Aligned buf(4096);
  const absl::Status bad = ReadFully({-1, 8192, 4096, buf.get()});
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bad.message(), "reading 4096 bytes at offset 8192: Bad file descriptor");

  // A read wholly past the end is an error: no slice lies there.
  const std::string path = WriteFile("direct_read_short.bin", 4096);
  const int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  const absl::Status past = ReadFully({fd, 8192, 4096, buf.get()});
  EXPECT_EQ(past.message(), "reading 4096 bytes at offset 8192: unexpected end of file");
  ThreadPool pool(2);
  const absl::Status all = ReadAll(pool, {{fd, 0, 4096, buf.get()}, {fd, 8192, 4096, buf.get()}});
  EXPECT_EQ(all.code(), absl::StatusCode::kDataLoss);
  close(fd);
}

TEST(DirectReadTest, ReopenDirectNamesAFileItCannotOpen) {
  absl::StatusOr<DirectFd> fd = ReopenDirect(-1, "shard-1.gguf");
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fd.status().message(),
            "cannot reopen shard-1.gguf with O_DIRECT: No such file or directory");
}

}  // namespace
}  // namespace sluice::memory
