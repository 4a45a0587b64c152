// The host-tier half of tools/coldread: needs pinned memory, so a CUDA build
// and a device at run time. Built without CUDA (--config=nocuda) it answers
// Unavailable, so the tool still measures the disk.
#ifndef SLUICE_TOOLS_COLDREAD_TIER_H_
#define SLUICE_TOOLS_COLDREAD_TIER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/model_files.h"
#include "tools/coldread_lib.h"

namespace sluice::coldread {

// batches[l]: layer l's Load calls, every expert of the layer once.
using LayerBatches = std::vector<std::vector<std::vector<int32_t>>>;

// Creates a fresh (cold) HostTier over `layers` reading through io_uring
// (`uring`; Unavailable where the kernel refuses it) or with `threads`
// pread readers,
// reading in pieces of `piece_bytes` (0: whole slices), with `tier_bytes` of
// pinned slots (0: exactly one layer's experts, the least it
// accepts), then times Load over batches[0], then batches[1], ... The rate's
// bytes are the slices of the experts Load read from disk. Errors: the
// tier's (no device, pinning failed, a read failed); Unavailable without
// CUDA.
absl::StatusOr<TierRun> MeasureTier(const ModelFiles& files, const LayerExperts& layers,
                                    const LayerBatches& batches, bool uring, int threads,
                                    uint64_t piece_bytes, uint64_t tier_bytes);

}  // namespace sluice::coldread

#endif  // SLUICE_TOOLS_COLDREAD_TIER_H_
