// Loading the CUDA backend's model: the weights onto the device, the expert
// stream and its warm start, the kernels' shapes and limits, the buffers.
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/quant_matmul.h"
#include "loader/model_files.h"
#include "model/cuda/cuda_model_impl.h"
#include "model/engine.h"

namespace sluice::cuda_model_internal {

absl::StatusOr<std::unique_ptr<CudaModel>> CudaModel::Create(
    const ModelFiles& files, ArchDesc desc, const CudaModelOptions& options) {
  RETURN_IF_ERROR(cuda::SetDevice(options.device));
  auto m = std::unique_ptr<CudaModel>(new CudaModel(std::move(desc), options));
  ASSIGN_OR_RETURN(m->stream_, cuda::CreateStream());
  cuda::PrepareKernels();
  cuda::PrepareDecodeKernels();
  cuda::PrepareMlaKernels();
  m->profiler_ = std::make_unique<PassProfiler>(options.profile);
  ASSIGN_OR_RETURN(const auto mem, cuda::MemoryInfo());
  m->free_at_start_ = mem.first;
  const ArchDesc& d = m->desc_;
  int64_t moe_layers = 0;
  for (const LayerDesc& l : d.layers) moe_layers += l.ffn == FfnKind::kMoe ? 1 : 0;
  const int64_t all_experts = moe_layers * d.moe.n_expert;
  int64_t slots = options.experts.slots;
  if (slots < 0 && options.experts.arena_fraction > 0) {
    slots = std::min<int64_t>(
        all_experts,
        static_cast<int64_t>(std::ceil(options.experts.arena_fraction * all_experts - 1e-9)));
  }
  // A model with no routed experts at all has nothing to stream.
  const bool stream_experts = slots >= 0 && moe_layers > 0;
  ASSIGN_OR_RETURN(m->weights_,
                   DeviceWeights::Upload(files, options.device, m->stream_, !stream_experts,
                                         options.load_progress));
  ASSIGN_OR_RETURN(m->token_embd_, m->weights_->Matrix(d.head.token_embd));
  ASSIGN_OR_RETURN(m->output_, m->weights_->Matrix(d.head.output));
  ASSIGN_OR_RETURN(m->output_norm_, m->weights_->Floats(d.head.output_norm));
  m->layers_.resize(d.layers.size());
  for (size_t il = 0; il < d.layers.size(); ++il) {
    RETURN_IF_ERROR(BindLayer(*m->weights_, d.layers[il], d.moe.shared_ff, stream_experts,
                              m->stream_, m->layers_[il]));
  }
  if (stream_experts) {
    RETURN_IF_ERROR(m->CreateExperts(files, slots));
    if (options.expert_warm != nullptr) RETURN_IF_ERROR(m->WarmExperts(*options.expert_warm));
  } else if (options.experts.miss_policy != config::MissPolicy::kCopy) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: expert miss policy \"", config::MissPolicyName(options.experts.miss_policy),
        "\" needs streaming experts (an arena or slot count)"));
  }
  m->DescribeShapes();
  RETURN_IF_ERROR(m->CheckShapes());
  const cuda::DeltaNetShape& s = m->ssm_shape_;
  if (s.state_size > cuda::DeltaNetMaxStateSize()) {
    return absl::InvalidArgumentError(absl::StrCat("cuda backend: ssm.state_size ", s.state_size,
                                                   " exceeds ", cuda::DeltaNetMaxStateSize()));
  }
  if (s.conv_kernel > cuda::kDeltaNetMaxConvTaps) {
    return absl::InvalidArgumentError(absl::StrCat("cuda backend: ssm.conv_kernel ", s.conv_kernel,
                                                   " exceeds ", cuda::kDeltaNetMaxConvTaps));
  }
  RETURN_IF_ERROR(m->AllocateBuffers());
  m->decode_supported_ = DecodeStepSupported(m->Decode());
  if (options.kv_on_demand) {
    ASSIGN_OR_RETURN(m->kv_pages_, cuda::DevicePagePool::Create());
  }
  return m;
}

absl::Status CudaModel::WarmExperts(const memory::ExpertProfile& profile) {
  if (profile.n_layer() != static_cast<int32_t>(desc_.layers.size()) ||
      profile.n_expert() != desc_.moe.n_expert) {
    return absl::OkStatus();
  }
  const memory::WarmPlan plan = memory::PlanWarmStart(
      profile, experts_->slots(), experts_->host_slots(),
      options_.experts.tiers == config::TierMode::kExclusive);
  experts_warm_planned_ = static_cast<int64_t>(plan.device.size() + plan.host.size());
  // The profile counts by block; the stream by its own layers.
  const auto to_stream = [this](const std::vector<memory::ExpertKey>& keys) {
    std::vector<memory::ExpertKey> out;
    for (memory::ExpertKey k : keys) {
      const int sl = layers_[k.layer].moe.stream_layer;
      if (sl >= 0) out.push_back({sl, k.expert});
    }
    return out;
  };
  ASSIGN_OR_RETURN(experts_warmed_, experts_->Warm(to_stream(plan.device), stream_));
  ASSIGN_OR_RETURN(const int64_t host, experts_->WarmHost(to_stream(plan.host)));
  experts_warmed_ += host;
  return absl::OkStatus();
}

