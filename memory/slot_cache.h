// The expert slot cache POLICY: which routed expert (layer, expert) sits in
// which of a fixed number of equal device slots. Plain C++: no CUDA, no
// device memory. The caller (the CUDA model; tools/slotsim offline) owns the
// arena and the copies; this class only decides and counts.
//
// One SlotCache is one slot class: slots of one size (one expert's gate, up
// and down slices of one layer shape). Most models have one class; a model
// whose layers have several expert shapes builds one SlotCache per shape and
// sends each the lookups of its layers (layer ids stay global).
//
// A step is what the caller computes at once, typically one layer of one
// micro-batch:
//
//   cache.BeginStep();
//   ASSIGN_OR_RETURN(auto got, cache.Acquire(layer, union_of_routed_experts));
//   for (size_t i = 0; i < got.size(); ++i) {
//     const SlotAssignment& a = got[i];
//     if (a.kind == SlotAssignment::kMiss) {
//       if (a.evicted) table[a.evicted_key] = nullptr;   // device pointer table
//       CopyIntoSlot(a.slot, {layer, experts[i]});       // caller's copy
//     }
//     if (a.kind == SlotAssignment::kForced) ComputeWithoutSlot(experts[i]);
//   }
//   ... compute ...
//   cache.Release();
//
// The experts of the step in flight are protected (never chosen as victims)
// until Release() or the next BeginStep(); so are slots whose prefetch is
// still in flight (until CompletePrefetch). With no evictable slot a miss is
// `forced`: the caller computes that expert without a slot.
//
// Cost: Acquire is O(k) array lookups (a dense (layer, expert) -> slot
// table, no hashing) plus, per miss, the policy's victim choice: amortised
// O(1) for LRU (an intrusive list), O(log n_slots) for lfu and Belady
// (ordered sets). Victim searches skip protected slots, of which there are
// at most the step's experts plus the prefetches in flight.
//
// Thread-safety: every method may be called from any thread; an internal
// mutex serialises them. The cache is meant to be driven by one forward pass
// at a time, with Snapshot() read from a metrics thread. EvictionPolicy
// objects are not thread-safe: the cache calls them under its lock only.
#ifndef SLUICE_MEMORY_SLOT_CACHE_H_
#define SLUICE_MEMORY_SLOT_CACHE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "memory/slot_counters.h"

namespace sluice::memory {

struct ExpertKey {
  int32_t layer = 0;
  int32_t expert = 0;
  friend bool operator==(ExpertKey a, ExpertKey b) {
    return a.layer == b.layer && a.expert == b.expert;
  }
  friend bool operator!=(ExpertKey a, ExpertKey b) { return !(a == b); }
};

// Chooses victims among the occupied slots. The cache tells it about every
// access by an access number: the cache's lookup count before that lookup
// (0, 1, 2, ... over the cache's life; prefetches do not advance it), so an
// offline policy can index a known future (BeladyPolicy).
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  // Forget everything; slots are [0, n_slots).
  virtual void Reset(int32_t n_slots) = 0;
  // `slot` now holds `key` (a demand fill or a prefetch: `inserted`) or was
  // hit by a lookup of it.
  virtual void OnAccess(int32_t slot, ExpertKey key, bool inserted,
                        uint64_t access) = 0;
  // `slot` was emptied (its key evicted).
  virtual void OnRemove(int32_t slot) = 0;
  // The occupied slot to evict among those for which evictable(slot) is
  // true, or -1 if there is none. A policy may reorganise itself here (a
  // segmented one moves a winner between its segments); the cache then
  // either evicts the slot or, for an Offer the policy does not Admit,
  // leaves it.
  virtual int32_t ChooseVictim(absl::FunctionRef<bool(int32_t)> evictable,
                               uint64_t access) = 0;
  // A lookup of `key` that took no slot (forced, or computed on the host):
  // frequency-aware policies count it; others ignore it.
  virtual void OnLookupWithoutSlot(ExpertKey key, uint64_t access) {}
  // SlotCache::Offer only (a key placed without being looked up: an expert
  // demoted from the device into the host tier): whether `candidate` is
  // worth evicting `victim`'s key for. Default: always.
  virtual bool Admit(ExpertKey candidate, int32_t victim, uint64_t access) {
    return true;
  }
  virtual std::string Name() const = 0;
};

