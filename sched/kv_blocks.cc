#include "sched/kv_blocks.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::sched {

absl::StatusOr<KvBlockPool> KvBlockPool::Create(int32_t num_blocks, int32_t block_tokens) {
  if (num_blocks < 1 || block_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("kv blocks: ", num_blocks, " blocks of ",
                                                   block_tokens,
                                                   " tokens: both must be >= 1"));
  }
  return KvBlockPool(num_blocks, block_tokens);
}

KvBlockPool::KvBlockPool(int32_t num_blocks, int32_t block_tokens)
    : num_blocks_(num_blocks), block_tokens_(block_tokens) {
  // Block 0 is handed out first.
  free_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int64_t KvBlockPool::BlocksFor(int64_t tokens) const {
  if (tokens <= 0) return 0;
  return (tokens + block_tokens_ - 1) / block_tokens_;
}

int64_t KvBlockPool::BlocksNeeded(SeqId seq, int64_t tokens) const {
  const auto it = tables_.find(seq);
  const int64_t held = it == tables_.end() ? 0 : static_cast<int64_t>(it->second.size());
  const int64_t want = BlocksFor(tokens);
  return want > held ? want - held : 0;
}

absl::Status KvBlockPool::Reserve(SeqId seq, int64_t tokens) {
  const int64_t need = BlocksNeeded(seq, tokens);
  if (need == 0) return absl::OkStatus();
  if (need > free_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "kv blocks: sequence ", seq, " needs ", need, " more blocks of ", block_tokens_,
        " tokens to hold ", tokens, " tokens; ", free_blocks(), " of ", num_blocks_,
        " are free"));
  }
  std::vector<int32_t>& table = tables_[seq];
  for (int64_t i = 0; i < need; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return absl::OkStatus();
}

int64_t KvBlockPool::Release(SeqId seq) {
  const auto it = tables_.find(seq);
  if (it == tables_.end()) return 0;
  const int64_t n = static_cast<int64_t>(it->second.size());
  // Freed in reverse, so that the sequence's first block is handed out next.
  for (auto b = it->second.rbegin(); b != it->second.rend(); ++b) free_.push_back(*b);
  tables_.erase(it);
  return n;
}

absl::Span<const int32_t> KvBlockPool::Table(SeqId seq) const {
  const auto it = tables_.find(seq);
  if (it == tables_.end()) return {};
  return it->second;
}

int64_t KvBlockPool::TokensHeld(SeqId seq) const {
  return static_cast<int64_t>(Table(seq).size()) * block_tokens_;
}

absl::Status KvBlockPool::CheckInvariants() const {
  // Where each block is: -1 nowhere yet, -2 free, else the index of its
  // table in visiting order.
  std::vector<int64_t> where(num_blocks_, -1);
  auto place = [&](int32_t b, int64_t owner, SeqId seq) -> absl::Status {
    if (b < 0 || b >= num_blocks_) {
      return absl::InternalError(absl::StrCat("kv blocks: block id ", b, " outside [0, ",
                                              num_blocks_, ")",
                                              owner >= 0 ? absl::StrCat(" in sequence ", seq, "'s table")
                                                         : std::string(" on the free list")));
    }
    if (where[b] != -1) {
      return absl::InternalError(absl::StrCat("kv blocks: block ", b, " is held twice",
                                              owner >= 0 ? absl::StrCat(" (sequence ", seq, ")")
                                                         : std::string(" (free list)")));
    }
    where[b] = owner;
    return absl::OkStatus();
  };
  for (int32_t b : free_) {
    if (absl::Status s = place(b, -2, 0); !s.ok()) return s;
  }
  int64_t owner = 0, held = 0;
  for (const auto& [seq, table] : tables_) {
    if (table.empty()) {
      return absl::InternalError(absl::StrCat("kv blocks: sequence ", seq, " has an empty table"));
    }
    for (int32_t b : table) {
      if (absl::Status s = place(b, owner, seq); !s.ok()) return s;
    }
    held += static_cast<int64_t>(table.size());
    ++owner;
  }
  if (held + free_blocks() != num_blocks_) {
    return absl::InternalError(absl::StrCat("kv blocks: ", held, " held + ", free_blocks(),
                                            " free != ", num_blocks_, " blocks"));
  }
  return absl::OkStatus();
}

absl::StatusOr<StateSlots> StateSlots::Create(int32_t slots) {
  if (slots < 1) {
    return absl::InvalidArgumentError(absl::StrCat("state slots: ", slots, ": must be >= 1"));
  }
  return StateSlots(slots);
}

StateSlots::StateSlots(int32_t slots) : owner_(slots) {}

std::optional<int32_t> StateSlots::Acquire(SeqId seq) {
  if (const auto it = slot_of_.find(seq); it != slot_of_.end()) return it->second;
  for (int32_t s = 0; s < num_slots(); ++s) {
    if (!owner_[s].has_value()) {
      owner_[s] = seq;
      slot_of_[seq] = s;
      return s;
    }
  }
  return std::nullopt;
}

bool StateSlots::Release(SeqId seq) {
  const auto it = slot_of_.find(seq);
  if (it == slot_of_.end()) return false;
  owner_[it->second].reset();
  slot_of_.erase(it);
  return true;
}

std::optional<int32_t> StateSlots::SlotOf(SeqId seq) const {
  const auto it = slot_of_.find(seq);
  if (it == slot_of_.end()) return std::nullopt;
  return it->second;
}

absl::Status StateSlots::CheckInvariants() const {
  size_t held = 0;
  for (int32_t s = 0; s < num_slots(); ++s) {
    if (!owner_[s].has_value()) continue;
    ++held;
    const auto it = slot_of_.find(*owner_[s]);
    if (it == slot_of_.end() || it->second != s) {
      return absl::InternalError(absl::StrCat("state slots: slot ", s, " is held by sequence ",
                                              *owner_[s], ", which does not name it"));
    }
  }
  if (held != slot_of_.size()) {
    return absl::InternalError(absl::StrCat("state slots: ", slot_of_.size(),
                                            " sequences name a slot but ", held,
                                            " slots are held"));
  }
  return absl::OkStatus();
}

}  // namespace sluice::sched