absl::Status CudaModel::CreateExperts(const ModelFiles& files, int64_t slots) {
  const ArchDesc& d = desc_;
  std::vector<LayerExpertViews> views;
  std::vector<void*> gate_up, down;
  // Only the blocks with routed experts stream (deepseek2's dense lead
  // blocks have none): the stream's layer i is the i-th of them.
  for (size_t il = 0; il < d.layers.size(); ++il) {
    if (d.layers[il].ffn != FfnKind::kMoe) continue;
    const MoeWeights& w = d.layers[il].moe;
    layers_[il].moe.stream_layer = static_cast<int>(views.size());
    views.push_back({w.gate, w.up, w.down});
    gate_up.push_back(layers_[il].moe.gate_up_table.data());
    down.push_back(layers_[il].moe.down_table.data());
  }
  memory::MissSplitOptions miss;
  miss.policy = options_.experts.miss_policy;
  ASSIGN_OR_RETURN(experts_,
                   ExpertStream::Create(std::move(views), std::move(gate_up), std::move(down),
                                        {.slots = slots,
                                         .policy = std::string(config::EvictionPolicyName(
                                             options_.experts.policy)),
                                         .host_tier_bytes = options_.experts.host_tier_bytes,
                                         .files = &files,
                                         .host_tier_policy = options_.experts.host_tier_policy,
                                         .exclusive_tiers = options_.experts.tiers ==
                                                            config::TierMode::kExclusive,
                                         .miss = miss,
                                         .skipping = options_.experts.skip_threshold > 0},
                                        stream_));
  if (miss.policy == memory::MissPolicy::kCopy) return absl::OkStatus();
  ASSIGN_OR_RETURN(host_, HostMisses::Create(d.moe.n_embd, static_cast<int>(d.moe.n_expert_used),
                                             options_.experts.host_threads));
  host_path_ = true;
  return absl::OkStatus();
}

ExpertStreamStats CudaModel::ByModelLayer(ExpertStreamStats s) const {
  const auto spread = [this](std::vector<uint64_t>& by_stream) {
    std::vector<uint64_t> by_block(layers_.size(), 0);
    for (size_t il = 0; il < layers_.size(); ++il) {
      const int sl = layers_[il].moe.stream_layer;
      if (sl >= 0 && sl < static_cast<int>(by_stream.size())) by_block[il] = by_stream[sl];
    }
    by_stream = std::move(by_block);
  };
  spread(s.counters.layer_lookups);
  spread(s.counters.layer_hits);
  if (s.host_tier) {
    spread(s.host_tier_counters.layer_lookups);
    spread(s.host_tier_counters.layer_hits);
  }
  return s;
}

absl::Status CudaModel::CheckShapes() const {
  for (const LayerDesc& l : desc_.layers) {
    if (l.mixer == MixerKind::kLatentAttention && !cuda::MlaSupported(mla_shape_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cuda backend: latent attention of kv_lora_rank ", mla_shape_.kv_lora_rank,
          " and rope ", mla_shape_.rope.n_rot, " exceeds the device kernel's limits"));
    }
  }
  if (!plain_routing_ && !cuda::RouteSupported(route_shape_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: routing of ", route_shape_.k, " of ", route_shape_.n_expert,
        " experts in ", route_shape_.n_group, " groups is not supported by the device kernel"));
  }
  return absl::OkStatus();
}

void CudaModel::DescribeShapes() {
  const ArchDesc& d = desc_;
  cuda::AttentionShape& a = attn_shape_;
  a.n_head = static_cast<int>(d.attn.n_head);
  a.n_head_kv = static_cast<int>(d.attn.n_head_kv);
  a.head_dim = static_cast<int>(d.attn.head_dim);
  a.gated = d.attn.gated;
  a.eps = d.attn.eps;
  a.n_rot = static_cast<int>(d.attn.rope.n_rot);
  a.freq_base = d.attn.rope.freq_base;
  a.multi_section = d.attn.rope.multi_section;
  for (int i = 0; i < 4; ++i) a.sections[i] = d.attn.rope.sections[i];
  cuda::DeltaNetShape& s = ssm_shape_;
  s.state_size = static_cast<int>(d.ssm.state_size);
  s.n_k_heads = static_cast<int>(d.ssm.n_k_heads);
  s.n_v_heads = static_cast<int>(d.ssm.n_v_heads);
  s.conv_kernel = static_cast<int>(d.ssm.conv_kernel);
  s.eps = d.ssm.eps;
  DescribeDeepseekShapes();
}

