#include "model/cuda/expert_stream.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/env_switch.h"
#include "base/status_macros.h"
#include "memory/dense_residency.h"

namespace sluice {
namespace {

// Prefetches at most the learnt budget (memory/prefetch_budget.h); off:
// every predicted expert, as before it (A/B runs).
EnvSwitch prefetch_budget("SLUICE_CUDA_PREFETCH_BUDGET", true);
// A layer's demand copies issued expert by expert rather than in one
// batch call: run 22 measured ~18 µs of host time in the batch call of a
// bench35 layer's ~18 slice copies, before which the link idles. Off until
// measured.
EnvSwitch copy_per_expert("SLUICE_CUDA_COPY_PER_EXPERT", false);

uint64_t PageSize() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

const uint8_t* PageDown(const uint8_t* p) {
  const uint64_t page = PageSize();
  return reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p) /
                                          page * page);
}

const uint8_t* PageUp(const uint8_t* p) {
  const uint64_t page = PageSize();
  return reinterpret_cast<const uint8_t*>(
      (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page);
}

// Adds `layer` to the layers whose tables must be uploaded.
void Mark(std::vector<int>& dirty, int layer) {
  if (std::find(dirty.begin(), dirty.end(), layer) == dirty.end()) {
    dirty.push_back(layer);
  }
}

}  // namespace

