#include "tools/coldread_tier.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/cuda/host_tier.h"

namespace sluice::coldread {

absl::StatusOr<TierRun> MeasureTier(const ModelFiles& files, const LayerExperts& layers,
                                    const LayerBatches& batches, bool uring, int threads,
                                    uint64_t piece_bytes, uint64_t tier_bytes) {
  if (layers.empty() || batches.size() != layers.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "coldread: ", batches.size(), " layers of batches for ", layers.size(), " layers"));
  }
  if (tier_bytes == 0) {
    tier_bytes = static_cast<uint64_t>(layers[0][0].n_expert) * HostTier::SlotBytes(layers);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<HostTier> tier,
                   HostTier::Create(files, layers,
                                    {.bytes = tier_bytes,
                                     .threads = threads,
                                     .read_piece_bytes = piece_bytes,
                                     .reader = uring ? HostTier::Options::Reader::kUring
                                                     : HostTier::Options::Reader::kThreads}));
  TierRun run;
  run.reader = uring ? "uring" : "threads";
  run.threads = threads;
  run.piece_bytes = piece_bytes;
  std::vector<HostTier::Slices> out;
  std::vector<bool> from_disk;
  const auto start = std::chrono::steady_clock::now();
  for (size_t l = 0; l < layers.size(); ++l) {
    const uint64_t expert_bytes =
        layers[l][0].slice_bytes + layers[l][1].slice_bytes + layers[l][2].slice_bytes;
    for (const std::vector<int32_t>& batch : batches[l]) {
      run.batch = std::max(run.batch, static_cast<int>(batch.size()));
      RETURN_IF_ERROR(tier->Load(static_cast<int>(l), batch, out, from_disk));
      ++run.calls;
      run.experts_loaded += static_cast<int64_t>(batch.size());
      for (bool d : from_disk) {
        if (!d) continue;
        ++run.experts_from_disk;
        run.rate.bytes += expert_bytes;
      }
    }
  }
  run.rate.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

}  // namespace sluice::coldread
