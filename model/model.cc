#include "model/model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/model_files.h"

namespace sluice {

absl::Status Model::Forward(absl::Span<const int32_t> tokens,
                            SequenceState& state, LogitRows rows,
                            std::vector<float>* logits) const {
  if (tokens.empty()) {
    return absl::InvalidArgumentError("Forward: empty batch");
  }
  const int64_t n_vocab = info().n_vocab;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("Forward: token id ", tokens[i], " at batch index ", i,
                       " is outside the vocabulary [0, ", n_vocab, ")"));
    }
  }
  const int64_t end = static_cast<int64_t>(state.position()) +
                      static_cast<int64_t>(tokens.size());
  if (end > state.capacity()) {
    return absl::OutOfRangeError(absl::StrCat(
        "context length exceeded: ", state.position(), " tokens held + ",
        tokens.size(), " new > context length ", state.capacity()));
  }
  if (rows != LogitRows::kNone && logits == nullptr) {
    return absl::InvalidArgumentError("Forward: logits requested but null");
  }
  // Micro-batches bound the activation memory; rows are independent, so
  // the logits do not depend on the split.
  std::vector<float> chunk_logits;
  if (logits != nullptr) logits->clear();
  for (size_t begin = 0; begin < tokens.size(); begin += kMaxMicroBatch) {
    const size_t n = std::min<size_t>(kMaxMicroBatch, tokens.size() - begin);
    const bool last = begin + n == tokens.size();
    const LogitRows chunk_rows =
        rows == LogitRows::kAll ? LogitRows::kAll
                                : (last ? rows : LogitRows::kNone);
    RETURN_IF_ERROR(ForwardImpl(tokens.subspan(begin, n), state, chunk_rows,
                                &chunk_logits));
    state.Advance(static_cast<int>(n));
    if (chunk_rows != LogitRows::kNone) {
      logits->insert(logits->end(), chunk_logits.begin(), chunk_logits.end());
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