absl::Status ExpertStream::AllocateArena(const ExpertStreamOptions& options,
                                         cuda::Stream compute) {
  const int n_layer = static_cast<int>(layers_.size());
  // Slots per class in proportion to its layers; at most one per expert.
  const int64_t all = static_cast<int64_t>(n_layer) * n_expert_;
  const int64_t want = std::clamp<int64_t>(options.slots, 0, all);
  int64_t given = 0;
  std::vector<int64_t> per_class(classes_.size());
  for (size_t c = 0; c < classes_.size(); ++c) {
    per_class[c] = want * static_cast<int64_t>(classes_[c].layers.size()) / n_layer;
    given += per_class[c];
  }
  for (size_t c = 0; given < want; c = (c + 1) % per_class.size()) {
    const int64_t cap = static_cast<int64_t>(classes_[c].layers.size()) * n_expert_;
    if (per_class[c] < cap) {
      ++per_class[c];
      ++given;
    }
  }
  total_slots_ = want;
  uint64_t arena_bytes = 0;
  for (size_t c = 0; c < classes_.size(); ++c) {
    arena_bytes += per_class[c] * classes_[c].slot_bytes;
  }
  ASSIGN_OR_RETURN(const auto mem, cuda::MemoryInfo());
  if (arena_bytes > mem.first) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "expert stream: an arena of ", want, " slots needs ", arena_bytes,
        " bytes of device memory; ", mem.first, " are free"));
  }
  for (size_t c = 0; c < classes_.size(); ++c) {
    SlotClass& k = classes_[c];
    ASSIGN_OR_RETURN(std::unique_ptr<memory::EvictionPolicy> policy,
                     memory::MakePolicy(options.policy));
    memory::SlotCacheOptions o;
    o.n_layer = n_layer;
    o.n_expert = n_expert_;
    o.n_slots = static_cast<int32_t>(per_class[c]);
    o.slice_bytes = k.expert_bytes();
    ASSIGN_OR_RETURN(k.cache, memory::SlotCache::Create(o, std::move(policy)));
    if (per_class[c] > 0) {
      ASSIGN_OR_RETURN(k.arena,
                       cuda::DeviceBuffer::Create(per_class[c] * k.slot_bytes));
    }
    // What a host-computed or skipped expert's table entries point at.
    if (options.miss.policy != memory::MissPolicy::kCopy || options.skipping) {
      ASSIGN_OR_RETURN(k.zero, cuda::DeviceBuffer::Create(k.slot_bytes));
      RETURN_IF_ERROR(cuda::Memset(k.zero.data(), 0, k.slot_bytes, compute));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExpertStream>> ExpertStream::Create(
    std::vector<LayerExpertViews> layers, std::vector<void*> gate_up_tables,
    std::vector<void*> down_tables, const ExpertStreamOptions& options,
    cuda::Stream compute) {
  if (layers.empty() || gate_up_tables.size() != layers.size() ||
      down_tables.size() != layers.size()) {
    return absl::InvalidArgumentError(
        "expert stream: one pair of pointer tables per layer is needed");
  }
  auto s = std::unique_ptr<ExpertStream>(new ExpertStream());
  s->layers_ = std::move(layers);
  s->gate_up_tables_ = std::move(gate_up_tables);
  s->down_tables_ = std::move(down_tables);
  s->n_expert_ = static_cast<int>(s->layers_[0].gate.n_expert);
  s->policy_ = options.policy;
  const int n_layer = static_cast<int>(s->layers_.size());

  RETURN_IF_ERROR(s->BuildClasses());
  RETURN_IF_ERROR(s->AllocateArena(options, compute));
  s->splitter_ = memory::MissSplitter(options.miss);
  s->zeroed_.resize(n_layer);
  s->stale_.assign(n_layer, false);

  std::vector<std::array<ExpertMatrix, 3>> views;
  for (const LayerExpertViews& v : s->layers_) views.push_back({v.gate, v.up, v.down});
  s->host_tier_min_bytes_ = HostTier::MinBytes(views, /*exclusive=*/false);
  if (options.host_tier_bytes > 0) {
    if (options.files == nullptr) {
      return absl::InvalidArgumentError("expert stream: a host tier needs the files");
    }
    // Exclusive tiers (the default) stage disk reads in a layer's worth of
    // slots of their own; a tier too small for that as well as one layer
    // runs inclusive rather than refusing a load it used to accept.
    bool exclusive = options.exclusive_tiers;
    if (const uint64_t need = HostTier::MinBytes(views, /*exclusive=*/true);
        exclusive && options.host_tier_bytes < need &&
        options.host_tier_bytes >= s->host_tier_min_bytes_) {
      std::fprintf(stderr,
                   "expert stream: a host tier of %llu bytes cannot also stage a layer's %d "
                   "experts (%llu bytes needed for exclusive tiers): running inclusive\n",
                   static_cast<unsigned long long>(options.host_tier_bytes), s->n_expert_,
                   static_cast<unsigned long long>(need));
      exclusive = false;
    }
    ASSIGN_OR_RETURN(s->host_, HostTier::Create(*options.files, std::move(views),
                                                {.bytes = options.host_tier_bytes,
                                                 .threads = 8,
                                                 .policy = options.host_tier_policy,
                                                 .exclusive = exclusive}));
    s->exclusive_ = exclusive;
  }
  if (s->host_ == nullptr) RETURN_IF_ERROR(s->RegisterWindows());

  ASSIGN_OR_RETURN(s->mirror_,
                   cuda::PinnedBuffer::Create(static_cast<uint64_t>(n_layer) * 3 *
                                              s->n_expert_ * sizeof(void*)));
  for (int l = 0; l < n_layer; ++l) {
    for (int32_t e = 0; e < s->n_expert_; ++e) s->PointAtHost(l, e);
    RETURN_IF_ERROR(cuda::CopyToDevice(s->gate_up_tables_[l], s->mirror(l),
                                       2 * s->n_expert_ * sizeof(void*), compute));
    RETURN_IF_ERROR(cuda::CopyToDevice(s->down_tables_[l],
                                       s->mirror(l) + 2 * s->n_expert_,
                                       s->n_expert_ * sizeof(void*), compute));
  }
  RETURN_IF_ERROR(cuda::Synchronize(compute));
  // Demand copies go ahead of any other work on the device.
  ASSIGN_OR_RETURN(s->copy_, cuda::CreateStream(/*priority=*/-1));
  ASSIGN_OR_RETURN(s->copied_, cuda::CreateEvent(/*timing=*/true));
  ASSIGN_OR_RETURN(s->copy_started_, cuda::CreateEvent(/*timing=*/true));
  ASSIGN_OR_RETURN(s->prefetch_, cuda::CreateStream(/*priority=*/0));
  ASSIGN_OR_RETURN(s->prefetched_, cuda::CreateEvent());
  s->budget_ = memory::PrefetchBudget(n_layer, {.min = 1, .max = s->n_expert_, .start = 1});
  return s;
}

absl::Status ExpertStream::BuildClasses() {
  const int n_layer = static_cast<int>(layers_.size());
  // Slot classes by slice sizes, in order of first appearance.
  for (int l = 0; l < n_layer; ++l) {
    const LayerExpertViews& v = layers_[l];
    if (v.gate.n_expert != n_expert_ || v.up.n_expert != n_expert_ ||
        v.down.n_expert != n_expert_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expert stream: layer ", l, " has a different expert count"));
    }
    int found = -1;
    for (size_t c = 0; c < classes_.size(); ++c) {
      const SlotClass& k = classes_[c];
      if (k.gate_bytes == v.gate.slice_bytes && k.up_bytes == v.up.slice_bytes &&
          k.down_bytes == v.down.slice_bytes) {
        found = static_cast<int>(c);
      }
    }
    if (found < 0) {
      SlotClass k;
      k.gate_bytes = v.gate.slice_bytes;
      k.up_bytes = v.up.slice_bytes;
      k.down_bytes = v.down.slice_bytes;
      k.up_offset = memory::AlignUp(k.gate_bytes);
      k.down_offset = k.up_offset + memory::AlignUp(k.up_bytes);
      k.slot_bytes = k.down_offset + memory::AlignUp(k.down_bytes);
      classes_.push_back(std::move(k));
      found = static_cast<int>(classes_.size()) - 1;
    }
    classes_[found].layers.push_back(l);
    class_of_.push_back(found);
  }
  return absl::OkStatus();
}

absl::Status ExpertStream::RegisterWindows() {
  // The expert tensors' pages, in merged windows (tensors of one shard that
  // share a page or touch merge), each registered once.
  std::vector<std::pair<const uint8_t*, const uint8_t*>> spans;
  for (const LayerExpertViews& v : layers_) {
    for (const ExpertMatrix* m : {&v.gate, &v.up, &v.down}) {
      spans.push_back({PageDown(m->data),
                       PageUp(m->data + m->slice_bytes * m->n_expert)});
    }
  }
  std::sort(spans.begin(), spans.end());
  for (const auto& [b, e] : spans) {
    if (!windows_.empty() && b <= windows_.back().end) {
      windows_.back().end = std::max(windows_.back().end, e);
    } else {
      windows_.push_back({b, e, nullptr});
    }
  }
  for (size_t i = 0; i < windows_.size(); ++i) {
    Window& w = windows_[i];
    absl::Status reg = cuda::HostRegister(w.begin, w.end - w.begin, true);
    if (!reg.ok()) {
      windows_.resize(i);  // only those registered are unregistered
      return absl::Status(reg.code(), absl::StrCat(
          "expert stream: registering ", w.end - w.begin,
          " bytes of expert weights with the driver failed (", reg.message(),
          "); the experts must fit in host RAM for streaming"));
    }
    ASSIGN_OR_RETURN(void* d, cuda::DevicePointerOf(w.begin));
    w.device = static_cast<const uint8_t*>(d);
  }
  return absl::OkStatus();
}

ExpertStream::~ExpertStream() {
  if (copy_ != nullptr) {
    cuda::Synchronize(copy_).IgnoreError();
    cuda::DestroyStream(copy_);
  }
  if (copied_ != nullptr) cuda::DestroyEvent(copied_);
  if (copy_started_ != nullptr) cuda::DestroyEvent(copy_started_);
  if (prefetch_ != nullptr) {
    cuda::Synchronize(prefetch_).IgnoreError();
    cuda::DestroyStream(prefetch_);
  }
  if (prefetched_ != nullptr) cuda::DestroyEvent(prefetched_);
  for (const Window& w : windows_) cuda::HostUnregister(w.begin).IgnoreError();
}

const void* ExpertStream::Mapped(const uint8_t* host) const {
  auto it = std::upper_bound(
      windows_.begin(), windows_.end(), host,
      [](const uint8_t* p, const Window& w) { return p < w.begin; });
  // Create registered a window around every expert byte.
  --it;
  return it->device + (host - it->begin);
}

HostTier::Slices ExpertStream::InMapping(int layer, int32_t expert) const {
  const LayerExpertViews& v = layers_[layer];
  return {v.gate.expert(expert).data, v.up.expert(expert).data,
          v.down.expert(expert).data};
}

void ExpertStream::PointAtHost(int layer, int32_t expert) {
  const LayerExpertViews& v = layers_[layer];
  const void** t = mirror(layer);
  if (host_ != nullptr) {
    // Not resident anywhere the device can read: Acquire points it again
    // before any kernel reads it.
    t[expert] = t[n_expert_ + expert] = t[2 * n_expert_ + expert] = nullptr;
    return;
  }
  t[expert] = Mapped(v.gate.expert(expert).data);
  t[n_expert_ + expert] = Mapped(v.up.expert(expert).data);
  t[2 * n_expert_ + expert] = Mapped(v.down.expert(expert).data);
}

void ExpertStream::PointAtSlot(int layer, int32_t expert, const SlotClass& c,
                               int32_t slot) {
  auto* base = static_cast<uint8_t*>(SlotAddress(c, slot));
  const void** t = mirror(layer);
  t[expert] = base;
  t[n_expert_ + expert] = base + c.up_offset;
  t[2 * n_expert_ + expert] = base + c.down_offset;
}

void ExpertStream::PointAtZero(int layer, int32_t expert) {
  const SlotClass& c = classes_[class_of_[layer]];
  auto* base = c.zero.as<uint8_t>();
  const void** t = mirror(layer);
  t[expert] = base;
  t[n_expert_ + expert] = base + c.up_offset;
  t[2 * n_expert_ + expert] = base + c.down_offset;
  zeroed_[layer].push_back(expert);
}

void ExpertStream::RestoreZeroed(int layer, std::vector<int>& dirty) {
  if (zeroed_[layer].empty()) return;
  const void* zero = classes_[class_of_[layer]].zero.data();
  for (const int32_t e : zeroed_[layer]) {
    // A prefetch may have put it in a slot since: then it points there.
    if (mirror(layer)[e] == zero) PointAtHost(layer, e);
  }
  zeroed_[layer].clear();
  Mark(dirty, layer);
}

ExpertWeights ExpertStream::WeightsAt(int layer, int32_t expert,
                                      const HostTier::Slices& from) const {
  const LayerExpertViews& v = layers_[layer];
  ExpertWeights w{v.gate.expert(expert), v.up.expert(expert),
                  v.down.expert(expert)};
  w.gate.data = from[0];
  w.up.data = from[1];
  w.down.data = from[2];
  return w;
}

std::vector<size_t> ExpertStream::SplitMisses(
    int layer, absl::Span<const int32_t> experts, const SlotClass& c) {
  int misses = 0;
  std::vector<size_t> reachable;
  for (size_t i = 0; i < experts.size(); ++i) {
    if (c.cache->Peek({layer, experts[i]}).has_value()) continue;
    ++misses;
    // With a host tier, only what the tier holds is in host RAM.
    if (host_ == nullptr || host_->Peek(layer, experts[i]).has_value()) {
      reachable.push_back(i);
    }
  }
  const int n_reachable = static_cast<int>(reachable.size());
  const int n = splitter_.HostShare(misses, n_reachable, c.expert_bytes());
  // The last ones: decode lists a token's experts by decreasing weight, so
  // the device keeps those that matter most for the arena.
  return std::vector<size_t>(reachable.end() - n, reachable.end());
}

absl::Status ExpertStream::ObserveCopies() {
  if (copy_bytes_pending_ == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const bool done, cuda::EventDone(copied_));
  if (!done) return absl::OkStatus();
  ASSIGN_OR_RETURN(const float ms, cuda::ElapsedMs(copy_started_, copied_));
  splitter_.ObserveDevice(copy_bytes_pending_, ms / 1e3);
  copy_bytes_pending_ = 0;
  return absl::OkStatus();
}

void ExpertStream::Fill(int layer, int32_t expert, const SlotClass& c,
                        int32_t slot, const HostTier::Slices& from) {
  auto* d = static_cast<uint8_t*>(SlotAddress(c, slot));
  batch_.Add(d, from[0], c.gate_bytes);
  batch_.Add(d + c.up_offset, from[1], c.up_bytes);
  batch_.Add(d + c.down_offset, from[2], c.down_bytes);
  PointAtSlot(layer, expert, c, slot);
}

absl::Status ExpertStream::Demote(const SlotClass& c, int32_t slot,
                                  memory::ExpertKey victim) {
  ASSIGN_OR_RETURN(const std::optional<HostTier::Destinations> to,
                   host_->Demote(victim.layer, victim.expert));
  if (!to.has_value()) return absl::OkStatus();  // held already, or refused
  const auto* d = static_cast<const uint8_t*>(SlotAddress(c, slot));
  demote_.Add((*to)[0], d, c.gate_bytes);
  demote_.Add((*to)[1], d + c.up_offset, c.up_bytes);
  demote_.Add((*to)[2], d + c.down_offset, c.down_bytes);
  return absl::OkStatus();
}

absl::Status ExpertStream::Flush(cuda::Stream stream) {
  const auto t0 = std::chrono::steady_clock::now();
  // Stream order puts every copy out of a slot before the copy into it.
  absl::Status s = cuda::CopyBatch(demote_.dst, demote_.src, demote_.size, stream);
  if (s.ok()) s = cuda::CopyBatch(batch_.dst, batch_.src, batch_.size, stream);
  demote_.Clear();
  batch_.Clear();  // keeps the capacity: a batch is built every step
  issue_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

absl::Status ExpertStream::Upload(const std::vector<int>& layers, int now,
                                  cuda::Stream compute) {
  const auto t0 = std::chrono::steady_clock::now();
  absl::Cleanup timed = [&] {
    upload_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int l : layers) {
    if (l != now) {
      stale_[l] = true;
      continue;
    }
    stale_[l] = false;
    RETURN_IF_ERROR(cuda::CopyToDevice(gate_up_tables_[l], mirror(l),
                                       2 * n_expert_ * sizeof(void*), compute));
    RETURN_IF_ERROR(cuda::CopyToDevice(down_tables_[l], mirror(l) + 2 * n_expert_,
                                       n_expert_ * sizeof(void*), compute));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ExpertStream::SettlePrefetches(int layer) {
  bool done = true;
  if (!in_flight_.empty()) {
    ASSIGN_OR_RETURN(done, cuda::EventDone(prefetched_));
    if (!prefetch_observed_ && layer == prefetch_layer_) {
      budget_.Observe(layer, static_cast<int>(in_flight_.size()), done);
      prefetch_observed_ = true;
    }
  }
  if (host_ != nullptr) {
    // Host slots are reused below: copies out of them must be done.
    RETURN_IF_ERROR(cuda::Synchronize(copy_));
    RETURN_IF_ERROR(cuda::Synchronize(prefetch_));
    done = true;
  }
  if (in_flight_.empty()) return false;
  if (!done) return true;
  CompletePrefetches();
  return false;
}

void ExpertStream::CompletePrefetches() {
  for (const memory::ExpertKey& k : in_flight_) {
    classes_[class_of_[k.layer]].cache->CompletePrefetch(k);
  }
  in_flight_.clear();
}

void ExpertStream::SplitHostShare(int layer, absl::Span<const int32_t> all,
                                  const SlotClass& c, std::vector<HostExpert>* on_host,
                                  std::vector<int32_t>& experts,
                                  std::vector<int32_t>& host_ids) {
  experts.assign(all.begin(), all.end());
  host_ids.clear();
  if (on_host == nullptr || splitter_.policy() == memory::MissPolicy::kCopy) return;
  const std::vector<size_t> picked = SplitMisses(layer, all, c);
  std::vector<bool> is_host(all.size(), false);
  for (const size_t i : picked) is_host[i] = true;
  experts.clear();
  for (size_t i = 0; i < all.size(); ++i) {
    (is_host[i] ? host_ids : experts).push_back(all[i]);
  }
  for (const size_t i : picked) {
    on_host->push_back({static_cast<int>(i), all[i], {}});
  }
}

absl::Status ExpertStream::FindSources(int layer, absl::Span<const int32_t> experts,
                                       absl::Span<const memory::SlotAssignment> got,
                                       absl::Span<const int32_t> host_ids, Sources& s) {
  s.from.assign(got.size(), {});
  s.from_disk.assign(got.size(), false);
  s.host_from.assign(host_ids.size(), {});
  if (host_ == nullptr) {
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i].kind != memory::SlotAssignment::kHit) s.from[i] = InMapping(layer, experts[i]);
    }
    for (size_t j = 0; j < host_ids.size(); ++j) s.host_from[j] = InMapping(layer, host_ids[j]);
    return absl::OkStatus();
  }
  // The experts not in a device slot are made present in the host tier
  // first (read from disk when it lacks them); the host's experts are there
  // already and are held through this step by the same Load. Exclusive: a
  // device miss the tier lacks is staged, not kept there.
  std::vector<int32_t> need;
  std::vector<size_t> where;
  absl::InlinedVector<bool, 64> pass;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].kind == memory::SlotAssignment::kHit) continue;
    need.push_back(experts[i]);
    where.push_back(i);
    pass.push_back(exclusive_ && got[i].kind == memory::SlotAssignment::kMiss);
  }
  need.insert(need.end(), host_ids.begin(), host_ids.end());
  pass.resize(need.size(), false);
  if (need.empty()) return absl::OkStatus();
  std::vector<HostTier::Slices> loaded;
  std::vector<bool> disk;
  RETURN_IF_ERROR(host_->Load(layer, need, loaded, disk, pass));
  for (size_t j = 0; j < where.size(); ++j) {
    s.from[where[j]] = loaded[j];
    s.from_disk[where[j]] = disk[j];
  }
  for (size_t j = 0; j < host_ids.size(); ++j) s.host_from[j] = loaded[where.size() + j];
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ExpertStream::PlaceMisses(int layer, SlotClass& c,
                                                   absl::Span<const int32_t> experts,
                                                   absl::Span<const memory::SlotAssignment> got,
                                                   const Sources& s, std::vector<int>& dirty) {
  const uint64_t expert_bytes = c.expert_bytes();
  uint64_t copied = 0;
  std::vector<int32_t> moved_up;  // exclusive: device misses the host tier held
  for (size_t i = 0; i < got.size(); ++i) {
    const memory::SlotAssignment& a = got[i];
    const int32_t e = experts[i];
    if (a.kind == memory::SlotAssignment::kHit) continue;
    c.cache->RecordBytes(s.from_disk[i] ? memory::Tier::kDisk : memory::Tier::kHost,
                         expert_bytes);
    if (a.kind == memory::SlotAssignment::kMiss) {
      if (a.evicted) {
        PointAtHost(a.evicted_key.layer, a.evicted_key.expert);
        Mark(dirty, a.evicted_key.layer);
        if (exclusive_) RETURN_IF_ERROR(Demote(c, a.slot, a.evicted_key));
      }
      if (exclusive_ && !s.from_disk[i]) moved_up.push_back(e);
      if (copied == 0) RETURN_IF_ERROR(cuda::RecordEvent(copy_started_, copy_));
      Fill(layer, e, c, a.slot, s.from[i]);
      // Issued at once: the link starts on the first expert while the
      // others are issued (else after the whole layer's batch call).
      if (copy_per_expert.on()) RETURN_IF_ERROR(Flush(copy_));
      Mark(dirty, layer);
      copied += expert_bytes;
    } else if (host_ != nullptr) {
      // Forced: the kernels read the pinned host slot in place.
      const void** t = mirror(layer);
      t[e] = s.from[i][0];
      t[n_expert_ + e] = s.from[i][1];
      t[2 * n_expert_ + e] = s.from[i][2];
      Mark(dirty, layer);
    }
    // (Forced without a host tier: the table already points at the mapped
    // window; the bytes still cross the bus once.)
  }
  // After every demotion of the step: a slot freed here is not offered
  // again before the copies out of it are done (the next step).
  for (const int32_t e : moved_up) host_->Promote(layer, e);
  return copied;
}