void CudaModel::DescribeDeepseekShapes() {
  const ArchDesc& d = desc_;
  const MlaConfig& c = d.mla;
  cuda::MlaShape& m = mla_shape_;
  m.n_head = static_cast<int>(c.n_head);
  m.kv_lora_rank = static_cast<int>(c.kv_lora_rank);
  m.head_k = static_cast<int>(c.head_k);
  m.head_v = static_cast<int>(c.head_v);
  m.eps = c.eps;
  m.kq_scale = c.kq_scale;
  const ScaledRope& r = c.rope;
  if (r.n_rot > 0) {
    m.rope = cuda::MlaRopeOf(static_cast<int>(r.n_rot), r.neox, r.freq_base, r.freq_scale,
                             r.ext_factor, r.attn_factor, r.corr_dims[0], r.corr_dims[1]);
  }
  // Any block with a selection bias takes route_ops.h's kernel too.
  plain_routing_ = d.moe.plain_routing();
  for (const LayerDesc& l : d.layers) {
    if (l.ffn == FfnKind::kMoe && l.moe.selection_bias != nullptr) plain_routing_ = false;
  }
  cuda::RouteShape& rs = route_shape_;
  rs.n_expert = static_cast<int>(d.moe.n_expert);
  rs.k = static_cast<int>(d.moe.n_expert_used);
  rs.sigmoid = d.moe.gating == ExpertGating::kSigmoid;
  rs.n_group = static_cast<int>(d.moe.n_group);
  rs.n_group_used = static_cast<int>(d.moe.n_group_used);
  rs.norm_weights = d.moe.norm_weights;
  rs.weights_scale = d.moe.weights_scale;
}

absl::Status CudaModel::AllocateBuffers() {
  const ArchDesc& d = desc_;
  RETURN_IF_ERROR(ws_.Allocate(d, Model::kMaxMicroBatch));
  ASSIGN_OR_RETURN(host_begin_,
                   cuda::PinnedBuffer::Create(3 * (d.moe.n_expert + 1) * sizeof(int32_t)));
  ASSIGN_OR_RETURN(host_routing_,
                   cuda::PinnedBuffer::Create(Model::kMaxMicroBatch * d.moe.n_expert_used * 8));
  ASSIGN_OR_RETURN(host_slots_,
                   cuda::PinnedBuffer::Create(4 * std::max<int64_t>(d.moe.n_expert_used, 1) *
                                              sizeof(int32_t)));
  ASSIGN_OR_RETURN(host_bounds_, cuda::PinnedBuffer::Create(d.layers.size() *
                                                            (d.moe.n_expert + 1) *
                                                            sizeof(int32_t)));
  batch_graphs_.resize(kMaxGraphRows + 1);
  ASSIGN_OR_RETURN(routed_, cuda::CreateEvent());
  if (options_.routing_source != nullptr) {
    ASSIGN_OR_RETURN(host_forced_, cuda::PinnedBuffer::Create(
                                       d.layers.size() * d.moe.n_expert_used * sizeof(int32_t)));
  }
  return absl::OkStatus();
}

ModelView CudaModel::View() const {
  ModelView v;
  v.desc = &desc_;
  v.layers = &layers_;
  v.token_embd = token_embd_;
  v.output = output_;
  v.output_norm = output_norm_;
  v.attn = attn_shape_;
  v.ssm = ssm_shape_;
  v.mla = mla_shape_;
  v.route = route_shape_;
  v.plain_routing = plain_routing_;
  v.ws = &ws_;
  return v;
}

BatchContext CudaModel::Batch() const {
  BatchContext c;
  static_cast<ModelView&>(c) = View();
  c.stream = stream_;
  c.experts = experts_.get();
  c.observer = options_.routing_observer;
  c.source = options_.routing_source;
  c.host_begin = host_begin_.as<int32_t>();
  c.host_slots = host_slots_.as<int32_t>();
  c.host_routing = host_routing_.as<int32_t>();
  c.skip_threshold = SkipThreshold();
  c.prefetch = experts_ != nullptr && options_.experts.prefetch;
  c.routed = routed_;
  c.profiler = profiler_.get();
  return c;
}

DecodeContext CudaModel::Decode() const {
  DecodeContext c;
  static_cast<ModelView&>(c) = View();
  c.cut_routing = experts_ != nullptr || options_.routing_observer != nullptr;
  c.copy_weights = options_.routing_observer != nullptr || SkipThreshold() > 0;
  c.prefetch = experts_ != nullptr && options_.experts.prefetch;
  c.host_routing = host_routing_.as<int32_t>();
  c.routed = routed_;
  if (options_.routing_source != nullptr) c.forced = host_forced_.as<int32_t>();
  return c;
}

}  // namespace sluice::cuda_model_internal