// Decayed use counts of keys, resident or not: count(k) = sum over k's
// accesses of 2^(-(now - t) / half_life), t counted in accesses. Every count
// decays at the same rate, so their order only changes on an access; each is
// kept scaled to time 0, in log2 (log2 sum 2^(t / half_life)), which cannot
// overflow over a long run. Score() compares keys; Count() converts to a
// count at `now`.
//
// A frequency-aware policy owns one, or several caches share one (the device
// arena and the host tier of memory/expert_tiers.h), so that an expert moved
// between them keeps its history. Not thread-safe: sharers serialise.
class KeyFrequency {
 public:
  // Precondition: half_life > 0.
  explicit KeyFrequency(double half_life);
  void Touch(ExpertKey key, uint64_t access) { Add(key, 1, access); }
  // `uses` uses at once (a saved profile's counts; uses > 0).
  void Add(ExpertKey key, double uses, uint64_t access);
  // log2 of the count scaled to time 0; -infinity for a key never touched.
  double Score(ExpertKey key) const;
  // The decayed count at access `now` (0 for a key never touched).
  double Count(ExpertKey key, uint64_t now) const;
  double half_life() const { return half_life_; }
  size_t keys() const { return log_score_.size(); }

 private:
  static uint64_t Pack(ExpertKey k) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(k.layer)) << 32) |
           static_cast<uint32_t>(k.expert);
  }
  const double half_life_;
  absl::flat_hash_map<uint64_t, double> log_score_;
};

// Least recently used.
std::unique_ptr<EvictionPolicy> MakeLruPolicy();

// Frequency-weighted LRU (decayed frequency, LRFU-like; Name() "lfu"): each
// slot's score is the sum over its accesses since it was filled of
// 2^(-(now - t) / half_life), t counted in accesses; the lowest score is
// evicted (ties: the least recent). A large half_life tends to LFU, a small
// one to LRU. Precondition: half_life > 0.
std::unique_ptr<EvictionPolicy> MakeDecayedLfuPolicy(double half_life);

// The half-life MakePolicy("lfu") uses, in accesses (lookups): about 10
// tokens of a 48-layer, 8-experts-per-token model. Measured with slotsim
// (docs/SLOT_CACHE.md): longer half-lives win on stationary (Zipf) routing
// but let stale experts squat when routing drifts (a recorded trace), where
// shorter ones approach LRU.
inline constexpr double kDefaultLfuHalfLife = 4096;

// Belady's MIN (offline only): evicts the key used furthest in the future.
// future[i] is the key of access i, in the order the cache will see them
// (the flattened lookups of the replay); accesses past its end count as
// never used again.
std::unique_ptr<EvictionPolicy> MakeBeladyPolicy(std::vector<ExpertKey> future);

// Frequency-aware and scan-resistant (Name() "tinylfu"; W-TinyLFU after
// Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient Cache Admission
// Policy", with exact decayed counts instead of a sketch: the key space,
// layers x experts, is small). The slots are split into
//   - a window, LRU, of window_fraction of the slots (at least 1): every
//     key placed enters it;
//   - the main part, ordered by decayed use count (KeyFrequency, over every
//     access of the key, resident or not, so an expert evicted and needed
//     again keeps its history).
// When a slot is needed and the window is full, the window's least recent
// key competes with the main part's least used one: it moves into the main
// part only if its count is higher, else it is the one evicted. So a scan
// (a prefill wave that touches every expert once, one odd request's few
// experts) passes through the window and leaves the main part, the decode
// hot set, as it was; a key used again and again wins its way in. While
// the main part has room, the window's overflow moves there freely. Admit
// (an Offer) takes the candidate only if its count beats the victim's.
struct TinyLfuOptions {
  // In accesses (lookups of the cache, or of the sharers of `frequency`).
  double half_life = 0;  // 0: kDefaultTinyLfuHalfLife
  double window_fraction = 0;  // 0: kDefaultTinyLfuWindow
  // Shared counts, fed by their owner before each lookup (every lookup of
  // every sharer); null: the policy owns its counts and feeds them itself
  // (its hits, fills and lookups without a slot).
  std::shared_ptr<KeyFrequency> frequency;
};
// Measured with slotsim (docs/SLOT_CACHE.md, "Host-tier policy").
inline constexpr double kDefaultTinyLfuHalfLife = 16384;
inline constexpr double kDefaultTinyLfuWindow = 0.01;
std::unique_ptr<EvictionPolicy> MakeTinyLfuPolicy(TinyLfuOptions options = {});