bool ExpertStream::InMemory(int layer, int32_t expert) const {
  if (host_ == nullptr) return true;
  const memory::ExpertKey key{layer, expert};
  if (classes_[class_of_[layer]].cache->Peek(key).has_value()) return true;
  return host_->Peek(layer, expert).has_value();
}

absl::Status ExpertStream::Acquire(int layer, absl::Span<const int32_t> all,
                                   cuda::Stream compute,
                                   std::vector<HostExpert>* on_host,
                                   std::vector<int32_t>* pending,
                                   absl::Span<const int32_t> skipped) {
  if (on_host != nullptr) on_host->clear();
  if (pending != nullptr) pending->clear();
  RETURN_IF_ERROR(ObserveCopies());
  // Prefetches whose copies already landed are plain residents now; those
  // still running stay protected through this step and count as late if
  // demanded.
  ASSIGN_OR_RETURN(const bool prefetch_running, SettlePrefetches(layer));
  SlotClass& c = classes_[class_of_[layer]];
  c.cache->BeginStep();
  // Layers whose mirror changed (an eviction may touch another layer).
  std::vector<int> dirty;
  if (stale_[layer]) Mark(dirty, layer);
  RestoreZeroed(layer, dirty);
  if (!skipped.empty() && c.zero.data() == nullptr) {
    return absl::FailedPreconditionError(
        "expert stream: experts skipped, but the stream was made without skipping");
  }
  for (const int32_t e : skipped) {
    PointAtZero(layer, e);
    Mark(dirty, layer);
  }
  skipped_ += skipped.size();
  // The miss policy's share goes to the host; the rest as before.
  std::vector<int32_t> experts, host_ids;
  SplitHostShare(layer, all, c, on_host, experts, host_ids);
  ASSIGN_OR_RETURN(const std::vector<memory::SlotAssignment> got,
                   c.cache->Acquire(layer, experts));
  if (!host_ids.empty()) RETURN_IF_ERROR(c.cache->ComputedOnHost(layer, host_ids));
  Sources src;
  RETURN_IF_ERROR(FindSources(layer, experts, got, host_ids, src));
  for (size_t j = 0; j < host_ids.size(); ++j) {
    (*on_host)[j].weights = WeightsAt(layer, host_ids[j], src.host_from[j]);
    PointAtZero(layer, host_ids[j]);
    Mark(dirty, layer);
  }
  ASSIGN_OR_RETURN(const uint64_t copied, PlaceMisses(layer, c, experts, got, src, dirty));
  if (copied > 0) {
    RETURN_IF_ERROR(Flush(copy_));
    RETURN_IF_ERROR(cuda::RecordEvent(copied_, copy_));
    if (pending == nullptr) {
      RETURN_IF_ERROR(cuda::StreamWaitEvent(compute, copied_));
    } else {
      for (size_t i = 0; i < experts.size(); ++i) {
        if (got[i].kind == memory::SlotAssignment::kMiss) pending->push_back(experts[i]);
      }
    }
    copy_bytes_pending_ = copied;
  }
  // A demanded expert still being prefetched: the products wait for the
  // batch. Otherwise it stays in flight (its slots protected) until an
  // Acquire finds it landed or needs it.
  if (prefetch_running &&
      std::any_of(got.begin(), got.end(), [](const memory::SlotAssignment& a) { return a.pending; })) {
    RETURN_IF_ERROR(cuda::StreamWaitEvent(compute, prefetched_));
    CompletePrefetches();
  }
  return Upload(dirty, layer, compute);
}

