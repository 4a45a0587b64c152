// Asynchronous disk reads through io_uring (liburing): the reads of a
// step's missed experts are queued the moment routing is known, the disk
// sees a deep queue without a thread per request, and the consumer waits
// for each piece on its own (so a device copy can start as soon as its piece
// has landed, not when the whole step's reads are done).
//
//   ASSIGN_OR_RETURN(auto reader, UringReader::Create({.queue_depth = 64,
//                                                      .buffers = {pinned}}));
//   const uint64_t first = reader->Submit(pieces);  // tickets first, first+1, ...
//   for (uint64_t t = first; t < first + pieces.size(); ++t) {
//     RETURN_IF_ERROR(reader->Wait(t));             // piece t has landed
//     ... copy it on ...
//   }
//
// Reads are memory::DirectRead (direct_read.h): with an O_DIRECT fd their
// offset, length and buffer must be 4096-aligned; an fd the filesystem
// would not open with O_DIRECT (tmpfs) reads through the page cache, the
// same calls. A read that reaches the end of the file after at least one
// byte stops there without error (an aligned span's tail), as ReadFully;
// short reads before the end are resubmitted for the rest.
//
// Registered buffers: the memory of `buffers` is registered with the ring
// once (pinned by the kernel; in pieces of at most 1 GiB), and reads that
// land inside it use the fixed-buffer opcode, which skips mapping the
// pages on every read. Where the kernel refuses (RLIMIT_MEMLOCK, an old
// kernel) the reader goes on with plain reads and registered() says so.
//
// Threads: Submit and Wait may be called from any threads (an internal
// mutex serialises the submission side); one reaper thread of the reader's
// own takes completions off the ring and wakes the waiters, so neither the
// submitter nor the decode thread ever blocks on the disk unless it waits.
// At most queue_depth reads are in the kernel at once; Submit queues the
// rest and the reaper tops the ring up as reads complete.
#ifndef SLUICE_MEMORY_URING_READER_H_
#define SLUICE_MEMORY_URING_READER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "memory/direct_read.h"

struct io_uring;

namespace sluice::memory {

struct UringReaderOptions {
  uint32_t queue_depth = 64;  // reads in the kernel at once (1..4096)
  // Memory that reads land in, registered with the ring (optional).
  std::vector<absl::Span<uint8_t>> buffers;
};

class UringReader {
 public:
  // Unavailable when the kernel (or a seccomp filter) refuses io_uring: the
  // caller then reads with ReadAll (direct_read.h). InvalidArgument for a
  // queue depth out of range.
  static absl::StatusOr<std::unique_ptr<UringReader>> Create(
      UringReaderOptions options);
  // Waits for every read in flight, then stops the reaper.
  ~UringReader();

  // Queues `reads` (each with a non-null dst); returns the ticket of the
  // first, the others following in order. Never blocks on the disk.
  uint64_t Submit(absl::Span<const DirectRead> reads);
  // Blocks until read `ticket` has landed: OK, or DataLoss naming its
  // offset and the OS error. Each ticket is waited at most once (its record
  // is dropped then); waiting an unknown ticket is InvalidArgument.
  absl::Status Wait(uint64_t ticket);
  // Waits for every submitted read not yet waited; one of their errors.
  absl::Status WaitAll();

  bool registered() const { return registered_; }
  uint32_t queue_depth() const { return depth_; }

 private:
  struct Pending {
    DirectRead read;
    uint64_t done = 0;  // bytes landed so far
    int buffer = -1;    // registered buffer index, or -1
    bool finished = false;
    absl::Status status;
  };
  UringReader() = default;
  // Puts queued reads into the ring while fewer than depth_ are in flight.
  void FillRing() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Reap();
  int BufferOf(const DirectRead& r) const;

  std::unique_ptr<io_uring> ring_;
  uint32_t depth_ = 0;
  bool registered_ = false;
  std::vector<absl::Span<uint8_t>> buffers_;
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> queued_ ABSL_GUARDED_BY(mu_);  // not yet in the ring
  uint32_t in_ring_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_URING_READER_H_
