#include "memory/fit_planner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "memory/expert_profile.h"

namespace sluice::memory {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

uint64_t SubOrZero(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

// One row of the plan's tables: the name in 22 columns, then the value.
void AppendRow(std::string& t, absl::string_view name, const std::string& value) {
  absl::StrAppend(&t, absl::StrFormat("%-22s %s\n", name, value));
}

// Slots the request names (capped at every expert), or -1 for "choose".
absl::StatusOr<int64_t> RequestedSlots(const FitRequest& r, int64_t experts) {
  if (absl::Status valid = config::ValidateExpertConfig(r); !valid.ok()) return valid;
  const bool asked = r.slots >= 0 || r.arena_fraction > 0;
  if (asked && experts == 0) {
    return absl::InvalidArgumentError(
        "an expert arena was asked for, but the model has no routed experts");
  }
  if (r.slots >= 0) return std::min(r.slots, experts);
  if (r.arena_fraction > 0) {
    const auto n = static_cast<int64_t>(std::ceil(r.arena_fraction * static_cast<double>(experts)));
    return std::min(n, experts);
  }
  return -1;
}

// The most slots that fit beside `fixed` (dense, state, workspace, margin)
// in `free`; -1 when not even zero slots fit.
int64_t MaxSlots(uint64_t free, uint64_t fixed, uint64_t slot_bytes, int64_t experts) {
  if (fixed > free) return -1;
  if (slot_bytes == 0) return experts;
  return std::min<int64_t>(static_cast<int64_t>((free - fixed) / slot_bytes), experts);
}

std::string DeviceNeedText(const Plan& p, const ModelFootprint& m) {
  return absl::StrCat(
      FormatBytes(p.device_need_bytes), " (dense ", FormatBytes(p.dense_bytes), " + experts ",
      FormatBytes(p.arena_bytes),
      p.streaming() ? absl::StrCat(" [", p.slots, " slots x ", FormatBytes(p.slot_bytes), "]")
                    : std::string(" [all resident]"),
      " + KV/state ", FormatBytes(p.state_bytes),
      m.kv_pool_tokens > 0
          ? absl::StrCat(" [a pool of ", m.kv_pool_tokens, " tokens, ", m.sessions, " sequences]")
          : absl::StrCat(" [", m.sessions, " x ", FormatBytes(m.state_bytes_per_session()), " for ",
                         m.context, " tokens]"),
      " + workspace ",
      FormatBytes(p.workspace_bytes), " + margin ", FormatBytes(p.device_margin_bytes), ")");
}

// Sequences of m.context tokens whose state fits in `free` beside `other`
// bytes; -1 when a sequence holds no state.
int64_t SequencesFit(uint64_t free, uint64_t other, const ModelFootprint& m) {
  const uint64_t per = m.state_bytes_per_session();
  if (per == 0) return -1;
  return other >= free ? 0 : static_cast<int64_t>((free - other) / per);
}

// What fits on the device when the request does not: the largest arena, or,
// when no arena fits at all, the longest context and the most sequences.
std::string DeviceSuggestion(const ModelFootprint& m, uint64_t free, uint64_t margin) {
  const uint64_t fixed = m.dense_bytes + m.state_bytes() + m.workspace_bytes + margin;
  const int64_t slots = MaxSlots(free, fixed, m.slot_bytes, m.experts);
  if (slots >= 0) {
    return absl::StrFormat("at most %d expert slots fit (--expert_slots=%d, arena fraction %.4f)",
                           slots, slots,
                           m.experts > 0 ? static_cast<double>(slots) / m.experts : 0.0);
  }
  const uint64_t bare = m.dense_bytes + m.workspace_bytes + margin;
  const int64_t sequences = SequencesFit(free, bare, m);
  const uint64_t base = bare + m.state_fixed_bytes * static_cast<uint64_t>(m.sessions);
  const std::string fewer =
      sequences >= 1 ? absl::StrCat("at most ", sequences, " sequences of ", m.context, " tokens")
                     : std::string();
  if (base < free && m.state_bytes_per_token > 0) {
    const uint64_t tokens =
        (free - base) / (m.state_bytes_per_token * static_cast<uint64_t>(m.sessions));
    return absl::StrCat("no expert arena fits beside the KV/state: use a context of at most ",
                        tokens, " tokens (--context_length)",
                        fewer.empty() ? "" : absl::StrCat(" or ", fewer), ", with 0 slots");
  }
  if (!fewer.empty()) {
    return absl::StrCat("no expert arena fits beside the KV/state: use ", fewer,
                        ", with 0 slots");
  }
  if (bare >= free) {
    return "even the dense weights and workspace do not fit: use a device with more memory";
  }
  return absl::StrCat("one sequence's state (", FormatBytes(m.state_bytes_per_session()),
                      ") does not fit beside the dense weights and workspace: use a device "
                      "with more memory");
}

absl::Status FitHost(const FitInputs& in, Plan& p) {
  const ModelFootprint& m = in.model;
  p.host_margin_bytes = HostMarginBytes(in.host.total_bytes);
  if (p.streaming()) {
    if (in.request.host_tier_bytes > 0) {
      p.mode = FitMode::kArenaHostTier;
      p.host_tier_bytes = std::min(in.request.host_tier_bytes, m.expert_bytes);
      p.staging_bytes = p.host_tier_bytes < m.expert_bytes ? StagingBytes(m.slot_bytes) : 0;
    } else if (m.expert_bytes + p.host_margin_bytes <= in.host.available_bytes) {
      p.mode = FitMode::kArenaRegistered;
      p.page_cache_bytes = m.expert_bytes;
    } else {
      p.mode = FitMode::kArenaHostTier;
      p.staging_bytes = StagingBytes(m.slot_bytes);
      p.host_tier_bytes = std::min(
          SubOrZero(in.host.available_bytes, p.host_margin_bytes + p.staging_bytes),
          m.expert_bytes);
    }
  }
  p.host_need_bytes =
      p.host_tier_bytes + p.staging_bytes + p.page_cache_bytes + p.host_margin_bytes;
  if (p.host_need_bytes <= in.host.available_bytes) return absl::OkStatus();
  const uint64_t tier_fits =
      SubOrZero(in.host.available_bytes, p.host_margin_bytes + StagingBytes(m.slot_bytes));
  return absl::ResourceExhaustedError(absl::StrCat(
      "host memory oversubscribed: the plan needs ", FormatBytes(p.host_need_bytes),
      " (pinned host tier ", FormatBytes(p.host_tier_bytes), " + staging ",
      FormatBytes(p.staging_bytes), " + page cache ", FormatBytes(p.page_cache_bytes),
      " + margin ", FormatBytes(p.host_margin_bytes), ") but MemAvailable is ",
      FormatBytes(in.host.available_bytes), " of ", FormatBytes(in.host.total_bytes),
      "; fits: --host_tier_bytes=", tier_fits, " (", FormatBytes(tier_fits), ")"));
}

}  // namespace

absl::string_view FitModeName(FitMode mode) {
  switch (mode) {
    case FitMode::kAllResident:
      return "all-resident";
    case FitMode::kArenaRegistered:
      return "arena+registered";
    case FitMode::kArenaHostTier:
      return "arena+host-tier+disk";
  }
  return "?";
}

uint64_t DeviceMarginBytes(uint64_t total) { return std::max(512 * kMiB, total / 100 * 3); }
uint64_t HostMarginBytes(uint64_t total) { return std::max(2 * kGiB, total / 100 * 5); }
uint64_t StagingBytes(uint64_t slot_bytes) { return std::max(64 * kMiB, 4 * slot_bytes); }

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= kGiB) return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / kGiB);
  if (bytes >= kMiB) return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / kMiB);
  if (bytes >= 1024) return absl::StrFormat("%.1f KiB", static_cast<double>(bytes) / 1024);
  return absl::StrCat(bytes, " B");
}

