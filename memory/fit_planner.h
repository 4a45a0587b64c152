// The fit planner: where a model's bytes go before anything is loaded
// (issue 13, "Fit planner").
//
//   device = dense + expert arena (or every expert)
//            + (recurrent state + KV x context) x sequences
//            + workspace + margin
//   host   = pinned host tier + staging + page cache the mapping must keep
//            + margin
//
// Three modes, chosen from the numbers:
//   kAllResident     every routed expert on the device: it fits there with
//                    the margin. No slot cache.
//   kArenaRegistered a device arena of equal slots; the expert bytes fit in
//                    host RAM, so the mapping is registered in large windows
//                    once and misses DMA straight from the page cache
//                    (~50 GB/s measured, DESIGN.md). Those pages must stay in
//                    the page cache: they are counted as host memory.
//   kArenaHostTier   a device arena; the experts do not fit in host RAM (or a
//                    host tier was asked for): a pinned host cache of expert
//                    slices in front of O_DIRECT disk reads into pinned
//                    staging buffers (~1.5 GB/s cold).
//
// Requests (FitRequest, the settings of EngineOptions::experts) are honoured
// or refused, never silently shrunk: a configuration that would oversubscribe
// the device or the host is RESOURCE_EXHAUSTED with a message that gives the
// numbers and a configuration that fits. Without a request the planner
// chooses: all resident when that fits with the margin, else the largest
// arena that fits.
//
// Plain C++ with no device code: the worker runs it before building a CUDA
// engine, `sluicectl plan` runs it on a GGUF header. Thread-safe (pure).
#ifndef SLUICE_MEMORY_FIT_PLANNER_H_
#define SLUICE_MEMORY_FIT_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "config/expert_config.h"
#include "memory/host_probe.h"

namespace sluice::memory {

// A model's byte figures (model_footprint.h computes them from a tensor
// table).
// The page a device KV range grows by under a KV pool: the allocation
// granularity of CUDA's virtual memory management on the GPUs this runs on
// (kernels/cuda/device_pages.h; device_pages_sm90_test prints it).
inline constexpr uint64_t kDeviceKvPageBytes = uint64_t{2} << 20;

struct ModelFootprint {
  uint64_t dense_bytes = 0;   // everything but routed experts
  uint64_t expert_bytes = 0;  // every routed expert tensor
  // One slot: one expert's gate + up + down slices of the largest layer
  // shape.
  uint64_t slot_bytes = 0;
  int64_t experts = 0;  // routed experts in the model (layers x experts)
  int64_t layers = 0;         // blocks (blk.N), with or without routed experts
  int64_t expert_layers = 0;  // blocks with routed experts
  // Routed experts a token uses in each expert layer (the GGUF key
  // <arch>.expert_used_count); 0 where not read (a tensor table alone).
  int64_t experts_used = 0;
  // KV and recurrent state of one session (a sequence of the continuous
  // batch, issue 19): fixed (the DeltaNet conv and recurrent state, one
  // slot per sequence) + per_token x context (the attention layers' KV).
  uint64_t state_fixed_bytes = 0;
  uint64_t state_bytes_per_token = 0;
  int64_t context = 0;
  // Sequences held at once (`sluicectl plan --sessions`; a worker plans its
  // --max_sequences).
  int64_t sessions = 1;
  // The KV cache in blocks of this many positions (sched/kv_blocks.h): a
  // sequence's KV is whole blocks, its context rounded up. 0: one
  // contiguous cache of `context` positions per sequence.
  int64_t kv_block_tokens = 0;
  uint64_t workspace_bytes = 0;  // activations and scratch (an estimate)
  // A KV pool (sluiced --kv_cache_tokens): the sessions hold at most this
  // many positions together, each session's KV backed by device pages of
  // kv_page_bytes as it grows (model/cuda/device_state.h). 0: every
  // session its whole context. kv_ranges: the KV buffers of one session (2
  // per attention block, 1 per latent-attention block), each of which may
  // end in a partly used page.
  int64_t kv_pool_tokens = 0;
  int64_t kv_ranges = 0;
  uint64_t kv_page_bytes = 0;

