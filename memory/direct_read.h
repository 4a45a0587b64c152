// Reading model shards with O_DIRECT, below any page cache: the disk tier of
// the expert cache (model/cuda/host_tier.h) and the disk-rate measurement of
// tools/coldread share the opening, alignment and read loop, so the two
// figures differ in what is read (whole tensors in big blocks against a
// call's scattered slices) and not in how a read is issued.
//
// O_DIRECT's rule: the file offset, the length and the buffer address of a
// read are multiples of kDirectAlign (4096 satisfies every block size Linux
// uses for it). A slice at an arbitrary offset is read as the aligned span
// around it (AlignedSpan); the caller's buffer must hold that span.
//
// Plain C++ (no CUDA): the buffers may be pinned or not.
#ifndef SLUICE_MEMORY_DIRECT_READ_H_
#define SLUICE_MEMORY_DIRECT_READ_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/thread_pool.h"

namespace sluice::memory {

inline constexpr uint64_t kDirectAlign = 4096;

inline uint64_t AlignDownDirect(uint64_t v) { return v / kDirectAlign * kDirectAlign; }
inline uint64_t AlignUpDirect(uint64_t v) {
  return (v + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
}

// Bytes of buffer that hold the aligned span around any slice of `length`
// bytes, wherever it starts: its aligned length plus a block of slack at
// each end (the first block may start up to 4095 bytes before the slice).
inline uint64_t DirectSpanBytes(uint64_t length) {
  return AlignUpDirect(length) + 2 * kDirectAlign;
}

// Read [offset, offset + length) of `fd` into dst.
struct DirectRead {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint8_t* dst = nullptr;
};

// The aligned read that covers [offset, offset + length) of `fd`, landing at
// `dst` (aligned); the slice itself then starts at dst + (offset % 4096).
inline DirectRead AlignedSpan(int fd, uint64_t offset, uint64_t length, uint8_t* dst) {
  const uint64_t begin = AlignDownDirect(offset);
  return {fd, begin, AlignUpDirect(offset + length) - begin, dst};
}

// Splits each read into consecutive pieces of `chunk_bytes` (rounded down to
// a multiple of kDirectAlign, at least one block), the last piece holding the
// rest; pieces keep their reads' order. Aligned reads give aligned pieces;
// a null dst stays null (for callers that supply buffers later). Why: a few
// large slices per call would otherwise leave most readers of a pool idle
// while one thread reads a whole slice; pieces are taken by whichever reader
// is free, so the disk sees a steady queue.
std::vector<DirectRead> SplitReads(absl::Span<const DirectRead> reads,
                                   uint64_t chunk_bytes);

// Reads `r` in full with pread (retrying EINTR and partial reads). A read
// that reaches the end of the file after at least one byte stops there
// without error: an aligned span may run up to 4095 bytes past the end of
// the slice it covers, which itself lies in the file. DataLoss naming the
// offset and the OS error otherwise (also when nothing could be read).
absl::Status ReadFully(const DirectRead& r);

// Reads every one of `reads` with the pool's threads, each thread taking the
// next unread item until none is left (dynamic, so unequal reads balance).
// After a failure the remaining reads are skipped and one of the errors is
// returned.
absl::Status ReadAll(ThreadPool& pool, absl::Span<const DirectRead> reads);

// A shard opened again for O_DIRECT reads.
struct DirectFd {
  int fd = -1;
  // False where the filesystem refuses O_DIRECT (tmpfs, some overlays): the
  // fd then reads through the page cache, and the caller should say so.
  bool direct = false;
};

// Opens the file behind `fd` again (through /proc/self/fd: O_DIRECT is a
// property of the open file description, so the caller's fd, e.g. the one
// behind a mapping, stays as it is). The caller closes the result.
// FailedPrecondition naming `name` and the OS error when it cannot.
absl::StatusOr<DirectFd> ReopenDirect(int fd, const std::string& name);

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_DIRECT_READ_H_