absl::StatusOr<Plan> PlanFit(const FitInputs& in) {
  const ModelFootprint& m = in.model;
  absl::StatusOr<int64_t> requested = RequestedSlots(in.request, m.experts);
  if (!requested.ok()) return requested.status();
  Plan p;
  p.experts = m.experts;
  p.slot_bytes = m.slot_bytes;
  p.expert_bytes = m.expert_bytes;
  p.tiers = in.request.tiers;
  p.layers = m.layers;
  p.expert_layers = m.expert_layers;
  p.experts_used = m.experts_used;
  p.dense_bytes = m.dense_bytes;
  p.state_bytes = m.state_bytes();
  p.sequences = m.sessions;
  p.context = m.context;
  p.state_fixed_bytes_per_sequence = m.state_fixed_bytes;
  p.kv_bytes_per_token = m.state_bytes_per_token;
  p.state_bytes_per_sequence = m.state_bytes_per_session();
  p.kv_block_tokens = m.kv_block_tokens;
  p.kv_positions_per_sequence = m.kv_positions_per_session();
  p.kv_blocks =
      m.kv_block_tokens > 0 ? p.kv_positions_per_sequence / m.kv_block_tokens * m.sessions : 0;
  if (m.kv_pool_tokens > 0) {
    p.kv_pool_tokens = m.kv_pool_tokens;
    p.kv_page_slack_bytes = m.kv_page_slack_bytes();
  }
  p.workspace_bytes = m.workspace_bytes;
  p.device = in.device;
  p.host = in.host;
  p.device_margin_bytes = in.device.known ? DeviceMarginBytes(in.device.total_bytes) : 0;
  const uint64_t fixed = p.dense_bytes + p.state_bytes + p.workspace_bytes + p.device_margin_bytes;

  int64_t slots = *requested;
  if (slots < 0 && in.device.known && fixed + m.expert_bytes > in.device.free_bytes) {
    // Streaming by default: the largest arena that fits (refused below
    // when not even an empty one does).
    slots = std::max<int64_t>(0, MaxSlots(in.device.free_bytes, fixed, m.slot_bytes, m.experts));
  }
  if (slots < 0) {
    p.mode = FitMode::kAllResident;
    p.slots = m.experts;
    p.arena_bytes = m.expert_bytes;
  } else {
    p.mode = FitMode::kArenaRegistered;  // FitHost settles the host side
    p.slots = slots;
    p.arena_bytes = static_cast<uint64_t>(slots) * m.slot_bytes;
  }
  p.device_need_bytes = fixed + p.arena_bytes;
  if (in.device.known && p.device_need_bytes > in.device.free_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device memory oversubscribed: the plan needs ", DeviceNeedText(p, m), " but the device has ",
        FormatBytes(in.device.free_bytes), " free of ", FormatBytes(in.device.total_bytes), "; ",
        DeviceSuggestion(m, in.device.free_bytes, p.device_margin_bytes)));
  }
  if (absl::Status s = FitHost(in, p); !s.ok()) return s;
  if (in.device.known) {
    p.sequences_fit =
        SequencesFit(in.device.free_bytes, p.device_need_bytes - p.state_bytes, m);
  }
  return p;
}