// The pinned host tier's policy (model/cuda/host_tier.h) unless told
// otherwise: on the recorded and synthetic traces of docs/SLOT_CACHE.md
// ("Host-tier policy") tinylfu keeps more of the device's misses off disk
// than LRU in every case but one (a 13-slot arena smaller than one token,
// where the host tier holds exactly the token's experts and LRU's recency
// is what fits), and prefill waves do not flush it.
inline constexpr char kDefaultHostTierPolicy[] = "tinylfu";

// The online policies by name: "lru", "lfu" (kDefaultLfuHalfLife) or
// "tinylfu" (TinyLfuOptions{}). InvalidArgument naming the valid names
// otherwise. Belady needs the future, so it is built with MakeBeladyPolicy
// only.
absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakePolicy(
    std::string_view name);

// The outcome of one expert of an Acquire, or of a Prefetch.
struct SlotAssignment {
  enum Kind {
    kHit,     // already in `slot`
    kMiss,    // assigned `slot`; the caller fills it
    kForced,  // no evictable slot: compute without one (slot = -1)
    // Prefetch only: nothing done (already resident, or no evictable slot).
    kNone,
  };
  Kind kind = kNone;
  int32_t slot = -1;
  // kMiss (and a prefetch's kMiss): a victim was evicted to make room.
  bool evicted = false;
  ExpertKey evicted_key;
  // kHit on a slot whose prefetch has not completed: wait for its copy.
  bool pending = false;
};

struct SlotCacheOptions {
  int32_t n_layer = 0;       // layer ids are [0, n_layer)
  int32_t n_expert = 0;      // expert ids are [0, n_expert)
  int32_t n_slots = 0;       // 0 is valid: every miss is forced
  uint64_t slice_bytes = 0;  // one slot's bytes (for bytes_streamed/forced)
};

class SlotCache {
 public:
  // InvalidArgument when n_layer or n_expert < 1, n_slots < 0, or policy is
  // null.
  static absl::StatusOr<std::unique_ptr<SlotCache>> Create(
      SlotCacheOptions options, std::unique_ptr<EvictionPolicy> policy);

  // Ends the previous step (unprotects its experts) and starts another.
  void BeginStep();
  // Unprotects the experts of the step in flight.
  void Release();

  // One assignment per expert of `experts`, in order; they become protected
  // until Release()/BeginStep(). The hits of the call are protected first,
  // then the misses take slots in order, so earlier ones win slots and a
  // miss never evicts an expert of the same step. Each call with at least
  // one kForced counts once in `exhausted`. Errors: InvalidArgument for a
  // layer or expert out of range or an expert repeated in one call
  // (counters, slots and recency are then untouched).
  absl::StatusOr<std::vector<SlotAssignment>> Acquire(
      int32_t layer, absl::Span<const int32_t> experts);

  // Counts `experts` of `layer`, none of them resident, as looked up and
  // missed by the step in flight, computed by the host CPU (host_computed,
  // bytes_host_computed): no slot is taken and recency is not touched.
  // Errors: InvalidArgument for a layer or expert out of range, a repeated
  // expert, or one that is resident (that is a hit: Acquire it); counters
  // are then untouched.
  absl::Status ComputedOnHost(int32_t layer, absl::Span<const int32_t> experts);

