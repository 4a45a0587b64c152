#include "model/model.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/model_files.h"

namespace sluice {
namespace {

// The prefix of a chunk's error messages: none for a batch of one chunk, so
// Forward's messages read as they always have.
std::string Where(size_t i, size_t n) {
  return n == 1 ? std::string() : absl::StrCat("chunk ", i, ": ");
}

absl::Status CheckChunk(const BatchChunk& c, const std::string& where,
                        int64_t n_vocab) {
  if (c.state == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, "Forward: null state"));
  }
  if (c.tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "Forward: empty batch"));
  }
  if (c.position != c.state->position()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "Forward: the chunk starts at position ", c.position,
                     " but its state is at ", c.state->position()));
  }
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    if (c.tokens[i] < 0 || c.tokens[i] >= n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "Forward: token id ", c.tokens[i], " at batch index ", i,
          " is outside the vocabulary [0, ", n_vocab, ")"));
    }
  }
  const int64_t end = static_cast<int64_t>(c.position) +
                      static_cast<int64_t>(c.tokens.size());
  if (end > c.state->capacity()) {
    return absl::OutOfRangeError(absl::StrCat(
        where, "context length exceeded: ", c.position, " tokens held + ",
        c.tokens.size(), " new > context length ", c.state->capacity()));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t BatchForwardStats::experts_acquired() const {
  return std::accumulate(experts_per_layer.begin(), experts_per_layer.end(),
                         int64_t{0});
}

absl::Status Model::Forward(absl::Span<const int32_t> tokens,
                            SequenceState& state, LogitRows rows,
                            std::vector<float>* logits) const {
  const BatchChunk chunk{&state, state.position(), tokens, rows};
  return ForwardBatch(absl::MakeConstSpan(&chunk, 1), logits).status();
}

absl::StatusOr<BatchForwardStats> Model::ForwardBatch(
    absl::Span<const BatchChunk> chunks, std::vector<float>* logits) const {
  if (chunks.empty()) {
    return absl::InvalidArgumentError("ForwardBatch: no chunks");
  }
  bool any_logits = false;
  absl::flat_hash_set<const SequenceState*> states;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const std::string where = Where(i, chunks.size());
    RETURN_IF_ERROR(CheckChunk(chunks[i], where, info().n_vocab));
    if (!states.insert(chunks[i].state).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "ForwardBatch: the state of an earlier chunk again"));
    }
    any_logits = any_logits || chunks[i].rows != LogitRows::kNone;
  }
  if (any_logits && logits == nullptr) {
    return absl::InvalidArgumentError("Forward: logits requested but null");
  }
  // Micro-batches bound the activation memory. They are cut in chunk order,
  // and the rows of a chunk do not depend on where it is cut, so neither do
  // the logits.
  BatchForwardStats stats;
  std::vector<float> piece_logits;
  if (logits != nullptr) logits->clear();
  std::vector<BatchChunk> pieces;
  size_t next = 0;  // first chunk not finished
  size_t done = 0;  // tokens of chunks[next] already evaluated
  while (next < chunks.size()) {
    pieces.clear();
    size_t room = kMaxMicroBatch;
    while (next < chunks.size() && room > 0) {
      const BatchChunk& c = chunks[next];
      const size_t n = std::min(room, c.tokens.size() - done);
      const bool last = done + n == c.tokens.size();
      const LogitRows rows = c.rows == LogitRows::kAll
                                 ? LogitRows::kAll
                                 : (last ? c.rows : LogitRows::kNone);
      pieces.push_back({c.state, c.state->position(), c.tokens.subspan(done, n), rows});
      room -= n;
      done = last ? 0 : done + n;
      next += last ? 1 : 0;
    }
    BatchForwardStats piece_stats;
    RETURN_IF_ERROR(ForwardBatchImpl(pieces, &piece_logits, &piece_stats));
    for (const BatchChunk& p : pieces) {
      p.state->Advance(static_cast<int>(p.tokens.size()));
    }
    if (logits != nullptr) {
      logits->insert(logits->end(), piece_logits.begin(), piece_logits.end());
    }
    const std::vector<int32_t>& per = piece_stats.experts_per_layer;
    if (stats.experts_per_layer.size() < per.size()) {
      stats.experts_per_layer.resize(per.size(), 0);
    }
    for (size_t il = 0; il < per.size(); ++il) stats.experts_per_layer[il] += per[il];
  }
  return stats;
}

absl::Status Model::ForwardBatchImpl(absl::Span<const BatchChunk> pieces,
                                     std::vector<float>* logits,
                                     BatchForwardStats* stats) const {
  logits->clear();
  std::vector<float> piece_logits;
  for (const BatchChunk& p : pieces) {
    RETURN_IF_ERROR(ForwardImpl(p.tokens, *p.state, p.rows, &piece_logits));
    if (p.rows != LogitRows::kNone) {
      logits->insert(logits->end(), piece_logits.begin(), piece_logits.end());
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
