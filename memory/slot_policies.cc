// The eviction policies of slot_cache.h: LRU, decayed LFU and Belady.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "memory/slot_cache.h"

namespace sluice::memory {
namespace {

// An intrusive doubly linked list over slot ids, most recent at the head:
// touching and choosing are O(1) plus the protected slots skipped at the
// tail (the step's own experts are at the head, so usually none).
class LruPolicy final : public EvictionPolicy {
 public:
  void Reset(int32_t n_slots) override {
    prev_.assign(n_slots, -1);
    next_.assign(n_slots, -1);
    linked_.assign(n_slots, false);
    head_ = tail_ = -1;
  }
  void OnAccess(int32_t slot, ExpertKey, bool, uint64_t) override {
    Unlink(slot);
    next_[slot] = head_;
    prev_[slot] = -1;
    if (head_ >= 0) prev_[head_] = slot;
    head_ = slot;
    if (tail_ < 0) tail_ = slot;
    linked_[slot] = true;
  }
  void OnRemove(int32_t slot) override { Unlink(slot); }
  int32_t ChooseVictim(absl::FunctionRef<bool(int32_t)> evictable,
                       uint64_t) override {
    for (int32_t s = tail_; s >= 0; s = prev_[s]) {
      if (evictable(s)) return s;
    }
    return -1;
  }
  std::string Name() const override { return "lru"; }

 private:
  void Unlink(int32_t slot) {
    if (!linked_[slot]) return;
    if (prev_[slot] >= 0) next_[prev_[slot]] = next_[slot];
    else head_ = next_[slot];
    if (next_[slot] >= 0) prev_[next_[slot]] = prev_[slot];
    else tail_ = prev_[slot];
    prev_[slot] = next_[slot] = -1;
    linked_[slot] = false;
  }

  std::vector<int32_t> prev_, next_;
  std::vector<bool> linked_;
  int32_t head_ = -1, tail_ = -1;
};

// All scores decay at the same rate, so their order never changes between
// accesses: each slot keeps its score scaled to time 0, in log2 so that it
// cannot overflow over a long run: log2(sum 2^(t_i / half_life)). An access
// is a log-add; the order is an ordered set.
class DecayedLfuPolicy final : public EvictionPolicy {
 public:
  explicit DecayedLfuPolicy(double half_life) : half_life_(half_life) {}

  void Reset(int32_t n_slots) override {
    order_.clear();
    entry_.assign(n_slots, Entry{});
  }
  void OnAccess(int32_t slot, ExpertKey, bool inserted,
                uint64_t access) override {
    Entry& e = entry_[slot];
    if (e.linked) order_.erase(e);
    const double x = static_cast<double>(access) / half_life_;
    if (inserted || !e.linked) {
      e.log_score = x;
    } else {
      const double hi = std::max(e.log_score, x);
      const double lo = std::min(e.log_score, x);
      e.log_score = hi + std::log1p(std::exp2(lo - hi)) / std::log(2.0);
    }
    e.last = access;
    e.slot = slot;
    e.linked = true;
    order_.insert(e);
  }
  void OnRemove(int32_t slot) override {
    Entry& e = entry_[slot];
    if (e.linked) order_.erase(e);
    e.linked = false;
  }
  int32_t ChooseVictim(absl::FunctionRef<bool(int32_t)> evictable,
                       uint64_t) override {
    for (const Entry& e : order_) {
      if (evictable(e.slot)) return e.slot;
    }
    return -1;
  }
  std::string Name() const override { return "lfu"; }

 private:
  struct Entry {
    double log_score = 0;
    uint64_t last = 0;
    int32_t slot = -1;
    bool linked = false;
    // Lowest score first; ties: the least recent, then the lower slot.
    bool operator<(const Entry& o) const {
      if (log_score != o.log_score) return log_score < o.log_score;
      if (last != o.last) return last < o.last;
      return slot < o.slot;
    }
  };
  const double half_life_;
  std::set<Entry> order_;
  std::vector<Entry> entry_;
};

class BeladyPolicy final : public EvictionPolicy {
 public:
  explicit BeladyPolicy(std::vector<ExpertKey> future)
      : future_(std::move(future)) {
    // next_use_[i]: the next access after i of future_[i]'s key.
    next_use_.assign(future_.size(), kNever);
    std::unordered_map<uint64_t, uint64_t> later;
    for (size_t i = future_.size(); i-- > 0;) {
      const uint64_t k = Pack(future_[i]);
      auto it = later.find(k);
      if (it != later.end()) next_use_[i] = it->second;
      later[k] = i;
      positions_[k].push_back(i);
    }
    for (auto& [k, p] : positions_) std::reverse(p.begin(), p.end());
  }

  void Reset(int32_t n_slots) override {
    order_.clear();
    next_.assign(n_slots, kUnlinked);
  }
  void OnAccess(int32_t slot, ExpertKey key, bool, uint64_t access) override {
    OnRemove(slot);
    next_[slot] = NextUse(key, access);
    order_.insert({next_[slot], slot});
  }
  void OnRemove(int32_t slot) override {
    if (next_[slot] != kUnlinked) order_.erase({next_[slot], slot});
    next_[slot] = kUnlinked;
  }
  int32_t ChooseVictim(absl::FunctionRef<bool(int32_t)> evictable,
                       uint64_t) override {
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      if (evictable(it->second)) return it->second;
    }
    return -1;
  }
  std::string Name() const override { return "belady"; }

 private:
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max() - 1;
  static constexpr uint64_t kUnlinked = std::numeric_limits<uint64_t>::max();
  static uint64_t Pack(ExpertKey k) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(k.layer)) << 32) |
           static_cast<uint32_t>(k.expert);
  }
  // A demand access is future_[access] itself; anything else (a prefetch,
  // whose access number is the next lookup's) looks up the key's first use
  // at or after `access`.
  uint64_t NextUse(ExpertKey key, uint64_t access) const {
    if (access < future_.size() && future_[access] == key) {
      return next_use_[access];
    }
    auto it = positions_.find(Pack(key));
    if (it == positions_.end()) return kNever;
    auto p = std::lower_bound(it->second.begin(), it->second.end(), access);
    return p == it->second.end() ? kNever : *p;
  }

  std::vector<ExpertKey> future_;
  std::vector<uint64_t> next_use_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> positions_;
  std::set<std::pair<uint64_t, int32_t>> order_;  // (next use, slot)
  std::vector<uint64_t> next_;                    // per slot; kUnlinked
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeLruPolicy() {
  return std::make_unique<LruPolicy>();
}

std::unique_ptr<EvictionPolicy> MakeDecayedLfuPolicy(double half_life) {
  return std::make_unique<DecayedLfuPolicy>(half_life);
}

std::unique_ptr<EvictionPolicy> MakeBeladyPolicy(
    std::vector<ExpertKey> future) {
  return std::make_unique<BeladyPolicy>(std::move(future));
}

absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakePolicy(
    std::string_view name) {
  if (name == "lru") return MakeLruPolicy();
  if (name == "lfu") return MakeDecayedLfuPolicy(kDefaultLfuHalfLife);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown slot cache policy \"", std::string(name),
                   "\"; valid: lru, lfu (belady is offline only: slotsim)"));
}

}  // namespace sluice::memory