absl::StatusOr<int64_t> ExpertStream::Warm(absl::Span<const memory::ExpertKey> keys,
                                           cuda::Stream compute) {
  std::vector<int64_t> room(classes_.size());
  for (size_t i = 0; i < classes_.size(); ++i) room[i] = classes_[i].cache->options().n_slots;
  std::vector<int> dirty;
  int64_t placed = 0;
  for (const memory::ExpertKey& k : keys) {
    if (k.layer < 0 || k.layer >= static_cast<int32_t>(layers_.size())) continue;
    const int ci = class_of_[k.layer];
    SlotClass& c = classes_[ci];
    if (room[ci] == 0 || c.cache->Peek(k).has_value()) continue;
    HostTier::Slices src = InMapping(k.layer, k.expert);
    if (host_ != nullptr) {
      // One at a time: the next Load may reuse the host slot this copy reads.
      std::vector<HostTier::Slices> loaded;
      std::vector<bool> disk;
      const bool pass = exclusive_;  // exclusive: the device's, not the tier's
      RETURN_IF_ERROR(host_->Load(k.layer, absl::MakeConstSpan(&k.expert, 1), loaded, disk,
                                  absl::MakeConstSpan(&pass, 1)));
      src = loaded[0];
    }
    ASSIGN_OR_RETURN(const memory::SlotAssignment a, c.cache->Offer(k));
    if (a.kind != memory::SlotAssignment::kMiss) continue;
    if (a.evicted) {  // not expected while there is room; kept consistent
      PointAtHost(a.evicted_key.layer, a.evicted_key.expert);
      Mark(dirty, a.evicted_key.layer);
      if (exclusive_) RETURN_IF_ERROR(Demote(c, a.slot, a.evicted_key));
    }
    Fill(k.layer, k.expert, c, a.slot, src);
    Mark(dirty, k.layer);
    --room[ci];
    ++placed;
    if (host_ != nullptr) {
      RETURN_IF_ERROR(Flush(copy_));
      RETURN_IF_ERROR(cuda::Synchronize(copy_));
    }
  }
  RETURN_IF_ERROR(Flush(copy_));
  RETURN_IF_ERROR(cuda::Synchronize(copy_));
  // Every touched table is rewritten by its layer's next Acquire.
  RETURN_IF_ERROR(Upload(dirty, /*now=*/-1, compute));
  return placed;
}

