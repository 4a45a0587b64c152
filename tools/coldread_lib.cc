#include "tools/coldread_lib.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "memory/uring_reader.h"

namespace sluice::coldread {

std::vector<FileRange> MergeRanges(std::vector<FileRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const FileRange& a, const FileRange& b) {
    return a.shard != b.shard ? a.shard < b.shard : a.begin < b.begin;
  });
  std::vector<FileRange> out;
  for (const FileRange& r : ranges) {
    if (r.end <= r.begin) continue;
    if (!out.empty() && out.back().shard == r.shard && r.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

absl::StatusOr<std::vector<FileRange>> ExpertRanges(const ModelFiles& files,
                                                    const LayerExperts& layers) {
  std::vector<FileRange> ranges;
  for (const std::array<ExpertMatrix, 3>& l : layers) {
    for (const ExpertMatrix& m : l) {
      const uint64_t bytes = static_cast<uint64_t>(m.n_expert) * m.slice_bytes;
      int shard = -1;
      for (int i = 0; i < files.shard_count(); ++i) {
        const ShardInfo& s = files.shard(i);
        if (m.data >= s.base && m.data + bytes <= s.base + s.size) shard = i;
      }
      if (shard < 0) {
        return absl::InvalidArgumentError(
            "coldread: an expert tensor lies outside every shard's mapping");
      }
      const uint64_t begin = static_cast<uint64_t>(m.data - files.shard(shard).base);
      ranges.push_back({shard, begin, begin + bytes});
    }
  }
  return MergeRanges(std::move(ranges));
}

absl::StatusOr<DirectShards> DirectShards::Open(const ModelFiles& files) {
  DirectShards out;
  for (const ShardFd& s : files.fds()) {
    ASSIGN_OR_RETURN(memory::DirectFd fd, memory::ReopenDirect(s.fd, s.name));
    out.fds_.push_back(fd);
  }
  return out;
}

DirectShards::~DirectShards() {
  for (const memory::DirectFd& f : fds_) close(f.fd);
}

bool DirectShards::all_direct() const {
  return std::all_of(fds_.begin(), fds_.end(),
                     [](const memory::DirectFd& f) { return f.direct; });
}

std::vector<memory::DirectRead> DiskBlocks(absl::Span<const FileRange> ranges,
                                           absl::Span<const int> fds,
                                           uint64_t block_bytes, uint64_t max_bytes) {
  std::vector<memory::DirectRead> spans;
  for (const FileRange& r : ranges) {
    spans.push_back(memory::AlignedSpan(fds[r.shard], r.begin, r.end - r.begin, nullptr));
  }
  std::vector<memory::DirectRead> blocks = memory::SplitReads(spans, block_bytes);
  if (max_bytes == 0) return blocks;
  uint64_t covered = 0;
  size_t n = 0;
  while (n < blocks.size() && covered < max_bytes) covered += blocks[n++].length;
  blocks.resize(n);
  return blocks;
}

namespace {

// The blocks' bytes (seconds still 0), and the largest block (at least one
// aligned block) in `largest`: the size of one reader's buffer.
Rate BlockBytes(absl::Span<const memory::DirectRead> blocks, uint64_t& largest) {
  largest = memory::kDirectAlign;
  Rate rate;
  for (const memory::DirectRead& b : blocks) {
    largest = std::max(largest, b.length);
    rate.bytes += b.length;
  }
  return rate;
}

}  // namespace

absl::StatusOr<Rate> MeasureDisk(absl::Span<const memory::DirectRead> blocks,
                                 int threads) {
  threads = std::max(1, threads);
  uint64_t largest = 0;
  Rate rate = BlockBytes(blocks, largest);
  // One buffer per thread: a block is read whole before the thread takes the
  // next, so no two reads share memory.
  std::vector<uint8_t*> buffers(threads, nullptr);
  for (uint8_t*& p : buffers) {
    void* raw = nullptr;
    if (posix_memalign(&raw, memory::kDirectAlign, largest) != 0) {
      for (uint8_t* q : buffers) free(q);
      return absl::ResourceExhaustedError(
          absl::StrCat("coldread: cannot allocate a ", largest, "-byte buffer"));
    }
    p = static_cast<uint8_t*>(raw);
  }
  ThreadPool pool(threads);
  std::atomic<size_t> next{0};
  std::vector<absl::Status> errors(threads);
  const auto start = std::chrono::steady_clock::now();
  pool.ParallelFor(threads, [&](int64_t b, int64_t e) {
    for (int64_t me = b; me < e; ++me) {
      for (size_t i = next.fetch_add(1); i < blocks.size(); i = next.fetch_add(1)) {
        memory::DirectRead r = blocks[i];
        r.dst = buffers[me];
        errors[me] = memory::ReadFully(r);
        if (!errors[me].ok()) return;
      }
    }
  });
  rate.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (uint8_t* p : buffers) free(p);
  for (const absl::Status& s : errors) {
    if (!s.ok()) return absl::DataLossError(absl::StrCat("coldread: disk: ", s.message()));
  }
  return rate;
}

absl::StatusOr<UringRun> MeasureDiskUring(absl::Span<const memory::DirectRead> blocks,
                                          int depth) {
  depth = std::max(1, depth);
  uint64_t largest = 0;
  Rate rate = BlockBytes(blocks, largest);
  void* raw = nullptr;
  const uint64_t total = largest * static_cast<uint64_t>(depth);
  if (posix_memalign(&raw, memory::kDirectAlign, total) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("coldread: cannot allocate ", total, " bytes of buffers"));
  }
  std::unique_ptr<uint8_t, decltype(&free)> buffers(static_cast<uint8_t*>(raw), &free);
  ASSIGN_OR_RETURN(std::unique_ptr<memory::UringReader> reader,
                   memory::UringReader::Create(
                       {.queue_depth = static_cast<uint32_t>(depth),
                        .buffers = {absl::MakeSpan(buffers.get(), total)}}));
  const auto start = std::chrono::steady_clock::now();
  uint64_t first = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    // Block i lands in buffer i % depth, free once block i - depth is in.
    if (i >= static_cast<size_t>(depth)) {
      absl::Status s = reader->Wait(first + i - depth);
      if (!s.ok()) return absl::DataLossError(absl::StrCat("coldread: uring: ", s.message()));
    }
    memory::DirectRead r = blocks[i];
    r.dst = buffers.get() + (i % depth) * largest;
    const uint64_t t = reader->Submit({r});
    if (i == 0) first = t;
  }
  absl::Status s = reader->WaitAll();
  rate.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!s.ok()) return absl::DataLossError(absl::StrCat("coldread: uring: ", s.message()));
  return UringRun{depth, reader->registered(), rate};
}

