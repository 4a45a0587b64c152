// The eviction policies of slot_cache.h: LRU, decayed LFU, W-TinyLFU and
// Belady; KeyFrequency.
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

// W-TinyLFU over exact decayed counts (slot_cache.h). The window is an
// intrusive LRU list like LruPolicy's; the main part an ordered set by the
// key's score (KeyFrequency::Score at its last access), ties to the least
// recent, then the lower slot.
class TinyLfuPolicy final : public EvictionPolicy {
 public:
  explicit TinyLfuPolicy(TinyLfuOptions o)
      : window_fraction_(o.window_fraction > 0 ? o.window_fraction
                                               : kDefaultTinyLfuWindow),
        own_(o.frequency == nullptr),
        freq_(own_ ? std::make_shared<KeyFrequency>(
                         o.half_life > 0 ? o.half_life : kDefaultTinyLfuHalfLife)
                   : std::move(o.frequency)) {}

  void Reset(int32_t n_slots) override {
    n_slots_ = n_slots;
    window_quota_ = std::clamp<int32_t>(
        static_cast<int32_t>(std::lround(window_fraction_ * n_slots)), 1,
        std::max<int32_t>(1, n_slots));
    prev_.assign(n_slots, -1);
    next_.assign(n_slots, -1);
    entry_.assign(n_slots, Entry{});
    head_ = tail_ = -1;
    window_count_ = 0;
    main_.clear();
  }
  void OnAccess(int32_t slot, ExpertKey key, bool inserted,
                uint64_t access) override {
    if (own_) freq_->Touch(key, access);
    Entry& e = entry_[slot];
    const Where was = inserted ? kNowhere : e.where;
    Unlink(slot);  // before `last` changes: the main part is ordered by it
    e.key = key;
    e.last = access;
    e.slot = slot;
    if (was == kMain) {
      PushMain(slot);  // re-scored
      return;
    }
    PushWindow(slot);
    if (was == kWindow) return;
    // While the main part has room, the window's overflow moves there
    // without a contest.
    while (window_count_ > window_quota_ &&
           static_cast<int32_t>(main_.size()) < n_slots_ - window_quota_) {
      const int32_t oldest = tail_;
      Unlink(oldest);
      PushMain(oldest);
    }
  }
  void OnRemove(int32_t slot) override { Unlink(slot); }
  void OnLookupWithoutSlot(ExpertKey key, uint64_t access) override {
    if (own_) freq_->Touch(key, access);
  }
  int32_t ChooseVictim(absl::FunctionRef<bool(int32_t)> evictable,
                       uint64_t) override {
    int32_t candidate = -1;  // the window's least recent evictable key
    for (int32_t s = tail_; s >= 0; s = prev_[s]) {
      if (evictable(s)) {
        candidate = s;
        break;
      }
    }
    int32_t victim = -1;  // the main part's least used evictable key
    for (const MainEntry& m : main_) {
      if (evictable(m.slot)) {
        victim = m.slot;
        break;
      }
    }
    // The new key will enter the window: at its quota, the window's oldest
    // has to leave, into the main part (over the victim) or out.
    if (candidate >= 0 && window_count_ >= window_quota_) {
      if (victim < 0) return candidate;
      if (freq_->Score(entry_[candidate].key) > freq_->Score(entry_[victim].key)) {
        Unlink(candidate);
        PushMain(candidate);
        return victim;
      }
      return candidate;
    }
    return victim >= 0 ? victim : candidate;
  }
  bool Admit(ExpertKey candidate, int32_t victim, uint64_t) override {
    return freq_->Score(candidate) > freq_->Score(entry_[victim].key);
  }
  std::string Name() const override { return "tinylfu"; }

 private:
  enum Where : uint8_t { kNowhere, kWindow, kMain };
  struct Entry {
    ExpertKey key;
    uint64_t last = 0;
    double score = 0;  // in the main part: the score it is ordered by
    int32_t slot = -1;
    Where where = kNowhere;
  };
  struct MainEntry {
    double score;
    uint64_t last;
    int32_t slot;
    bool operator<(const MainEntry& o) const {
      if (score != o.score) return score < o.score;
      if (last != o.last) return last < o.last;
      return slot < o.slot;
    }
  };
  void PushWindow(int32_t slot) {
    next_[slot] = head_;
    prev_[slot] = -1;
    if (head_ >= 0) prev_[head_] = slot;
    head_ = slot;
    if (tail_ < 0) tail_ = slot;
    entry_[slot].where = kWindow;
    ++window_count_;
  }
  void PushMain(int32_t slot) {
    Entry& e = entry_[slot];
    e.score = freq_->Score(e.key);
    e.where = kMain;
    main_.insert({e.score, e.last, slot});
  }
  void Unlink(int32_t slot) {
    Entry& e = entry_[slot];
    if (e.where == kMain) {
      main_.erase({e.score, e.last, slot});
    } else if (e.where == kWindow) {
      if (prev_[slot] >= 0) next_[prev_[slot]] = next_[slot];
      else head_ = next_[slot];
      if (next_[slot] >= 0) prev_[next_[slot]] = prev_[slot];
      else tail_ = prev_[slot];
      prev_[slot] = next_[slot] = -1;
      --window_count_;
    }
    e.where = kNowhere;
  }

  const double window_fraction_;
  const bool own_;
  std::shared_ptr<KeyFrequency> freq_;
  int32_t n_slots_ = 0;
  int32_t window_quota_ = 1;
  std::vector<int32_t> prev_, next_;  // the window's list, most recent at head
  int32_t head_ = -1, tail_ = -1;
  int32_t window_count_ = 0;
  std::vector<Entry> entry_;
  std::set<MainEntry> main_;
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

KeyFrequency::KeyFrequency(double half_life) : half_life_(half_life) {}

void KeyFrequency::Add(ExpertKey key, double uses, uint64_t access) {
  const double x = static_cast<double>(access) / half_life_ + std::log2(uses);
  auto [it, fresh] = log_score_.try_emplace(Pack(key), x);
  if (fresh) return;
  const double hi = std::max(it->second, x);
  const double lo = std::min(it->second, x);
  it->second = hi + std::log2(1.0 + std::exp2(lo - hi));
}

double KeyFrequency::Score(ExpertKey key) const {
  auto it = log_score_.find(Pack(key));
  return it == log_score_.end() ? -std::numeric_limits<double>::infinity()
                                : it->second;
}

double KeyFrequency::Count(ExpertKey key, uint64_t now) const {
  auto it = log_score_.find(Pack(key));
  if (it == log_score_.end()) return 0;
  return std::exp2(it->second - static_cast<double>(now) / half_life_);
}

std::unique_ptr<EvictionPolicy> MakeTinyLfuPolicy(TinyLfuOptions options) {
  return std::make_unique<TinyLfuPolicy>(std::move(options));
}

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
  if (name == "tinylfu") return MakeTinyLfuPolicy();
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown slot cache policy \"", std::string(name),
      "\"; valid: lru, lfu, tinylfu (belady is offline only: slotsim)"));
}

}  // namespace sluice::memory