absl::Status ExpertStream::Prefetch(int layer, absl::Span<const int32_t> experts,
                                    cuda::Stream compute) {
  if (!in_flight_.empty()) return absl::OkStatus();  // one batch at a time
  SlotClass& c = classes_[class_of_[layer]];
  std::vector<int> dirty;
  const size_t budget = prefetch_budget.on() ? budget_.Experts(layer) : experts.size();
  for (const int32_t e : experts) {
    if (in_flight_.size() >= budget) break;
    // With a host tier only what it already holds is prefetched: a disk
    // read would stall this thread, which is the decode loop.
    HostTier::Slices src = InMapping(layer, e);
    if (host_ != nullptr) {
      std::optional<HostTier::Slices> held = host_->Peek(layer, e);
      if (!held.has_value()) continue;
      src = *held;
    }
    ASSIGN_OR_RETURN(const memory::SlotAssignment a,
                     c.cache->Prefetch({layer, e}));
    if (a.kind != memory::SlotAssignment::kMiss) continue;
    if (a.evicted) {
      PointAtHost(a.evicted_key.layer, a.evicted_key.expert);
      Mark(dirty, a.evicted_key.layer);
      // Its copy down waits, with the fills, for this step's demand copies.
      if (exclusive_) RETURN_IF_ERROR(Demote(c, a.slot, a.evicted_key));
    }
    Fill(layer, e, c, a.slot, src);
    Mark(dirty, layer);
    in_flight_.push_back({layer, e});
    c.cache->RecordBytes(memory::Tier::kHost,
                         c.expert_bytes());
  }
  if (in_flight_.empty()) return Upload(dirty, /*now=*/-1, compute);
  prefetch_layer_ = layer;
  prefetch_observed_ = false;
  // Behind this step's demand copies, never beside them: the link is the
  // limit, and a prefetch that shares it delays the layer waiting now.
  if (copy_bytes_pending_ > 0) {
    RETURN_IF_ERROR(cuda::StreamWaitEvent(prefetch_, copied_));
  }
  RETURN_IF_ERROR(Flush(prefetch_));
  RETURN_IF_ERROR(cuda::RecordEvent(prefetched_, prefetch_));
  // The tables may point at the new slots at once: the only kernels that
  // read them (layer `layer`'s) run after the next Acquire, which makes the
  // compute stream wait for these copies.
  return Upload(dirty, /*now=*/-1, compute);
}