  // Positions of KV one sequence holds: context, rounded up to blocks.
  int64_t kv_positions_per_session() const {
    if (kv_block_tokens <= 0) return context;
    return (context + kv_block_tokens - 1) / kv_block_tokens * kv_block_tokens;
  }
  uint64_t state_bytes_per_session() const {
    return state_fixed_bytes +
           state_bytes_per_token * static_cast<uint64_t>(kv_positions_per_session());
  }
  // With a pool: at most a partly used page per KV buffer of each session.
  uint64_t kv_page_slack_bytes() const {
    return static_cast<uint64_t>(sessions) * static_cast<uint64_t>(kv_ranges) * kv_page_bytes;
  }
  uint64_t state_bytes() const {
    const uint64_t n = static_cast<uint64_t>(sessions);
    if (kv_pool_tokens > 0) {
      return n * state_fixed_bytes + kv_page_slack_bytes() +
             state_bytes_per_token * static_cast<uint64_t>(kv_pool_tokens);
    }
    return state_bytes_per_session() * n;
  }
};

// The device's memory; known = false where there is no way to ask (a
// binary without CUDA): then only the host is checked and an arena must be
// asked for explicitly.
struct DeviceMemory {
  bool known = false;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;  // before the model is loaded
};

// What the user asked for: the expert configuration (config/expert_config.h;
// the planner reads slots, arena_fraction and host_tier_bytes). slots -1 and
// arena_fraction 0: the planner chooses.
using FitRequest = config::ExpertConfig;

struct FitInputs {
  ModelFootprint model;
  DeviceMemory device;
  HostMemory host;
  FitRequest request;
};

enum class FitMode { kAllResident, kArenaRegistered, kArenaHostTier };

// "all-resident", "arena+registered", "arena+host-tier+disk".
absl::string_view FitModeName(FitMode mode);

// Kept free on the device: max(512 MiB, 3% of total) (fragmentation,
// cuBLASLt's own allocations, the driver's growth).
uint64_t DeviceMarginBytes(uint64_t device_total_bytes);
// Kept available on the host: max(2 GiB, 5% of MemTotal) (the OS, the
// supervisor, the worker's own heap).
uint64_t HostMarginBytes(uint64_t host_total_bytes);
// Pinned buffers for disk reads in kArenaHostTier: 4 slots' worth, at
// least 64 MiB.
uint64_t StagingBytes(uint64_t slot_bytes);

struct Plan {
  FitMode mode = FitMode::kAllResident;
  bool streaming() const { return mode != FitMode::kAllResident; }
  // Device slots (every expert when all resident) and their bytes.
  int64_t slots = 0;
  int64_t experts = 0;
  uint64_t slot_bytes = 0;
  uint64_t expert_bytes = 0;  // every routed expert
  int64_t layers = 0;         // the footprint's figures
  int64_t expert_layers = 0;
  int64_t experts_used = 0;
  uint64_t arena_bytes = 0;  // expert bytes on the device
  uint64_t host_tier_bytes = 0;   // pinned expert cache (kArenaHostTier)
  // How the arena and the host tier share experts (the request's
  // --expert_tiers): inclusive, the host tier also holds the arena's.
  config::TierMode tiers = config::TierMode::kInclusive;
  uint64_t staging_bytes = 0;     // pinned disk-read buffers (kArenaHostTier)
  uint64_t page_cache_bytes = 0;  // mapping pages that must stay cached
  // Device side.
  uint64_t dense_bytes = 0;
  uint64_t state_bytes = 0;  // all sessions
  // Per sequence: `sequences` of `context` tokens, each with its fixed
  // (recurrent) state and KV of kv_bytes_per_token a position; the KV in
  // kv_blocks blocks of kv_block_tokens (0 without blocks).
  int64_t sequences = 0;
  int64_t context = 0;
  uint64_t state_fixed_bytes_per_sequence = 0;
  uint64_t kv_bytes_per_token = 0;
  int64_t kv_positions_per_sequence = 0;  // context, rounded up to blocks
  uint64_t state_bytes_per_sequence = 0;
  int64_t kv_block_tokens = 0;
  int64_t kv_blocks = 0;
  // The KV pool in positions (0: none, every sequence its context) and the
  // page rounding it allows for (sequences x KV buffers x a page).
  int64_t kv_pool_tokens = 0;
  uint64_t kv_page_slack_bytes = 0;
  // Sequences of `context` tokens that would fit on the device beside
  // everything else this plan places (at least `sequences`); -1 where the
  // device is unknown or a sequence holds no state.
  int64_t sequences_fit = -1;
  uint64_t workspace_bytes = 0;
  uint64_t device_margin_bytes = 0;
  uint64_t device_need_bytes = 0;  // the sum above, margin included
  DeviceMemory device;
  // Host side.
  uint64_t host_margin_bytes = 0;
  uint64_t host_need_bytes = 0;  // tier + staging + page cache + margin
  HostMemory host;

  // Experts the host holds beyond the arena's: every other expert where the
  // mapping is registered; with a host tier of T = host_tier_bytes /
  // slot_bytes slots, T (exclusive tiers) or T - slots (inclusive, at
  // least 0); at most experts - slots.
  int64_t host_slots() const;