std::string Plan::Table() const {
  std::string t;
  auto row = [&t](absl::string_view name, const std::string& value) {
    AppendRow(t, name, value);
  };
  row("mode", std::string(FitModeName(mode)));
  row("routed experts", absl::StrCat(experts, " (one slot ", FormatBytes(slot_bytes), ")"));
  row("device slots",
      streaming() ? absl::StrFormat("%d (%.1f%% of experts)", slots,
                                    experts > 0 ? 100.0 * slots / experts : 0.0)
                  : std::string("every expert resident"));
  row("sequences",
      absl::StrCat(sequences, " x ", context, " tokens",
                   sequences_fit >= 0 ? absl::StrCat(" (", sequences_fit, " would fit)")
                                      : std::string()));
  row("  per sequence", absl::StrCat(FormatBytes(state_bytes_per_sequence), " = KV ",
                                     FormatBytes(kv_bytes_per_token), "/token x ",
                                     kv_positions_per_sequence, " + recurrent ",
                                     FormatBytes(state_fixed_bytes_per_sequence)));
  if (kv_block_tokens > 0) {
    row("  KV blocks", absl::StrCat(kv_blocks, " x ", kv_block_tokens, " tokens"));
  }
  row("device", device.known ? absl::StrCat(FormatBytes(device.free_bytes), " free of ",
                                            FormatBytes(device.total_bytes))
                             : std::string("unknown (not checked)"));
  row("  dense", FormatBytes(dense_bytes));
  row("  experts", FormatBytes(arena_bytes));
  if (kv_pool_tokens > 0) {
    row("  KV pool", absl::StrCat(kv_pool_tokens, " tokens x ", FormatBytes(kv_bytes_per_token),
                                  " + pages rounding ", FormatBytes(kv_page_slack_bytes)));
    row("  KV/state", absl::StrCat(FormatBytes(state_bytes), " (pool + ", sequences,
                                   " x recurrent ", FormatBytes(state_fixed_bytes_per_sequence),
                                   ")"));
  } else {
    row("  KV/state", absl::StrCat(FormatBytes(state_bytes), " (", sequences, " x ",
                                   FormatBytes(state_bytes_per_sequence), ")"));
  }
  row("  workspace", FormatBytes(workspace_bytes));
  row("  margin", FormatBytes(device_margin_bytes));
  row("  total", FormatBytes(device_need_bytes));
  row("host", absl::StrCat(FormatBytes(host.available_bytes), " available of ",
                           FormatBytes(host.total_bytes)));
  row("  host tier (pinned)", FormatBytes(host_tier_bytes));
  row("  staging (pinned)", FormatBytes(staging_bytes));
  row("  page cache kept", FormatBytes(page_cache_bytes));
  row("  margin", FormatBytes(host_margin_bytes));
  row("  total", FormatBytes(host_need_bytes));
  return t;
}

