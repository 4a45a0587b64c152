#include "model/cpu_model.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/thread_pool.h"
#include "model/arch_util.h"
#include "model/attention.h"
#include "model/delta_net.h"
#include "model/mla.h"
#include "model/moe.h"
#include "model/state.h"

namespace sluice {
namespace {

class CpuModel final : public Model {
 public:
  CpuModel(ArchDesc desc, const CpuModelOptions& options)
      : desc_(std::move(desc)), observer_(options.routing_observer) {
    if (options.threads > 1) {
      pool_ = std::make_unique<kernels::ThreadPool>(options.threads);
    }
    experts_.reserve(desc_.layers.size());
    for (const LayerDesc& l : desc_.layers) {
      experts_.push_back(ResidentExperts(l.moe));
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

 protected:
  absl::Status ForwardImpl(absl::Span<const int32_t> tokens,
                           SequenceState& seq, LogitRows rows,
                           std::vector<float>* logits) const override;

 private:
  absl::Status RunMixer(int64_t il, const float* xn, int64_t n_tok,
                        State& state, float* y) const;
  absl::Status RunBlockMoe(int64_t il, const float* xn, int64_t n_tok,
                           float* y) const;

  ArchDesc desc_;
  RoutingObserver* observer_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  // Per layer, every routed expert in place: the all-resident "acquire".
  std::vector<std::vector<ExpertWeights>> experts_;
};

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

absl::Status CpuModel::RunBlockMoe(int64_t il, const float* xn, int64_t n_tok,
                                   float* y) const {
  const LayerDesc& l = desc_.layers[il];
  if (l.ffn == FfnKind::kDense) {
    return RunDenseFfn(l.dense, xn, n_tok, y, pool_.get());
  }
  std::vector<Routing> routes;
  RETURN_IF_ERROR(RouteMoe(desc_.moe, l.moe, xn, n_tok, &routes, pool_.get()));
  if (observer_ != nullptr) {
    observer_->OnRouting(il, desc_.moe.n_expert_used, routes);
  }
  return ComputeMoe(desc_.moe, l.moe, routes, experts_[il], xn, y,
                    pool_.get());
}

absl::Status CpuModel::ForwardImpl(absl::Span<const int32_t> tokens,
                                   SequenceState& seq, LogitRows rows,
                                   std::vector<float>* logits) const {
  auto* state = dynamic_cast<State*>(&seq);
  if (state == nullptr || state->num_blocks() !=
                              static_cast<int>(desc_.layers.size())) {
    return absl::InvalidArgumentError(
        "Forward: the state was not made by this CPU model");
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t e = desc_.info.n_embd;
  std::vector<float> x(n * e), xn(n * e), y(n * e);
  RETURN_IF_ERROR(EmbedTokens(desc_.head.token_embd, tokens, x.data()));
  for (int64_t il = 0; il < static_cast<int64_t>(desc_.layers.size()); ++il) {
    const LayerDesc& b = desc_.layers[il];
    RmsNormRows(x.data(), n, e, b.mixer_norm, desc_.eps, xn.data());
    RETURN_IF_ERROR(RunMixer(il, xn.data(), n, *state, y.data()));
    AddResidual(x.data(), y.data(), n * e);
    RmsNormRows(x.data(), n, e, b.ffn_norm, desc_.eps, xn.data());
    RETURN_IF_ERROR(RunBlockMoe(il, xn.data(), n, y.data()));
    AddResidual(x.data(), y.data(), n * e);
  }
  return ComputeLogits(desc_.head.output, desc_.head.output_norm, desc_.eps,
                       x.data(), n, rows, logits, pool_.get());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeCpuModel(
    ArchDesc desc, const CpuModelOptions& options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu model: threads = ", options.threads, " must be >= 1"));
  }
  return std::unique_ptr<Model>(
      std::make_unique<CpuModel>(std::move(desc), options));
}

absl::StatusOr<std::unique_ptr<Model>> LoadCpuModel(
    const ModelFiles& files, const CpuModelOptions& options) {
  ASSIGN_OR_RETURN(ArchDesc desc, DescribeModel(files));
  return MakeCpuModel(std::move(desc), options);
}

}  // namespace sluice
