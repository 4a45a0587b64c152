#include "memory/uring_reader.h"

#include <liburing.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::memory {
namespace {

// The reaper's stop signal (a NOP's user data); tickets never reach it.
constexpr uint64_t kStop = std::numeric_limits<uint64_t>::max();
// io_uring's limit on one registered buffer, and a cap on one read's length
// (its field is 32 bits; the rest of a longer read is resubmitted).
constexpr uint64_t kMaxPiece = uint64_t{1} << 30;

}  // namespace

absl::StatusOr<std::unique_ptr<UringReader>> UringReader::Create(
    UringReaderOptions options) {
  if (options.queue_depth < 1 || options.queue_depth > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "uring reader: queue depth ", options.queue_depth, " not in [1, 4096]"));
  }
  auto r = std::unique_ptr<UringReader>(new UringReader());
  r->depth_ = options.queue_depth;
  auto ring = std::make_unique<io_uring>();
  const int init = io_uring_queue_init(r->depth_, ring.get(), 0);
  if (init < 0) {
    return absl::UnavailableError(
        absl::StrCat("uring reader: io_uring_queue_init: ", std::strerror(-init)));
  }
  r->ring_ = std::move(ring);
  std::vector<iovec> iov;
  for (absl::Span<uint8_t> b : options.buffers) {
    for (uint64_t at = 0; at < b.size(); at += kMaxPiece) {
      const uint64_t n = std::min<uint64_t>(kMaxPiece, b.size() - at);
      r->buffers_.push_back(b.subspan(at, n));
      iov.push_back({b.data() + at, n});
    }
  }
  if (!iov.empty()) {
    r->registered_ = io_uring_register_buffers(r->ring_.get(), iov.data(),
                                               static_cast<unsigned>(iov.size())) == 0;
    if (!r->registered_) r->buffers_.clear();  // plain reads from here on
  }
  r->reaper_ = std::thread([p = r.get()] { p->Reap(); });
  return r;
}

UringReader::~UringReader() {
  if (ring_ == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](UringReader* r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return r->in_ring_ == 0 && r->queued_.empty();
        },
        this));
    stopping_ = true;
    io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());  // the ring is empty
    io_uring_prep_nop(sqe);
    sqe->user_data = kStop;
    io_uring_submit(ring_.get());
  }
  reaper_.join();
  io_uring_queue_exit(ring_.get());
}

int UringReader::BufferOf(const DirectRead& r) const {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const uint8_t* b = buffers_[i].data();
    if (r.dst >= b && r.dst + r.length <= b + buffers_[i].size()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

uint64_t UringReader::Submit(absl::Span<const DirectRead> reads) {
  absl::MutexLock lock(&mu_);
  const uint64_t first = next_ticket_;
  for (const DirectRead& r : reads) {
    const uint64_t t = next_ticket_++;
    pending_[t] = Pending{r, 0, BufferOf(r)};
    queued_.push_back(t);
  }
  FillRing();
  return first;
}

void UringReader::FillRing() {
  bool any = false;
  while (in_ring_ < depth_ && !queued_.empty()) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
    if (sqe == nullptr) break;  // submitted below; the reaper tops up
    const uint64_t t = queued_.front();
    queued_.pop_front();
    const Pending& p = pending_[t];
    const unsigned len =
        static_cast<unsigned>(std::min(kMaxPiece, p.read.length - p.done));
    uint8_t* dst = p.read.dst + p.done;
    const uint64_t offset = p.read.offset + p.done;
    if (p.buffer >= 0) {
      io_uring_prep_read_fixed(sqe, p.read.fd, dst, len, offset, p.buffer);
    } else {
      io_uring_prep_read(sqe, p.read.fd, dst, len, offset);
    }
    sqe->user_data = t;
    ++in_ring_;
    any = true;
  }
  if (any) io_uring_submit(ring_.get());
}

void UringReader::Reap() {
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    const int w = io_uring_wait_cqe(ring_.get(), &cqe);
    if (w == -EINTR) continue;
    if (w < 0) return;  // the ring is gone: nothing can complete any more
    const uint64_t t = cqe->user_data;
    const int res = cqe->res;
    io_uring_cqe_seen(ring_.get(), cqe);
    if (t == kStop) return;
    absl::MutexLock lock(&mu_);
    --in_ring_;
    Pending& p = pending_[t];
    if (res == -EINTR || res == -EAGAIN) {
      queued_.push_front(t);
    } else if (res < 0 || (res == 0 && p.done == 0)) {
      p.finished = true;
      p.status = absl::DataLossError(absl::StrCat(
          "reading ", p.read.length, " bytes at offset ", p.read.offset, ": ",
          res < 0 ? std::strerror(-res) : "unexpected end of file"));
    } else if (res == 0) {
      p.finished = true;  // the aligned span's tail past the end of the file
    } else {
      p.done += static_cast<uint64_t>(res);
      if (p.done >= p.read.length) {
        p.finished = true;
      } else {
        queued_.push_front(t);  // a short read: the rest, first
      }
    }
    FillRing();
  }
}

absl::Status UringReader::Wait(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  if (!pending_.contains(ticket)) {
    return absl::InvalidArgumentError(
        absl::StrCat("uring reader: ticket ", ticket, " unknown or already waited"));
  }
  struct Arg {
    UringReader* self;
    uint64_t ticket;
  } arg{this, ticket};
  mu_.Await(absl::Condition(
      +[](Arg* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return a->self->pending_.find(a->ticket)->second.finished;
      },
      &arg));
  auto it = pending_.find(ticket);
  absl::Status s = std::move(it->second.status);
  pending_.erase(it);
  return s;
}

absl::Status UringReader::WaitAll() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](UringReader* r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return r->in_ring_ == 0 && r->queued_.empty();
      },
      this));
  absl::Status first;
  for (auto& [t, p] : pending_) {
    if (!p.status.ok() && first.ok()) first = p.status;
  }
  pending_.clear();
  return first;
}

}  // namespace sluice::memory
