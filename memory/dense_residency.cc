#include "memory/dense_residency.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace sluice::memory {
namespace {

bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kDeviceAlignment == 0;
}

// Null pointers, empty tensors and overlapping ranges are caller bugs that
// would otherwise make lookups ambiguous.
absl::Status Validate(const std::vector<DenseTensor>& tensors) {
  std::vector<const DenseTensor*> sorted;
  for (const DenseTensor& t : tensors) {
    if (t.host == nullptr || t.bytes == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dense residency: tensor '", t.name, "' has ",
          t.host == nullptr ? "no host pointer" : "0 bytes"));
    }
    sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(), [](const DenseTensor* a, const DenseTensor* b) {
    return std::less<const void*>()(a->host, b->host);
  });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const char* prev_end = static_cast<const char*>(sorted[i - 1]->host) + sorted[i - 1]->bytes;
    if (static_cast<const char*>(sorted[i]->host) < prev_end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dense residency: tensor '", sorted[i]->name, "' overlaps '", sorted[i - 1]->name,
          "' in host memory"));
    }
  }
  return absl::OkStatus();
}

PlacementKind Decide(const PlatformFacts& facts, const DenseTensor& t) {
  if (!facts.CanAliasHostMemory()) return PlacementKind::kCopied;
  if (Aligned(t.host)) return PlacementKind::kAliased;
  return t.owner != nullptr ? PlacementKind::kRehomed : PlacementKind::kStaged;
}

}  // namespace

absl::StatusOr<std::vector<DenseTensor>> DenseTensorsOf(const TensorTable& table) {
  std::vector<DenseTensor> out;
  for (const TensorEntry& e : table.entries()) {
    if (e.kind != TensorKind::kDense) continue;
    if (e.data == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dense residency: tensor '", e.name, "' has no mapped bytes (table built without "
          "mappings)"));
    }
    out.push_back({e.name, e.data, e.n_bytes, nullptr});
  }
  return out;
}

std::string_view PlacementKindName(PlacementKind kind) {
  switch (kind) {
    case PlacementKind::kCopied:
      return "copied";
    case PlacementKind::kAliased:
      return "aliased";
    case PlacementKind::kRehomed:
      return "rehomed";
    case PlacementKind::kStaged:
      return "staged";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<DenseResidency>> DenseResidency::Place(
    DevicePlatform& platform, std::vector<DenseTensor> tensors, const Progress& progress) {
  RETURN_IF_ERROR(Validate(tensors));
  ASSIGN_OR_RETURN(PlatformFacts facts, platform.Probe());
  std::unique_ptr<DenseResidency> r(new DenseResidency(platform, std::move(facts)));
  // On any error `r` is destroyed, which frees whatever Fill allocated.
  RETURN_IF_ERROR(r->Fill(tensors, progress));
  return r;
}

absl::Status DenseResidency::Fill(std::vector<DenseTensor>& tensors, const Progress& progress) {
  // Offsets first, so that everything that needs device memory is one
  // allocation: one failure point, no fragmentation between tensors.
  uint64_t device_total = 0;
  placements_.reserve(tensors.size());
  std::vector<uint64_t> offsets(tensors.size(), 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const DenseTensor& t = tensors[i];
    DensePlacement p{t.name, t.host, t.bytes, nullptr, Decide(facts_, t)};
    if (p.kind == PlacementKind::kCopied || p.kind == PlacementKind::kStaged) {
      offsets[i] = device_total;
      device_total += AlignUp(t.bytes);
    }
    placements_.push_back(std::move(p));
  }
  if (device_total > 0) {
    absl::StatusOr<void*> block = platform_.Alloc(device_total);
    if (!block.ok()) {
      const uint64_t n = std::count_if(placements_.begin(), placements_.end(), [](auto& p) {
        return p.kind == PlacementKind::kCopied || p.kind == PlacementKind::kStaged;
      });
      return absl::ResourceExhaustedError(absl::StrCat(
          "dense residency: ", n, " tensors need ", device_total, " bytes on ", facts_.name,
          " (", facts_.free_bytes, " of ", facts_.total_bytes,
          " bytes free): ", block.status().message()));
    }
    device_block_ = *block;
    counters_.device_bytes_owned = device_total;
  }
  uint64_t all_bytes = 0, placed_bytes = 0;
  for (const DenseTensor& t : tensors) all_bytes += t.bytes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    DenseTensor& t = tensors[i];
    DensePlacement& p = placements_[i];
    placed_bytes += t.bytes;
    switch (p.kind) {
      case PlacementKind::kCopied:
      case PlacementKind::kStaged:
        p.device = static_cast<char*>(device_block_) + offsets[i];
        RETURN_IF_ERROR(platform_.CopyToDevice(p.device, t.host, t.bytes));
        (p.kind == PlacementKind::kCopied ? counters_.bytes_copied : counters_.bytes_staged) +=
            t.bytes;
        t.owner.reset();  // the device copy is the only one kept
        break;
      case PlacementKind::kAliased:
        p.device = const_cast<void*>(t.host);
        counters_.bytes_aliased += t.bytes;
        if (t.owner != nullptr) kept_owners_.push_back(std::move(t.owner));
        break;
      case PlacementKind::kRehomed: {
        void* block = std::aligned_alloc(kDeviceAlignment, AlignUp(t.bytes));
        if (block == nullptr) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "dense residency: cannot allocate ", AlignUp(t.bytes),
              " aligned host bytes to re-home tensor '", t.name, "'"));
        }
        host_blocks_.push_back(block);
        std::memcpy(block, t.host, t.bytes);
        p.device = block;
        counters_.bytes_rehomed += t.bytes;
        counters_.host_bytes_owned += AlignUp(t.bytes);
        t.owner.reset();  // moved, not duplicated
        break;
      }
    }
    by_host_[static_cast<const char*>(p.host)] = i;
    if (progress) progress(placed_bytes, all_bytes);
  }
  counters_.tensors = placements_.size();
  return absl::OkStatus();
}

DenseResidency::~DenseResidency() {
  platform_.Free(device_block_);
  for (void* b : host_blocks_) std::free(b);
}

absl::StatusOr<void*> DenseResidency::DevicePointer(const void* host) const {
  const char* h = static_cast<const char*>(host);
  auto it = by_host_.upper_bound(h);
  if (it != by_host_.begin()) {
    --it;
    const DensePlacement& p = placements_[it->second];
    const uint64_t offset = static_cast<uint64_t>(h - it->first);
    if (offset < p.bytes) return static_cast<char*>(p.device) + offset;
  }
  return absl::NotFoundError(absl::StrCat(
      "dense residency: host address 0x", absl::Hex(reinterpret_cast<uintptr_t>(host)), " is not inside any of the ",
      placements_.size(), " placed tensors"));
}

const DensePlacement* DenseResidency::Find(std::string_view name) const {
  for (const DensePlacement& p : placements_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace sluice::memory