namespace {

// "1.23 s", "4.56 ms", "78.9 us", "0 s".
std::string FormatSeconds(double s) {
  if (s >= 1) return absl::StrFormat("%.2f s", s);
  if (s >= 1e-3) return absl::StrFormat("%.2f ms", s * 1e3);
  if (s > 0) return absl::StrFormat("%.1f us", s * 1e6);
  return "0 s";
}

// "500.0 MB/s", "1.50 GB/s", "4.00 TB/s".
std::string FormatRate(double bytes_per_s) {
  if (bytes_per_s >= 1e12) return absl::StrFormat("%.2f TB/s", bytes_per_s / 1e12);
  if (bytes_per_s >= 1e9) return absl::StrFormat("%.2f GB/s", bytes_per_s / 1e9);
  return absl::StrFormat("%.1f MB/s", bytes_per_s / 1e6);
}

// FormatBytes of a fractional figure (a share of a token's bytes).
std::string RoundBytes(double bytes) {
  return FormatBytes(static_cast<uint64_t>(std::llround(bytes)));
}

// One step of the arithmetic: "1.00 GiB / 1.50 GB/s = 715.83 ms".
std::string Step(double bytes, double rate) {
  return absl::StrCat(RoundBytes(bytes), " / ", FormatRate(rate), " = ",
                      FormatSeconds(bytes / rate));
}

// "25.0% = 29.0 MiB": a tier's share of a token's routed bytes.
std::string Share(double share, double bytes) {
  return absl::StrFormat("%.1f%% = %s", 100 * share, RoundBytes(share * bytes));
}

}  // namespace

int64_t Plan::host_slots() const {
  const int64_t rest = std::max<int64_t>(0, experts - slots);
  switch (mode) {
    case FitMode::kAllResident:
      return 0;
    case FitMode::kArenaRegistered:
      return rest;
    case FitMode::kArenaHostTier: {
      if (slot_bytes == 0) return rest;
      const auto tier = static_cast<int64_t>(host_tier_bytes / slot_bytes);
      // Exclusive: one layer's experts of the tier stage disk reads
      // (model/cuda/host_tier.h) and hold none.
      const int64_t staging = expert_layers > 0 ? experts / expert_layers : 0;
      return std::min(rest, tiers == config::TierMode::kExclusive
                                ? std::max<int64_t>(0, tier - staging)
                                : std::max<int64_t>(0, tier - slots));
    }
  }
  return 0;
}

ColdStart ColdStartOf(const Plan& p, const Rates& r) {
  ColdStart c;
  c.rates = r;
  c.dense_bytes = p.dense_bytes;
  c.arena_bytes = p.arena_bytes;
  c.every_expert = p.mode != FitMode::kArenaHostTier;
  // Exclusive: the arena's experts and the host tier's (its staging slots
  // hold none); inclusive: the tier holds the arena's too.
  const uint64_t tiers =
      p.tiers == config::TierMode::kExclusive
          ? p.arena_bytes + static_cast<uint64_t>(p.host_slots()) * p.slot_bytes
          : std::max(p.arena_bytes, p.host_tier_bytes);
  c.expert_disk_bytes = c.every_expert ? p.expert_bytes : std::min(p.expert_bytes, tiers);
  return c;
}

std::string ColdStart::Table() const {
  std::string t;
  AppendRow(t, "cold start",
            absl::StrCat(FormatSeconds(seconds()), " until the tiers are warm = disk ",
                         FormatSeconds(disk_seconds()), " + host->device ",
                         FormatSeconds(copy_seconds()), " (nothing in the page cache at start)"));
  AppendRow(t, "  read from disk",
            absl::StrCat(Step(disk_bytes(), rates.disk_bytes_per_s), " (dense ",
                         FormatBytes(dense_bytes),
                         every_expert ? " + every expert " : " + arena and host tier ",
                         FormatBytes(expert_disk_bytes), ")"));
  AppendRow(t, "  copy to device",
            absl::StrCat(Step(device_bytes(), rates.pcie_bytes_per_s), " (dense ",
                         FormatBytes(dense_bytes), " + arena ", FormatBytes(arena_bytes), ")"));
  return t;
}

