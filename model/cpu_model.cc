#include "model/cpu_model.h"

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "model/arch_util.h"
#include "model/attention.h"
#include "model/delta_net.h"
#include "model/expert_skip.h"
#include "model/mla.h"
#include "model/moe.h"
#include "model/state.h"

namespace sluice {
namespace {

class CpuModel final : public Model {
 public:
  CpuModel(ArchDesc desc, const CpuModelOptions& options)
      : desc_(std::move(desc)),
        observer_(options.routing_observer),
        source_(options.routing_source),
        skip_(options.expert_skip),
        residency_(options.expert_residency) {
    if (options.threads > 1) {
      pool_ = std::make_unique<ThreadPool>(options.threads);
    }
    experts_.reserve(desc_.layers.size());
    for (const LayerDesc& l : desc_.layers) {
      experts_.push_back(ResidentExperts(l.moe));
    }
    if (residency_ == nullptr) {
      page_cache_ = std::make_unique<PageCacheResidency>(&experts_);
      residency_ = page_cache_.get();
    }
  }

  const ModelInfo& info() const override { return desc_.info; }

  absl::StatusOr<std::unique_ptr<SequenceState>> CreateState(
      int capacity) const override {
    return std::unique_ptr<SequenceState>(
        std::make_unique<State>(capacity, desc_.StateShapes()));
  }

  uint64_t StateBytes(int capacity) const override {
    return State::BytesFor(capacity, desc_.StateShapes());
  }

  BackendStats Stats() const override { return {.experts = ExpertStats()}; }
  ExpertStreamStats ExpertStats() const override {
    ExpertStreamStats s;
    s.skipping = skip_ > 0;
    s.counters.skipped = skipped_.load(std::memory_order_relaxed);
    return s;
  }

 protected:
  // The pass of one sequence is the batched pass of one piece: one code
  // path, so a batch cannot drift from a chunk computed alone.
  absl::Status ForwardImpl(absl::Span<const int32_t> tokens,
                           SequenceState& seq, LogitRows rows,
                           std::vector<float>* logits) const override {
    const BatchChunk piece{&seq, seq.position(), tokens, rows};
    return ForwardBatchImpl(absl::MakeConstSpan(&piece, 1), logits, nullptr);
  }

  absl::Status ForwardBatchImpl(absl::Span<const BatchChunk> pieces,
                                std::vector<float>* logits,
                                BatchForwardStats* stats) const override;

 private:
  absl::StatusOr<std::vector<State*>> StatesOf(
      absl::Span<const BatchChunk> pieces) const;
  absl::Status RunMixer(int64_t il, const float* xn, int64_t n_tok,
                        State& state, float* y) const;
  // The block's FFN over all n_tok rows; returns the routed experts it
  // acquired (0 for a dense FFN).
  absl::StatusOr<int32_t> RunBlockFfn(int64_t il, absl::Span<const StreamRows> streams,
                                      const float* xn,
                                      int64_t n_tok, float* y) const;
  // The LM head over the rows the pieces ask for (row_begin[i]: piece i's
  // first row of x), in piece order.
  absl::Status PieceLogits(absl::Span<const BatchChunk> pieces,
                           const std::vector<int64_t>& row_begin, float* x,
                           std::vector<float>* logits) const;

