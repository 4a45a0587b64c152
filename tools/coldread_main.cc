// coldread: the expert host tier's cold-read rate against the disk's own
// (tools/coldread_lib.h; issue 13: cold reads >= 80% of the disk's).
//
//   coldread MODEL.gguf                       disk at 1,4,8,16 threads, then
//                                             the host tier (needs a GPU)
//   coldread MODEL.gguf --disk_only           the disk only (no GPU needed)
//   coldread MODEL.gguf --layers 8 --tier_threads 8,16 --batch 10,64,512
//            --tier_piece_bytes 0,262144,1048576
//
// Prints one line per run (bytes, seconds, GB/s; the tier's ratio to the best
// disk run), then one JSON object as the last line (--json: only that).
// Exit status: 0; 1 when the host tier could not run or a read failed (the
// disk figures are still printed); 2 for bad flags or an unreadable model.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "loader/model_files.h"
#include "model/arch.h"
#include "tools/coldread_lib.h"
#include "tools/coldread_tier.h"

ABSL_FLAG(std::string, model, "", "the model (any shard of a split set); or positional");
ABSL_FLAG(int, layers, 0, "measure the first N layers' experts (0: all)");
ABSL_FLAG(std::string, disk_threads, "1,4,8,16", "disk: reader threads, one run each");
ABSL_FLAG(std::string, uring_depths, "8,32,64",
          "disk through io_uring: queue depths, one run each (empty: none)");
ABSL_FLAG(uint64_t, block_bytes, 4 << 20, "disk: bytes per read (multiple of 4096)");
ABSL_FLAG(uint64_t, disk_bytes, uint64_t{4} << 30,
          "disk: bytes read per run, from the start of the experts (0: all)");
ABSL_FLAG(bool, disk_only, false, "skip the host tier (no GPU needed)");
ABSL_FLAG(std::string, tier_readers, "uring,threads",
          "host tier: how misses are read, one tier each: uring (io_uring, depth 64) and/or "
          "threads (the pread pool of --tier_threads)");
ABSL_FLAG(std::string, tier_threads, "8",
          "host tier: reader threads, one tier each (the model uses 8)");
ABSL_FLAG(std::string, tier_piece_bytes, "1048576",
          "host tier: read piece sizes, one tier each (multiples of 4096; 0: "
          "whole slices; the model uses 1048576)");
ABSL_FLAG(std::string, batch, "",
          "host tier: experts per Load call, one run each (default: "
          "n_expert_used as decode, and n_expert as a prefill wave)");
ABSL_FLAG(uint64_t, tier_bytes, 0, "host tier: pinned bytes (0: one layer)");
ABSL_FLAG(bool, shuffle, true, "host tier: experts in random order (as routed)");
ABSL_FLAG(uint64_t, seed, 1, "host tier: the order's seed");
ABSL_FLAG(bool, json, false, "print only the JSON line");

namespace sluice::coldread {
namespace {

absl::StatusOr<std::vector<int>> Ints(const std::string& flag, const std::string& list) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    int v;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": \"", std::string(part), "\" is not a whole number >= 1"));
    }
    out.push_back(v);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return out;
}

// Read piece sizes: 0 or multiples of 4096.
absl::StatusOr<std::vector<uint64_t>> Pieces(const std::string& list) {
  std::vector<uint64_t> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    uint64_t v;
    if (!absl::SimpleAtoi(part, &v) || v % memory::kDirectAlign != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tier_piece_bytes: \"", std::string(part), "\" is not 0 or a multiple of 4096"));
    }
    out.push_back(v);
  }
  if (out.empty()) return absl::InvalidArgumentError("--tier_piece_bytes is empty");
  return out;
}

struct Setup {
  std::unique_ptr<ModelFiles> files;
  LayerExperts layers;
  std::vector<int> disk_threads, tier_threads, batches, uring_depths;
  std::vector<uint64_t> pieces;
};

// Flags and the model; every error here is exit status 2.
absl::StatusOr<Setup> Prepare(const std::string& path, Report& report) {
  Setup s;
  ASSIGN_OR_RETURN(s.disk_threads,
                   Ints("disk_threads", absl::GetFlag(FLAGS_disk_threads)));
  if (!absl::GetFlag(FLAGS_uring_depths).empty()) {
    ASSIGN_OR_RETURN(s.uring_depths,
                     Ints("uring_depths", absl::GetFlag(FLAGS_uring_depths)));
  }
  ASSIGN_OR_RETURN(s.tier_threads,
                   Ints("tier_threads", absl::GetFlag(FLAGS_tier_threads)));
  ASSIGN_OR_RETURN(s.pieces, Pieces(absl::GetFlag(FLAGS_tier_piece_bytes)));
  if (absl::GetFlag(FLAGS_block_bytes) < memory::kDirectAlign ||
      absl::GetFlag(FLAGS_block_bytes) % memory::kDirectAlign != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--block_bytes: ", absl::GetFlag(FLAGS_block_bytes),
        " is not a positive multiple of 4096"));
  }
  ASSIGN_OR_RETURN(s.files, ModelFiles::Open(path));
  ASSIGN_OR_RETURN(ArchDesc desc, DescribeModel(*s.files));
  if (desc.moe.n_expert <= 0 || desc.layers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no routed experts"));
  }
  const int n_layer = static_cast<int>(desc.layers.size());
  const int want = absl::GetFlag(FLAGS_layers);
  const int layers = want > 0 && want < n_layer ? want : n_layer;
  for (int l = 0; l < layers; ++l) {
    const MoeWeights& w = desc.layers[l].moe;
    if (w.gate.n_expert == 0) continue;  // a dense block (deepseek2's lead blocks)
    s.layers.push_back({w.gate, w.up, w.down});
    report.expert_bytes += static_cast<uint64_t>(w.gate.n_expert) *
                           (w.gate.slice_bytes + w.up.slice_bytes + w.down.slice_bytes);
  }
  const std::string batch = absl::GetFlag(FLAGS_batch);
  if (batch.empty()) {
    s.batches = {static_cast<int>(desc.moe.n_expert_used),
                 static_cast<int>(desc.moe.n_expert)};
  } else {
    ASSIGN_OR_RETURN(s.batches, Ints("batch", batch));
  }
  report.model = path;
  report.shards = s.files->shard_count();
  report.layers = layers;
  report.n_layer = n_layer;
  report.n_expert = desc.moe.n_expert;
  report.n_expert_used = desc.moe.n_expert_used;
  report.block_bytes = absl::GetFlag(FLAGS_block_bytes);
  return s;
}