std::vector<std::vector<int32_t>> Batches(int32_t n_expert, int32_t k, bool shuffle,
                                          uint64_t seed) {
  std::vector<int32_t> order(std::max(0, n_expert));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle) {
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
  }
  k = std::max(1, k);
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < order.size(); i += k) {
    out.emplace_back(order.begin() + i, order.begin() + std::min(order.size(), i + k));
  }
  return out;
}

const DiskRun* BestDisk(const Report& r) {
  const DiskRun* best = nullptr;
  for (const DiskRun& d : r.disk) {
    if (best == nullptr || d.rate.gbps() > best->rate.gbps()) best = &d;
  }
  return best;
}

namespace {

double Ratio(const Report& r, const TierRun& t) {
  const DiskRun* best = BestDisk(r);
  return best != nullptr && best->rate.gbps() > 0 ? t.rate.gbps() / best->rate.gbps() : 0;
}

std::string RateJson(const Rate& rate) {
  return absl::StrFormat("\"bytes\": %d, \"seconds\": %.6f, \"gbps\": %.4f", rate.bytes,
                         rate.seconds, rate.gbps());
}

// A JSON string (the model path is the only free text besides errors).
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string FormatText(const Report& r) {
  std::string out = absl::StrFormat(
      "model: %s (%d shard%s), %d of %d layers, %d experts, %d used per token, "
      "expert bytes %d, o_direct %s\n",
      r.model, r.shards, r.shards == 1 ? "" : "s", r.layers, r.n_layer, r.n_expert,
      r.n_expert_used, r.expert_bytes, r.o_direct ? "yes" : "NO (page cache)");
  for (const DiskRun& d : r.disk) {
    out += absl::StrFormat("disk threads=%d block=%d bytes=%d seconds=%.3f GB/s=%.3f\n",
                           d.threads, r.block_bytes, d.rate.bytes, d.rate.seconds,
                           d.rate.gbps());
  }
  const DiskRun* best = BestDisk(r);
  if (best != nullptr) {
    out += absl::StrFormat("disk best threads=%d GB/s=%.3f\n", best->threads,
                           best->rate.gbps());
  }
  for (const UringRun& u : r.uring) {
    out += absl::StrFormat(
        "uring depth=%d registered=%s block=%d bytes=%d seconds=%.3f GB/s=%.3f "
        "vs_best_threads=%.3f\n",
        u.depth, u.registered ? "yes" : "no", r.block_bytes, u.rate.bytes, u.rate.seconds,
        u.rate.gbps(),
        best != nullptr && best->rate.gbps() > 0 ? u.rate.gbps() / best->rate.gbps() : 0);
  }
  if (!r.uring_skipped.empty()) out += absl::StrCat("uring skipped: ", r.uring_skipped, "\n");
  for (const TierRun& t : r.tier) {
    out += absl::StrFormat(
        "tier batch=%d (%s) reader=%s threads=%d piece=%d calls=%d experts_from_disk=%d/%d "
        "bytes=%d seconds=%.3f GB/s=%.3f ratio=%.3f\n",
        t.batch, t.batch >= r.n_expert ? "layer" : "routing", t.reader, t.threads,
        t.piece_bytes,
        t.calls,
        t.experts_from_disk, t.experts_loaded, t.rate.bytes, t.rate.seconds,
        t.rate.gbps(), Ratio(r, t));
  }
  if (!r.tier_skipped.empty()) out += absl::StrCat("tier skipped: ", r.tier_skipped, "\n");
  return out;
}

std::string FormatJson(const Report& r) {
  std::string out = absl::StrFormat(
      "{\"model\": %s, \"shards\": %d, \"layers\": %d, \"n_layer\": %d, "
      "\"n_expert\": %d, \"n_expert_used\": %d, \"expert_bytes\": %d, "
      "\"o_direct\": %s, \"block_bytes\": %d, \"disk\": [",
      Quote(r.model), r.shards, r.layers, r.n_layer, r.n_expert, r.n_expert_used,
      r.expert_bytes, r.o_direct ? "true" : "false", r.block_bytes);
  for (size_t i = 0; i < r.disk.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", "{\"threads\": ", r.disk[i].threads, ", ",
                    RateJson(r.disk[i].rate), "}");
  }
  out += "], \"disk_best\": ";
  const DiskRun* best = BestDisk(r);
  if (best == nullptr) {
    out += "null";
  } else {
    absl::StrAppend(&out, "{\"threads\": ", best->threads, ", ", RateJson(best->rate), "}");
  }
  out += ", \"uring\": [";
  for (size_t i = 0; i < r.uring.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", "{\"depth\": ", r.uring[i].depth,
                    ", \"registered\": ", r.uring[i].registered ? "true" : "false", ", ",
                    RateJson(r.uring[i].rate), "}");
  }
  absl::StrAppend(&out, "], \"uring_skipped\": ",
                  r.uring_skipped.empty() ? "null" : Quote(r.uring_skipped));
  out += ", \"tier\": [";
  for (size_t i = 0; i < r.tier.size(); ++i) {
    const TierRun& t = r.tier[i];
    absl::StrAppend(&out, i ? ", " : "",
                    absl::StrFormat("{\"batch\": %d, \"reader\": %s, \"threads\": %d, "
                                    "\"piece_bytes\": %d, \"calls\": %d, "
                                    "\"experts_from_disk\": %d, \"experts_loaded\": %d, "
                                    "%s, \"ratio\": %.4f}",
                                    t.batch, Quote(t.reader), t.threads, t.piece_bytes, t.calls,
                                    t.experts_from_disk,
                                    t.experts_loaded, RateJson(t.rate), Ratio(r, t)));
  }
  absl::StrAppend(&out, "], \"tier_skipped\": ",
                  r.tier_skipped.empty() ? "null" : Quote(r.tier_skipped), "}");
  return out;
}

}  // namespace sluice::coldread