  ArchDesc desc_;
  RoutingObserver* observer_;
  RoutingSource* source_;
  const double skip_;
  const ExpertResidency* residency_;
  std::unique_ptr<PageCacheResidency> page_cache_;  // residency_ when none given
  // Experts skipped since the model was built (ExpertStats); passes of
  // several sessions may add at once.
  mutable std::atomic<uint64_t> skipped_{0};
  std::unique_ptr<ThreadPool> pool_;
  // Per layer, every routed expert in place: what the acquire step of a
  // pass copies its experts' entries from.
  std::vector<std::vector<ExpertWeights>> experts_;
};

absl::StatusOr<std::vector<State*>> CpuModel::StatesOf(
    absl::Span<const BatchChunk> pieces) const {
  std::vector<State*> states;
  for (const BatchChunk& p : pieces) {
    auto* state = dynamic_cast<State*>(p.state);
    if (state == nullptr || state->num_blocks() !=
                                static_cast<int>(desc_.layers.size())) {
      return absl::InvalidArgumentError(
          "Forward: the state was not made by this CPU model");
    }
    states.push_back(state);
  }
  return states;
}

absl::Status CpuModel::RunMixer(int64_t il, const float* xn, int64_t n_tok,
                                State& state, float* y) const {
  const LayerDesc& l = desc_.layers[il];
  if (l.mixer == MixerKind::kDeltaNet) {
    return RunDeltaNet(desc_.ssm, l.delta, xn, n_tok, state.block(il), y,
                       pool_.get());
  }
  if (l.mixer == MixerKind::kLatentAttention) {
    return RunMla(desc_.mla, l.mla, xn, n_tok, state.position(),
                  state.block(il), y, pool_.get());
  }
  return RunAttention(desc_.attn, l.attn, xn, n_tok, state.position(),
                      state.block(il), y, pool_.get());
}

absl::StatusOr<int32_t> CpuModel::RunBlockFfn(int64_t il, absl::Span<const StreamRows> streams,
                                              const float* xn,
                                              int64_t n_tok, float* y) const {
  const LayerDesc& l = desc_.layers[il];
  if (l.ffn == FfnKind::kDense) {
    RETURN_IF_ERROR(RunDenseFfn(l.dense, xn, n_tok, y, pool_.get()));
    return 0;
  }
  std::vector<Routing> routes;
  RETURN_IF_ERROR(RouteMoe(desc_.moe, l.moe, xn, n_tok, &routes, pool_.get()));
  if (source_ != nullptr) {
    ForceRouting(*source_, il, desc_.moe.n_expert_used, streams, absl::MakeSpan(routes));
  }
  if (observer_ != nullptr) {
    observer_->OnRouting(il, desc_.moe.n_expert_used, routes);
  }
  // After the observer: traces and usage profiles record what the router
  // chose, not what the lossy mode left of it.
  skipped_.fetch_add(SkipColdExperts(il, desc_.moe.n_expert, desc_.moe.n_expert_used, skip_,
                                     *residency_, absl::MakeSpan(routes)),
                     std::memory_order_relaxed);
  // Acquire: the union of every row's experts, each entry once. The table
  // holds nothing else, so the compute can read no expert not counted.
  const std::vector<int32_t> used = RoutedExperts(desc_.moe, routes);
  std::vector<ExpertWeights> table(desc_.moe.n_expert);
  for (int32_t e : used) table[e] = experts_[il][e];
  RETURN_IF_ERROR(
      ComputeMoe(desc_.moe, l.moe, routes, table, xn, y, pool_.get()));
  return static_cast<int32_t>(used.size());
}

absl::Status CpuModel::PieceLogits(absl::Span<const BatchChunk> pieces,
                                   const std::vector<int64_t>& row_begin,
                                   float* x, std::vector<float>* logits) const {
  const int64_t e = desc_.info.n_embd;
  std::vector<float> h;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].rows == LogitRows::kNone) continue;
    const int64_t first = pieces[i].rows == LogitRows::kAll
                              ? row_begin[i]
                              : row_begin[i + 1] - 1;
    h.insert(h.end(), x + first * e, x + row_begin[i + 1] * e);
  }
  if (h.empty()) {
    logits->clear();
    return absl::OkStatus();
  }
  // Every row of the head is computed as it would be alone (RMSNorm per
  // row, a row-independent product), so gathering changes no value.
  return ComputeLogits(desc_.head.output, desc_.head.output_norm, desc_.eps,
                       h.data(), static_cast<int64_t>(h.size()) / e,
                       LogitRows::kAll, logits, pool_.get());
}

// Rows of all pieces are concatenated, piece after piece. Norms, residuals
// and the FFN run over all of them at once; the mixer runs per piece on its
// own rows, state and positions.
absl::Status CpuModel::ForwardBatchImpl(absl::Span<const BatchChunk> pieces,
                                        std::vector<float>* logits,
                                        BatchForwardStats* stats) const {
  ASSIGN_OR_RETURN(const std::vector<State*> states, StatesOf(pieces));
  std::vector<int64_t> row_begin = {0};
  std::vector<int32_t> tokens;
  std::vector<StreamRows> streams;
  for (const BatchChunk& p : pieces) {
    tokens.insert(tokens.end(), p.tokens.begin(), p.tokens.end());
    row_begin.push_back(static_cast<int64_t>(tokens.size()));
    streams.push_back({p.state, static_cast<int64_t>(p.tokens.size())});
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t e = desc_.info.n_embd;
  const int64_t n_layer = static_cast<int64_t>(desc_.layers.size());
  std::vector<float> x(n * e), xn(n * e), y(n * e);
  RETURN_IF_ERROR(EmbedTokens(desc_.head.token_embd, tokens, x.data()));
  if (stats != nullptr) stats->experts_per_layer.assign(n_layer, 0);
  for (int64_t il = 0; il < n_layer; ++il) {
    const LayerDesc& b = desc_.layers[il];
    RmsNormRows(x.data(), n, e, b.mixer_norm, desc_.eps, xn.data());
    for (size_t i = 0; i < pieces.size(); ++i) {
      const int64_t r = row_begin[i];
      RETURN_IF_ERROR(RunMixer(il, xn.data() + r * e, row_begin[i + 1] - r,
                               *states[i], y.data() + r * e));
    }
    AddResidual(x.data(), y.data(), n * e);
    RmsNormRows(x.data(), n, e, b.ffn_norm, desc_.eps, xn.data());
    ASSIGN_OR_RETURN(const int32_t acquired,
                     RunBlockFfn(il, streams, xn.data(), n, y.data()));
    if (stats != nullptr) stats->experts_per_layer[il] = acquired;
    AddResidual(x.data(), y.data(), n * e);
  }
  return PieceLogits(pieces, row_begin, x.data(), logits);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeCpuModel(
    ArchDesc desc, const CpuModelOptions& options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu model: threads = ", options.threads, " must be >= 1"));
  }
  RETURN_IF_ERROR(BindRoutingSource(options.routing_source, desc));
  return std::unique_ptr<Model>(
      std::make_unique<CpuModel>(std::move(desc), options));
}

absl::StatusOr<std::unique_ptr<Model>> LoadCpuModel(
    const ModelFiles& files, const CpuModelOptions& options) {
  ASSIGN_OR_RETURN(ArchDesc desc, DescribeModel(files));
  return MakeCpuModel(std::move(desc), options);
}

}  // namespace sluice