absl::Status MeasureAllDisk(const Setup& s, Report& report) {
  ASSIGN_OR_RETURN(DirectShards shards, DirectShards::Open(*s.files));
  report.o_direct = shards.all_direct();
  ASSIGN_OR_RETURN(std::vector<FileRange> ranges, ExpertRanges(*s.files, s.layers));
  std::vector<int> fds;
  for (int i = 0; i < s.files->shard_count(); ++i) fds.push_back(shards.fd(i));
  const std::vector<memory::DirectRead> blocks =
      DiskBlocks(ranges, fds, report.block_bytes, absl::GetFlag(FLAGS_disk_bytes));
  for (int threads : s.disk_threads) {
    ASSIGN_OR_RETURN(Rate rate, MeasureDisk(blocks, threads));
    report.disk.push_back({threads, rate});
  }
  for (int depth : s.uring_depths) {
    absl::StatusOr<UringRun> run = MeasureDiskUring(blocks, depth);
    if (absl::IsUnavailable(run.status())) {
      report.uring_skipped = std::string(run.status().message());
      break;
    }
    if (!run.ok()) return run.status();
    report.uring.push_back(*run);
  }
  return absl::OkStatus();
}

// One tier run per (reader, piece, batch): io_uring once, the pool once per
// --tier_threads.
absl::Status MeasureAllTier(const Setup& s, Report& report) {
  struct Reader {
    bool uring;
    int threads;  // the pool's (HostTier keeps 8 for its fallback with io_uring)
  };
  std::vector<Reader> readers;
  for (absl::string_view r : absl::StrSplit(absl::GetFlag(FLAGS_tier_readers), ',')) {
    if (r == "uring") {
      readers.push_back({true, 8});
    } else if (r == "threads") {
      for (int t : s.tier_threads) readers.push_back({false, t});
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tier_readers: \"", std::string(r), "\" is not uring or threads"));
    }
  }
  // Each batch size's calls, the same for every reader and piece size.
  std::vector<LayerBatches> by_batch;
  for (int batch : s.batches) {
    LayerBatches batches;
    for (size_t l = 0; l < s.layers.size(); ++l) {
      batches.push_back(Batches(static_cast<int32_t>(s.layers[l][0].n_expert), batch,
                                absl::GetFlag(FLAGS_shuffle), absl::GetFlag(FLAGS_seed) + l));
    }
    by_batch.push_back(std::move(batches));
  }
  for (const Reader& reader : readers) {
    for (uint64_t piece : s.pieces) {
      for (const LayerBatches& batches : by_batch) {
        ASSIGN_OR_RETURN(TierRun run,
                         MeasureTier(*s.files, s.layers, batches, reader.uring, reader.threads,
                                     piece, absl::GetFlag(FLAGS_tier_bytes)));
        report.tier.push_back(run);
      }
    }
  }
  return absl::OkStatus();
}

void Print(const Report& report) {
  if (!absl::GetFlag(FLAGS_json)) std::fputs(FormatText(report).c_str(), stdout);
  std::printf("%s\n", FormatJson(report).c_str());
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage("coldread MODEL.gguf [--disk_only] [flags]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  std::string path = absl::GetFlag(FLAGS_model);
  if (path.empty() && args.size() == 2) path = args[1];
  if (path.empty() || args.size() > 2) {
    std::fprintf(stderr, "usage: coldread MODEL.gguf [--disk_only] [flags] (--help)\n");
    return 2;
  }
  Report report;
  absl::StatusOr<Setup> setup = Prepare(path, report);
  if (!setup.ok()) {
    std::fprintf(stderr, "coldread: %s\n", setup.status().ToString().c_str());
    return 2;
  }
  if (absl::Status disk = MeasureAllDisk(*setup, report); !disk.ok()) {
    std::fprintf(stderr, "coldread: %s\n", disk.ToString().c_str());
    return 1;
  }
  if (absl::GetFlag(FLAGS_disk_only)) {
    report.tier_skipped = "disk_only";
    Print(report);
    return 0;
  }
  const absl::Status tier = MeasureAllTier(*setup, report);
  if (!tier.ok()) {
    // The disk figures still stand; the tier's stop is said on both streams
    // (without a device it is the driver's error from pinning its memory).
    report.tier_skipped = tier.ToString();
    Print(report);
    std::fprintf(stderr, "coldread: host tier not measured: %s\n",
                 tier.ToString().c_str());
    return 1;
  }
  Print(report);
  return 0;
}

}  // namespace
}  // namespace sluice::coldread

int main(int argc, char** argv) { return sluice::coldread::Main(argc, argv); }
