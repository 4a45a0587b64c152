#include "memory/expert_profile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace sluice::memory {
namespace {

constexpr char kMagic[4] = {'S', 'L', 'E', 'P'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 16;

uint64_t ReadLe(std::string_view b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<uint8_t>(b[at + i])) << (8 * i);
  }
  return v;
}

void AppendLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

}  // namespace

absl::StatusOr<ExpertProfile> ExpertProfile::Create(int32_t n_layer, int32_t n_expert) {
  if (n_layer < 1 || n_expert < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expert profile: n_layer (", n_layer, ") and n_expert (", n_expert,
        ") must be >= 1"));
  }
  return ExpertProfile(n_layer, n_expert);
}

absl::Status ExpertProfile::Record(int32_t layer, absl::Span<const int32_t> experts) {
  if (layer < 0 || layer >= n_layer_) {
    return absl::InvalidArgumentError(
        absl::StrCat("expert profile: layer ", layer, " out of range [0, ", n_layer_, ")"));
  }
  for (int32_t e : experts) {
    if (e < 0 || e >= n_expert_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expert profile: layer ", layer, " expert ", e, " out of range [0, ",
          n_expert_, ")"));
    }
  }
  for (int32_t e : experts) ++counts_[Index({layer, e})];
  return absl::OkStatus();
}

std::vector<ExpertKey> ExpertProfile::Ranked() const {
  std::vector<ExpertKey> keys;
  for (int32_t l = 0; l < n_layer_; ++l) {
    for (int32_t e = 0; e < n_expert_; ++e) {
      if (counts_[Index({l, e})] > 0) keys.push_back({l, e});
    }
  }
  // Stable: equal counts keep (layer, expert) order.
  std::stable_sort(keys.begin(), keys.end(), [this](ExpertKey a, ExpertKey b) {
    return counts_[Index(a)] > counts_[Index(b)];
  });
  return keys;
}

std::string ExpertProfile::Serialize() const {
  std::string out(kMagic, sizeof(kMagic));
  AppendLe(out, kVersion, 4);
  AppendLe(out, static_cast<uint32_t>(n_layer_), 4);
  AppendLe(out, static_cast<uint32_t>(n_expert_), 4);
  for (uint64_t c : counts_) AppendLe(out, c, 8);
  return out;
}

absl::StatusOr<ExpertProfile> ExpertProfile::Parse(std::string_view bytes,
                                                   std::string_view name) {
  auto bad = [&](size_t offset, const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(name), ": expert profile: ", what, " at offset ", offset));
  };
  if (bytes.size() < kHeaderBytes) {
    return bad(0, absl::StrCat("file of ", bytes.size(), " bytes is shorter than the header"));
  }
  if (bytes.substr(0, 4) != std::string_view(kMagic, 4)) return bad(0, "bad magic");
  if (ReadLe(bytes, 4, 4) != kVersion) {
    return bad(4, absl::StrCat("unknown version ", ReadLe(bytes, 4, 4)));
  }
  const uint64_t n_layer = ReadLe(bytes, 8, 4), n_expert = ReadLe(bytes, 12, 4);
  if (n_layer < 1 || n_expert < 1 || n_layer * n_expert > (uint64_t{1} << 28)) {
    return bad(8, absl::StrCat("bad shape ", n_layer, " x ", n_expert));
  }
  const uint64_t want = kHeaderBytes + 8 * n_layer * n_expert;
  if (bytes.size() != want) {
    return bad(std::min<uint64_t>(bytes.size(), want),
               absl::StrCat("size ", bytes.size(), " is not ", want, " for ", n_layer,
                            " x ", n_expert, " experts"));
  }
  ExpertProfile p(static_cast<int32_t>(n_layer), static_cast<int32_t>(n_expert));
  for (size_t i = 0; i < p.counts_.size(); ++i) {
    p.counts_[i] = ReadLe(bytes, kHeaderBytes + 8 * i, 8);
  }
  return p;
}

absl::Status ExpertProfile::Save(const std::string& path) const {
  const std::string bytes = Serialize();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    return absl::UnavailableError(absl::StrCat(path, ": cannot write expert profile"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ExpertProfile> ExpertProfile::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open expert profile: ", std::strerror(errno)));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return Parse(bytes.str(), path);
}

WarmPlan PlanWarmStart(const ExpertProfile& profile, int64_t device_slots,
                       int64_t host_slots, bool exclusive) {
  const std::vector<ExpertKey> ranked = profile.Ranked();
  WarmPlan plan;
  const size_t d = std::min<size_t>(ranked.size(), std::max<int64_t>(0, device_slots));
  plan.device.assign(ranked.begin(), ranked.begin() + d);
  const size_t from = exclusive ? d : 0;
  const size_t h = std::min<size_t>(ranked.size() - from, std::max<int64_t>(0, host_slots));
  plan.host.assign(ranked.begin() + from, ranked.begin() + from + h);
  return plan;
}

void SeedFrequency(const ExpertProfile& profile, KeyFrequency& frequency,
                   uint64_t now) {
  for (const ExpertKey& k : profile.Ranked()) {
    frequency.Add(k, static_cast<double>(profile.count(k)), now);
  }
}

}  // namespace sluice::memory