  // Asks for `key` to be brought in ahead of demand. kMiss: the caller
  // copies it into `slot` and calls CompletePrefetch when the copy is done;
  // until then the slot is protected. kNone: already resident or no
  // evictable slot (nothing counted). Not a lookup: hit counters do not
  // move. Errors: InvalidArgument for a key out of range.
  absl::StatusOr<SlotAssignment> Prefetch(ExpertKey key);
  // The prefetch copy of `key` finished. No-op when `key` has no prefetch
  // in flight (completed twice, or never prefetched).
  void CompletePrefetch(ExpertKey key);

  // Places `key` without a lookup (an expert demoted into this tier from
  // the one above): kMiss with its slot (the caller copies it there; the
  // slot is protected through the step in flight, like a fill), or kNone
  // when it is resident already, nothing is evictable, or the policy does
  // not Admit it over the victim. Counted in `offered` / `offers_admitted`
  // (and evictions), not in lookups. Errors: InvalidArgument out of range.
  absl::StatusOr<SlotAssignment> Offer(ExpertKey key);
  // Frees the slot of `key` (its bytes moved to another tier): the slot it
  // had, or nullopt when it is not resident. Protection does not stop it:
  // the caller says its copy out of the slot is done.
  std::optional<int32_t> Remove(ExpertKey key);

  // Adds bytes moved from `tier` (the caller's measure of where a miss was
  // served from).
  void RecordBytes(Tier tier, uint64_t bytes);

  // The slot holding `key`, without counting a lookup or touching recency;
  // nullopt when it is not resident or out of range.
  std::optional<int32_t> Peek(ExpertKey key) const;
  // The key in `slot`, or nullopt if it is empty or out of range.
  std::optional<ExpertKey> SlotKey(int32_t slot) const;

  SlotCacheCounters Snapshot() const;
  const SlotCacheOptions& options() const { return options_; }
  std::string policy_name() const;

 private:
  struct Slot {
    bool occupied = false;
    ExpertKey key;
    uint64_t protected_step = 0;  // == step_ while the step uses it
    bool prefetched = false;      // filled by Prefetch, not yet demanded
    bool in_flight = false;       // prefetch copy not completed
  };

  SlotCache(SlotCacheOptions options, std::unique_ptr<EvictionPolicy> policy);
  int64_t Index(ExpertKey key) const {
    return static_cast<int64_t>(key.layer) * options_.n_expert + key.expert;
  }
  bool InRange(ExpertKey key) const {
    return key.layer >= 0 && key.layer < options_.n_layer && key.expert >= 0 &&
           key.expert < options_.n_expert;
  }
  bool Evictable(int32_t slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // InvalidArgument naming `what` (prefetch, offer) for a key out of range.
  absl::Status CheckKey(ExpertKey key, const char* what) const;
  // A free slot, or a victim evicted (reported through `a`); -1 if none.
  int32_t TakeSlot(SlotAssignment& a, uint64_t access)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The policy's victim among the evictable slots, or -1.
  int32_t ChooseVictim(uint64_t access) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Empties `victim` (reported through `a`), counting the eviction.
  void Evict(int32_t victim, SlotAssignment& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Place(int32_t slot, ExpertKey key, uint64_t access)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SlotCacheOptions options_;
  mutable absl::Mutex mu_;
  std::unique_ptr<EvictionPolicy> policy_ ABSL_GUARDED_BY(mu_);
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> free_ ABSL_GUARDED_BY(mu_);   // stack of empty slots
  std::vector<int32_t> where_ ABSL_GUARDED_BY(mu_);  // Index(key) -> slot/-1
  // InvalidArgument for a layer or expert out of range or an expert
  // repeated in `experts`; starts a call (call_, seen_).
  absl::Status CheckCall(int32_t layer, absl::Span<const int32_t> experts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Duplicate detection in Acquire without clearing: seen_[expert] ==
  // call_ marks an expert already in this call.
  std::vector<uint64_t> seen_ ABSL_GUARDED_BY(mu_);
  uint64_t call_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t step_ ABSL_GUARDED_BY(mu_) = 1;
  SlotCacheCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_SLOT_CACHE_H_
