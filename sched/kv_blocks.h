// The memory a running sequence holds, as plain bookkeeping (no device code,
// no threads): KV cache blocks and recurrent-state slots (issue 19).
//
// KvBlockPool: the KV cache of every attention layer cut into fixed blocks
// of `block_tokens` positions. Block b of every attention layer holds the
// keys and values of the same positions, so one block id names a block of
// every layer at once, and a sequence's block table maps its position p to
// block table[p / block_tokens], row p % block_tokens. Free blocks sit on a
// LIFO free list (the most recently freed block is handed out first, which
// keeps the working set small and the order deterministic). A table only
// grows while its sequence lives and is released as a whole. There is no
// prefix sharing (and so no reference counts): a Gated DeltaNet layer's
// recurrent state after a shared prefix is not in any block, so a shared
// prefix would save the attention layers' KV but not the recompute.
//
// StateSlots: a fixed slot per running sequence for what does not grow with
// its length: the conv and recurrent state of every DeltaNet layer (and any
// per-sequence scratch a backend keeps). The lowest free slot is handed out.
//
// Both are deterministic: the same calls give the same ids. Thread-safety:
// none (the scheduler that owns them runs on one thread).
#ifndef SLUICE_SCHED_KV_BLOCKS_H_
#define SLUICE_SCHED_KV_BLOCKS_H_

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sluice::sched {

// A sequence, named by its request id (unique among live sequences).
using SeqId = uint64_t;

class KvBlockPool {
 public:
  // INVALID_ARGUMENT unless num_blocks >= 1 and block_tokens >= 1.
  static absl::StatusOr<KvBlockPool> Create(int32_t num_blocks, int32_t block_tokens);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_tokens() const { return block_tokens_; }
  int32_t free_blocks() const { return static_cast<int32_t>(free_.size()); }
  int32_t used_blocks() const { return num_blocks_ - free_blocks(); }

  // Blocks that hold `tokens` positions: ceil(tokens / block_tokens) (0 for
  // tokens <= 0).
  int64_t BlocksFor(int64_t tokens) const;

  // Blocks `seq` must add to hold `tokens` positions (0 when it already
  // does; BlocksFor(tokens) for a sequence without a table).
  int64_t BlocksNeeded(SeqId seq, int64_t tokens) const;
  bool CanHold(SeqId seq, int64_t tokens) const {
    return BlocksNeeded(seq, tokens) <= free_blocks();
  }

  // Grows `seq`'s table (creating it) until it holds `tokens` positions.
  // All or nothing: RESOURCE_EXHAUSTED, with the numbers, when fewer blocks
  // are free than it needs (nothing changes). tokens <= what it holds is a
  // no-op.
  absl::Status Reserve(SeqId seq, int64_t tokens);

  // Returns every block of `seq` to the free list and forgets its table;
  // the number of blocks freed (0 for a sequence without a table).
  int64_t Release(SeqId seq);

  bool Has(SeqId seq) const { return tables_.count(seq) != 0; }
  // `seq`'s block ids, position order (empty without a table). Valid until
  // the next Reserve or Release of any sequence.
  absl::Span<const int32_t> Table(SeqId seq) const;
  // Positions `seq`'s table holds: Table(seq).size() x block_tokens.
  int64_t TokensHeld(SeqId seq) const;
  // Sequences holding a table.
  size_t num_tables() const { return tables_.size(); }

  // OK when every block is either free or in exactly one table (each once),
  // no table is empty and free + held == num_blocks; INTERNAL naming the
  // first broken rule otherwise.
  absl::Status CheckInvariants() const;

 private:
  KvBlockPool(int32_t num_blocks, int32_t block_tokens);

  int32_t num_blocks_;
  int32_t block_tokens_;
  // Free block ids; the back is handed out next.
  std::vector<int32_t> free_;
  std::unordered_map<SeqId, std::vector<int32_t>> tables_;
};

class StateSlots {
 public:
  // INVALID_ARGUMENT unless slots >= 1.
  static absl::StatusOr<StateSlots> Create(int32_t slots);

  int32_t num_slots() const { return static_cast<int32_t>(owner_.size()); }
  int32_t free_slots() const { return num_slots() - static_cast<int32_t>(slot_of_.size()); }

  // The lowest free slot, now held by `seq`; the slot it holds already when
  // it holds one; nullopt when every slot is held.
  std::optional<int32_t> Acquire(SeqId seq);
  // Frees `seq`'s slot; false when it held none.
  bool Release(SeqId seq);
  std::optional<int32_t> SlotOf(SeqId seq) const;
  // Whether a sequence holds slot `slot` (0 <= slot < num_slots()).
  bool Held(int32_t slot) const { return owner_[slot].has_value(); }

  // OK when the slot -> sequence and sequence -> slot maps agree.
  absl::Status CheckInvariants() const;

 private:
  explicit StateSlots(int32_t slots);

  std::vector<std::optional<SeqId>> owner_;
  std::unordered_map<SeqId, int32_t> slot_of_;
};

}  // namespace sluice::sched

#endif  // SLUICE_SCHED_KV_BLOCKS_H_