void SetCopyPerExpertEnabled(bool enabled) { copy_per_expert.Set(enabled); }

uint64_t ExpertStream::arena_bytes() const {
  uint64_t b = 0;
  for (const SlotClass& c : classes_) b += c.arena.bytes();
  return b;
}

ExpertStreamStats ExpertStream::Stats() const {
  ExpertStreamStats s;
  s.streaming = true;
  s.policy = policy_;
  s.miss_policy = memory::MissPolicyName(splitter_.policy());
  s.copy_bytes_per_s = splitter_.device_bytes_per_s();
  s.host_bytes_per_s = splitter_.host_bytes_per_s();
  s.host_fixed_s = splitter_.host_fixed_s();
  s.host_path_saving_s = splitter_.smoothed_saving_s();
  s.slots_capacity = total_slots_;
  s.experts = static_cast<int64_t>(layers_.size()) * n_expert_;
  s.arena_bytes = arena_bytes();
  for (const Window& w : windows_) s.host_tier_bytes += w.end - w.begin;
  s.host_tier_min_bytes = host_tier_min_bytes_;
  if (host_ != nullptr) {
    s.host_tier = true;
    s.exclusive_tiers = exclusive_;
    s.host_tier_bytes = host_->bytes();
    s.host_tier_counters = host_->Snapshot();
  }
  for (const SlotClass& c : classes_) {
    s.slot_bytes = std::max(s.slot_bytes, c.slot_bytes);
    s.counters.Add(c.cache->Snapshot());
  }
  s.counters.skipped = skipped_;
  s.copy_issue_s = issue_s_;
  s.table_upload_s = upload_s_;
  s.prefetch_batches_landed = budget_.landed();
  s.prefetch_batches_late = budget_.late();
  return s;
}

}  // namespace sluice