TierShares UniformShares(const Plan& p) {
  TierShares s;
  s.routing = absl::StrCat("uniform routing: a tier's share = its slots / ", p.experts, " experts");
  if (p.experts <= 0) {
    s.device = 1;
    return s;
  }
  const auto n = static_cast<double>(p.experts);
  const int64_t device = std::min(p.slots, p.experts);
  const int64_t host = std::min(p.host_slots(), p.experts - device);
  s.device = device / n;
  s.host = host / n;
  s.disk = (p.experts - device - host) / n;
  return s;
}

TierShares ProfileShares(const Plan& p, std::vector<uint64_t> counts) {
  std::sort(counts.begin(), counts.end(), std::greater<>());
  const size_t n = counts.size();
  const size_t device = std::min<size_t>(n, static_cast<size_t>(std::max<int64_t>(0, p.slots)));
  const size_t host = std::min<size_t>(n - device, static_cast<size_t>(p.host_slots()));
  auto sum = [&counts](size_t from, size_t to) {
    return static_cast<double>(
        std::accumulate(counts.begin() + from, counts.begin() + to, uint64_t{0}));
  };
  const double total = sum(0, n);
  TierShares s;
  s.device = sum(0, device) / total;
  s.host = sum(device, device + host) / total;
  s.disk = sum(device + host, n) / total;
  s.routing = absl::StrCat(static_cast<uint64_t>(total), " lookups; the hottest ", device,
                           " experts on the device, the next ", host, " on the host");
  return s;
}

absl::StatusOr<TierShares> ProfileSharesOfFile(const Plan& p, const std::string& path) {
  absl::StatusOr<ExpertProfile> profile = ExpertProfile::Load(path);
  if (!profile.ok()) return profile.status();
  const int64_t per_layer = p.expert_layers > 0 ? p.experts / p.expert_layers : 0;
  if (profile->n_layer() != p.layers || profile->n_expert() != per_layer) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a profile of ", profile->n_layer(), " layers x ", profile->n_expert(),
        " experts; the model has ", p.layers, " layers x ", per_layer, " experts"));
  }
  std::vector<uint64_t> counts;
  counts.reserve(static_cast<size_t>(profile->n_layer()) * profile->n_expert());
  for (int32_t layer = 0; layer < profile->n_layer(); ++layer) {
    for (int32_t e = 0; e < profile->n_expert(); ++e) counts.push_back(profile->count({layer, e}));
  }
  if (std::all_of(counts.begin(), counts.end(), [](uint64_t c) { return c == 0; })) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the profile counts no lookups"));
  }
  TierShares s = ProfileShares(p, std::move(counts));
  s.routing = absl::StrCat("routing of profile ", path, ": ", s.routing);
  return s;
}

DecodeEstimate DecodeEstimateOf(const Plan& p, const TierShares& shares, const Rates& r) {
  DecodeEstimate d;
  d.rates = r;
  d.shares = shares;
  d.mode = p.mode;
  d.expert_layers = p.expert_layers;
  d.experts_used = p.experts_used;
  d.expert_bytes = p.experts > 0 ? static_cast<double>(p.expert_bytes) / p.experts : 0;
  d.dense_bytes = p.dense_bytes;
  return d;
}

std::string DecodeEstimate::Table() const {
  std::string t;
  const double routed = routed_bytes();
  AppendRow(t, "decode (upper bound)",
            absl::StrFormat("%.1f tok/s = 1 / %s; %s", tokens_per_s(), FormatSeconds(seconds()),
                            shares.routing));
  AppendRow(t, "  routed per token",
            absl::StrCat(expert_layers, " layers x ", experts_used, " experts x ",
                         RoundBytes(expert_bytes), " = ", RoundBytes(routed)));
  AppendRow(t, "  device hits", Share(shares.device, routed));
  AppendRow(t,
            mode == FitMode::kArenaRegistered ? "  host (page cache)"
            : mode == FitMode::kArenaHostTier ? "  host (pinned tier)"
                                              : "  host",
            Share(shares.host, routed));
  AppendRow(t, "  disk", Share(shares.disk, routed));
  AppendRow(t, "  time per token",
            absl::StrCat("disk ", FormatSeconds(disk_seconds()), " + PCIe ",
                         FormatSeconds(pcie_seconds()), " + HBM ", FormatSeconds(hbm_seconds()),
                         " = ", FormatSeconds(seconds())));
  AppendRow(t, "  disk reads", Step(routed * shares.disk, rates.disk_bytes_per_s));
  AppendRow(t, "  PCIe (host + disk)",
            Step(routed * (shares.host + shares.disk), rates.pcie_bytes_per_s));
  AppendRow(t, "  HBM (dense + routed)", Step(dense_bytes + routed, rates.hbm_bytes_per_s));
  return t;
}

}  // namespace sluice::memory