  // A human-readable table: one line per figure, bytes in GiB/MiB.
  std::string Table() const;
};

// The plan for `in`, or RESOURCE_EXHAUSTED (device or host oversubscribed:
// the message gives the numbers and a configuration that fits) or
// INVALID_ARGUMENT (a request out of range: negative slots, a fraction
// outside (0, 1], a model without routed experts asked to stream).
absl::StatusOr<Plan> PlanFit(const FitInputs& in);

// What a plan costs in time (issue 22, "The target's regime"): the
// cold-start time and an upper bound on the decode rate, from a plan and
// the machine's transfer rates. Pure arithmetic; the transfers are taken as
// serial (a layer's misses arrive before its products run) and nothing else
// (latency, launches, attention over the context) is counted, hence "upper
// bound" for the decode rate.

// Bytes per second (1e9 = 1 GB/s). The defaults are the lent H200 machine's
// (/work/shared/DESIGN.md, "Facts measured", 2026-11-30): cold O_DIRECT
// disk reads 1.4-1.5 GB/s; pinned host->device copies 55.2 GB/s; HBM
// 4.0 TB/s taken as the effective rate of the H200's 4.8 TB/s (not
// measured in this tree).
struct Rates {
  double disk_bytes_per_s = 1.5e9;
  double pcie_bytes_per_s = 55.2e9;
  double hbm_bytes_per_s = 4.0e12;
};

// Until the configured tiers are warm, from a cold page cache: the dense
// weights and the experts the tiers hold are read from disk once
// (all-resident and registered plans: every expert, since the page cache
// keeps the whole mapping; a host-tier plan: arena + host tier bytes with
// exclusive tiers, the larger of the two with inclusive ones), and the
// dense weights and the arena are copied host->device (a discrete GPU:
// dense weights staged, not aliased).
struct ColdStart {
  Rates rates;
  uint64_t dense_bytes = 0;
  uint64_t expert_disk_bytes = 0;  // experts read from disk
  uint64_t arena_bytes = 0;        // experts copied to the device
  bool every_expert = false;       // expert_disk_bytes is the whole mapping

  uint64_t disk_bytes() const { return dense_bytes + expert_disk_bytes; }
  uint64_t device_bytes() const { return dense_bytes + arena_bytes; }
  double disk_seconds() const { return disk_bytes() / rates.disk_bytes_per_s; }
  double copy_seconds() const { return device_bytes() / rates.pcie_bytes_per_s; }
  double seconds() const { return disk_seconds() + copy_seconds(); }
  // Rows in Plan::Table()'s format, each step's bytes, rate and seconds.
  std::string Table() const;
};
// Precondition: every rate > 0.
ColdStart ColdStartOf(const Plan& p, const Rates& r);

// Shares of a token's routed-expert lookups each tier serves (they sum to
// 1), and the routing assumption they come from, in words.
struct TierShares {
  double device = 0;
  double host = 0;  // the pinned host tier, or the registered page cache
  double disk = 0;
  std::string routing;
};
// Uniform routing: device slots / experts, host_slots() / experts, the
// rest from disk.
TierShares UniformShares(const Plan& p);
// The share of lookups the hottest p.slots experts take (device), the next
// p.host_slots() (host), the rest (disk). `counts`: uses of each (layer,
// expert), any order. Precondition: a count > 0.
TierShares ProfileShares(const Plan& p, std::vector<uint64_t> counts);
// ProfileShares of a saved usage profile (memory/expert_profile.h). Errors
// start with `path`: NOT_FOUND where it cannot be opened; INVALID_ARGUMENT
// where it is malformed, of another shape than the plan's model (layers x
// experts a layer), or counts no lookups.
absl::StatusOr<TierShares> ProfileSharesOfFile(const Plan& p, const std::string& path);

// Per decoded token: expert_layers x experts_used experts of the mean
// expert's bytes (expert_bytes / experts; a slot is sized for the largest),
// split by `shares`;
//   seconds = disk bytes / disk + (host + disk bytes) / PCIe
//             + (dense + routed bytes) / HBM
// and tokens/s = 1 / seconds, an upper bound.
struct DecodeEstimate {
  Rates rates;
  TierShares shares;
  FitMode mode = FitMode::kAllResident;  // names the host share's source
  int64_t expert_layers = 0;
  int64_t experts_used = 0;
  double expert_bytes = 0;  // the mean expert
  uint64_t dense_bytes = 0;

  double routed_bytes() const { return expert_layers * experts_used * expert_bytes; }
  double disk_seconds() const { return routed_bytes() * shares.disk / rates.disk_bytes_per_s; }
  double pcie_seconds() const {
    return routed_bytes() * (shares.host + shares.disk) / rates.pcie_bytes_per_s;
  }
  double hbm_seconds() const { return (dense_bytes + routed_bytes()) / rates.hbm_bytes_per_s; }
  double seconds() const { return disk_seconds() + pcie_seconds() + hbm_seconds(); }
  double tokens_per_s() const { return 1 / seconds(); }
  std::string Table() const;
};
// Precondition: every rate > 0, p.experts_used set where p.experts > 0.
DecodeEstimate DecodeEstimateOf(const Plan& p, const TierShares& shares, const Rates& r);

// "1.50 GiB", "512.0 MiB", "96.0 KiB", "1000 B".
std::string FormatBytes(uint64_t bytes);

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_FIT_PLANNER_H_
