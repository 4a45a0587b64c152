#include "model/cuda/cuda_model.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/decode_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/mla_ops.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_matmul.h"
#include "kernels/cuda/route_ops.h"
#include "loader/model_files.h"
#include "model/cuda/batch_pass.h"
#include "model/cuda/decode_step.h"
#include "model/cuda/device_layers.h"
#include "model/cuda/device_state.h"
#include "model/cuda/device_weights.h"
#include "model/cuda/expert_stream.h"
#include "model/cuda/host_misses.h"
#include "model/cuda/workspace.h"
#include "memory/expert_profile.h"
#include "model/engine.h"

namespace sluice {
namespace {

using cuda::Stream;

// Bytes written to flush the L2 cache (60 MB on the H200) before each op
// TimeDecodeKernels replays.
constexpr uint64_t kFlushBytes = 256ull << 20;

class CudaModel final : public Model, private DecodeProgram::Host {
 public:
  static absl::StatusOr<std::unique_ptr<CudaModel>> Create(
      const ModelFiles& files, ArchDesc desc, const CudaModelOptions& options);
  ~CudaModel() override {
    cuda::SetDevice(device_).IgnoreError();
    profiler_.reset();
    if (routed_ != nullptr) cuda::DestroyEvent(routed_);
    cuda::DestroyStream(stream_);
  }

  const ModelInfo& info() const override { return desc_.info; }
  absl::StatusOr<std::unique_ptr<SequenceState>> CreateState(int capacity) const override;
  uint64_t StateBytes(int capacity) const override {
    return DeviceState::BytesFor(capacity, desc_.StateShapes());
  }
  BackendStats Stats() const override;
  ExpertStreamStats ExpertStats() const override {
    return experts_ != nullptr ? ByModelLayer(experts_->Stats()) : ExpertStreamStats{};
  }
  absl::StatusOr<std::vector<KernelTiming>> TimeDecodeKernels(SequenceState& state,
                                                              int reps) const override;

 protected:
  absl::Status ForwardImpl(absl::Span<const int32_t> tokens, SequenceState& seq,
                           LogitRows rows, std::vector<float>* logits) const override;
  // Several sequences: one batch pass (batch_pass.h), the routed experts
  // grouped over all their rows; one sequence: ForwardImpl (a one-token
  // step runs the decode program).
  absl::Status ForwardBatchImpl(absl::Span<const BatchChunk> pieces, std::vector<float>* logits,
                                BatchForwardStats* stats) const override;

 private:
  CudaModel(ArchDesc desc, const CudaModelOptions& options)
      : desc_(std::move(desc)), options_(options), device_(options.device) {}

  absl::Status CreateExperts(const ModelFiles& files, int64_t slots);
  // The stream's per-layer counters (its layers are the blocks with routed
  // experts) indexed by block, 0 for blocks without routed experts.
  ExpertStreamStats ByModelLayer(ExpertStreamStats s) const;
  // Device-kernel limits of the model's latent attention and routing.
  absl::Status CheckShapes() const;
  // The profile's most used experts into the arena (memory::PlanWarmStart);
  // a profile of another shape warms nothing.
  absl::Status WarmExperts(const memory::ExpertProfile& profile);
  void DescribeShapes();
  void DescribeDeepseekShapes();
  absl::Status AllocateBuffers();
  ModelView View() const;
  BatchContext Batch() const;
  DecodeContext Decode() const;
  // The state's decode program of the current variant (built at first use).
  absl::StatusOr<DecodeProgram*> Program(DeviceState& st) const;
  absl::Status DecodeStep(DeviceState& st) const;
  absl::StatusOr<DeviceState*> Own(SequenceState& seq, const std::string& what) const;
  // One sequence's piece (ForwardImpl); experts_per_layer as EnqueueBatch's.
  absl::Status ForwardOne(absl::Span<const int32_t> tokens, DeviceState& st, LogitRows rows,
                          std::vector<float>* logits,
                          std::vector<int32_t>* experts_per_layer) const;
  // Copies the logits of `rows` rows from the workspace into *logits and
  // waits for the stream.
  absl::Status FinishPass(int64_t rows, std::vector<float>* logits) const;
  // DecodeProgram::Host: a layer's routing (acquire its experts), or the
  // host's share of its misses.
  absl::Status Run(const HostAction& action) override;

  ArchDesc desc_;
  CudaModelOptions options_;
  int device_;
  Stream stream_ = nullptr;
  std::unique_ptr<DeviceWeights> weights_;
  std::unique_ptr<ExpertStream> experts_;  // set when experts stream
  std::unique_ptr<HostMisses> host_;       // set with a host miss policy
  std::vector<DeviceLayer> layers_;
  DeviceMatrix token_embd_, output_;
  const float* output_norm_ = nullptr;
  cuda::AttentionShape attn_shape_;
  cuda::DeltaNetShape ssm_shape_;
  cuda::MlaShape mla_shape_;
  cuda::RouteShape route_shape_;
  bool plain_routing_ = true;
  // Whether the fused decode program handles this model (else decode runs
  // the batch pass one token at a time).
  absl::Status decode_supported_;
  // One forward pass at a time: the workspace and the stream are shared.
  mutable std::mutex mu_;
  mutable Workspace ws_;
  // Whether the next decode step runs the host's share of the misses (the
  // program variant with its cuts): memory::MissSplitter decides per step.
  mutable bool host_path_ = false;
  // Pinned host copies of a batch's group bounds and of the routing (ids,
  // then weights, then a decode prefetch's predicted ids).
  cuda::PinnedBuffer host_begin_, host_routing_;
  cuda::PinnedBuffer host_forced_;  // forced routing: [n_layer][k] of a decode step
  cuda::Event routed_ = nullptr;
  mutable int64_t launches_per_decode_ = 0;
  int64_t experts_warmed_ = 0, experts_warm_planned_ = 0;
  uint64_t free_at_start_ = 0;
  mutable std::unique_ptr<PassProfiler> profiler_;
  // options.kv_on_demand: the device pages every state's KV ranges share.
  std::shared_ptr<cuda::DevicePagePool> kv_pages_;
};

absl::StatusOr<std::unique_ptr<CudaModel>> CudaModel::Create(
    const ModelFiles& files, ArchDesc desc, const CudaModelOptions& options) {
  RETURN_IF_ERROR(cuda::SetDevice(options.device));
  auto m = std::unique_ptr<CudaModel>(new CudaModel(std::move(desc), options));
  ASSIGN_OR_RETURN(m->stream_, cuda::CreateStream());
  cuda::PrepareKernels();
  cuda::PrepareDecodeKernels();
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
                                         .miss = miss},
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
  ASSIGN_OR_RETURN(host_begin_, cuda::PinnedBuffer::Create((d.moe.n_expert + 1) * sizeof(int32_t)));
  ASSIGN_OR_RETURN(host_routing_,
                   cuda::PinnedBuffer::Create(Model::kMaxMicroBatch * d.moe.n_expert_used * 8));
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
  c.host_routing = host_routing_.as<int32_t>();
  c.routed = routed_;
  c.profiler = profiler_.get();
  return c;
}

DecodeContext CudaModel::Decode() const {
  DecodeContext c;
  static_cast<ModelView&>(c) = View();
  c.cut_routing = experts_ != nullptr || options_.routing_observer != nullptr;
  c.copy_weights = options_.routing_observer != nullptr;
  c.prefetch = experts_ != nullptr && options_.experts.prefetch;
  c.host_routing = host_routing_.as<int32_t>();
  c.routed = routed_;
  if (options_.routing_source != nullptr) c.forced = host_forced_.as<int32_t>();
  return c;
}

absl::StatusOr<std::unique_ptr<SequenceState>> CudaModel::CreateState(int capacity) const {
  if (capacity > cuda::AttentionMaxCapacity()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: context length ", capacity, " exceeds the ",
        cuda::AttentionMaxCapacity(), " tokens the attention kernel holds"));
  }
  RETURN_IF_ERROR(cuda::SetDevice(device_));
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceState> st,
                   DeviceState::Create(this, capacity, desc_.StateShapes(), stream_, kv_pages_));
  return std::unique_ptr<SequenceState>(std::move(st));
}

BackendStats CudaModel::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BackendStats s;
  s.device_memory = {{"dense", weights_->dense_bytes()},
                     {"expert_arena", experts_ != nullptr ? experts_->arena_bytes()
                                                          : weights_->expert_bytes()},
                     {"workspace", ws_.bytes()}};
  if (kv_pages_ != nullptr) {
    s.device_memory.push_back(
        {"kv_pages", static_cast<uint64_t>(kv_pages_->pages()) * kv_pages_->page_bytes()});
  }
  s.launches_per_decode = launches_per_decode_;
  if (auto mem = cuda::MemoryInfo(); mem.ok() && mem->first < free_at_start_) {
    s.device_in_use_measured = free_at_start_ - mem->first;
  }
  s.decode_graph = options_.decode_graph && decode_supported_.ok();
  s.profile = profiler_->ms();
  if (experts_ != nullptr) s.experts = ByModelLayer(experts_->Stats());
  s.experts_warmed = experts_warmed_;
  s.experts_warm_planned = experts_warm_planned_;
  return s;
}

absl::Status CudaModel::Run(const HostAction& action) {
  if (action.kind == HostAction::kHostExperts) return host_->Run(*experts_, stream_);
  // The program recorded routed_ once the layer's routing was back.
  RETURN_IF_ERROR(cuda::WaitEvent(routed_));
  return AcquireRouted(Batch(), action.layer, 1, {}, options_.experts.prefetch,
                       host_path_ && host_ != nullptr ? host_->experts() : nullptr);
}

absl::StatusOr<DecodeProgram*> CudaModel::Program(DeviceState& st) const {
  const bool host = host_path_ && host_ != nullptr;
  std::unique_ptr<DecodeProgram>& p = st.decode_program(host ? 1 : 0);
  if (p == nullptr) {
    ASSIGN_OR_RETURN(DecodeProgram built, BuildDecodeProgram(Decode(), st, host ? host_.get() : nullptr));
    p = std::make_unique<DecodeProgram>(std::move(built));
  }
  return p.get();
}

absl::Status CudaModel::DecodeStep(DeviceState& st) const {
  ASSIGN_OR_RETURN(DecodeProgram * p, Program(st));
  if (RoutingSource* source = options_.routing_source; source != nullptr) {
    const int64_t k = desc_.moe.n_expert_used;
    int32_t* forced = host_forced_.as<int32_t>();
    for (size_t il = 0; il < layers_.size(); ++il) {
      source->Next(static_cast<int64_t>(il), &st, 1, forced + il * k);
    }
  }
  // Run is const towards callers (Forward is); the host actions change
  // only the expert stream and the host share's buffers.
  auto* self = const_cast<CudaModel*>(this);
  RETURN_IF_ERROR(p->Run(stream_, options_.decode_graph, *self));
  if (p->captured()) launches_per_decode_ = p->launches();
  if (experts_ != nullptr && host_ != nullptr) host_path_ = experts_->EndDecodeStep();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<KernelTiming>> CudaModel::TimeDecodeKernels(SequenceState& seq,
                                                                       int reps) const {
  auto* st = dynamic_cast<DeviceState*>(&seq);
  if (st == nullptr || st->owner() != this) {
    return absl::InvalidArgumentError("TimeDecodeKernels: the state was not made by this model");
  }
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(cuda::SetDevice(device_));
  ASSIGN_OR_RETURN(DecodeProgram * p, Program(*st));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer flush, cuda::DeviceBuffer::Create(kFlushBytes));
  ASSIGN_OR_RETURN(std::vector<OpTiming> ops, p->TimeOps(stream_, reps, flush.data(), kFlushBytes));
  std::vector<KernelTiming> out;
  for (const OpTiming& o : ops) out.push_back({o.label, o.bytes, o.kernels, o.us});
  return out;
}

namespace {

// How many of a chunk's n rows `rows` asks logits of.
int64_t LogitRowCount(LogitRows rows, int64_t n) {
  return rows == LogitRows::kNone ? 0 : rows == LogitRows::kLast ? 1 : n;
}

}  // namespace

absl::StatusOr<DeviceState*> CudaModel::Own(SequenceState& seq, const std::string& what) const {
  auto* st = dynamic_cast<DeviceState*>(&seq);
  if (st == nullptr || st->owner() != this) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the state was not made by this CUDA model"));
  }
  return st;
}

absl::Status CudaModel::FinishPass(int64_t rows, std::vector<float>* logits) const {
  if (rows > 0) {
    logits->resize(rows * desc_.info.n_vocab);
    RETURN_IF_ERROR(cuda::CopyToHost(logits->data(), ws_.logits, logits->size() * sizeof(float),
                                     stream_));
  }
  return cuda::Synchronize(stream_);
}

absl::Status CudaModel::ForwardImpl(absl::Span<const int32_t> tokens, SequenceState& seq,
                                    LogitRows rows, std::vector<float>* logits) const {
  ASSIGN_OR_RETURN(DeviceState * st, Own(seq, "Forward"));
  return ForwardOne(tokens, *st, rows, logits, nullptr);
}

absl::Status CudaModel::ForwardOne(absl::Span<const int32_t> tokens, DeviceState& st,
                                   LogitRows rows, std::vector<float>* logits,
                                   std::vector<int32_t>* experts_per_layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(cuda::SetDevice(device_));
  Workspace& w = ws_;
  const int64_t n_tok = static_cast<int64_t>(tokens.size());
  if (rows == LogitRows::kAll && n_tok > w.logits_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: logits of every row of a ", n_tok,
        "-token batch exceed the workspace (", w.logits_rows, " rows)"));
  }
  const int32_t pos0 = st.position();
  RETURN_IF_ERROR(st.Commit(pos0 + static_cast<int>(n_tok)));
  RETURN_IF_ERROR(cuda::CopyToDevice(w.ids_in, tokens.data(), n_tok * sizeof(int32_t), stream_));
  RETURN_IF_ERROR(cuda::CopyToDevice(w.pos0, &pos0, sizeof(int32_t), stream_));
  const bool decode = n_tok == 1 && rows == LogitRows::kLast;
  const int64_t count = LogitRowCount(rows, n_tok);
  if (decode && decode_supported_.ok()) {
    RETURN_IF_ERROR(DecodeStep(st));
    if (experts_per_layer != nullptr) {
      // One token's k experts are distinct.
      experts_per_layer->assign(layers_.size(), static_cast<int32_t>(desc_.moe.n_expert_used));
    }
    return FinishPass(count, logits);
  }
  profiler_->Start(stream_);
  const PassSequence one{&st, 0, n_tok, pos0};
  std::vector<RowRun> runs;
  if (count > 0) runs.push_back({n_tok - count, count});
  RETURN_IF_ERROR(EnqueueBatch(Batch(), n_tok, {&one, 1}, runs, experts_per_layer));
  if (!decode) RETURN_IF_ERROR(profiler_->Collect("prefill", stream_));
  return FinishPass(count, logits);
}

absl::Status CudaModel::ForwardBatchImpl(absl::Span<const BatchChunk> pieces,
                                         std::vector<float>* logits,
                                         BatchForwardStats* stats) const {
  logits->clear();
  if (pieces.size() == 1) {
    const BatchChunk& p = pieces[0];
    ASSIGN_OR_RETURN(DeviceState * st, Own(*p.state, "Forward"));
    return ForwardOne(p.tokens, *st, p.rows, logits, &stats->experts_per_layer);
  }
  std::vector<PassSequence> seqs;
  std::vector<RowRun> runs;
  std::vector<int32_t> ids;
  int64_t n_tok = 0, count = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const BatchChunk& p = pieces[i];
    ASSIGN_OR_RETURN(DeviceState * st, Own(*p.state, absl::StrCat("chunk ", i)));
    const int64_t n = static_cast<int64_t>(p.tokens.size());
    seqs.push_back({st, n_tok, n, p.state->position()});
    ids.insert(ids.end(), p.tokens.begin(), p.tokens.end());
    const int64_t want = LogitRowCount(p.rows, n);
    if (want > 0) {
      const int64_t first = n_tok + n - want;
      if (!runs.empty() && runs.back().row + runs.back().n == first) {
        runs.back().n += want;  // adjacent rows: one run
      } else {
        runs.push_back({first, want});
      }
    }
    n_tok += n;
    count += want;
  }
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(cuda::SetDevice(device_));
  Workspace& w = ws_;
  if (count > w.logits_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: logits of ", count, " rows of a batch exceed the workspace (",
        w.logits_rows, " rows)"));
  }
  for (const PassSequence& s : seqs) {
    RETURN_IF_ERROR(s.state->Commit(s.pos0 + static_cast<int>(s.n)));
  }
  RETURN_IF_ERROR(cuda::CopyToDevice(w.ids_in, ids.data(), n_tok * sizeof(int32_t), stream_));
  profiler_->Start(stream_);
  RETURN_IF_ERROR(EnqueueBatch(Batch(), n_tok, seqs, runs, &stats->experts_per_layer));
  RETURN_IF_ERROR(profiler_->Collect("batch", stream_));
  return FinishPass(count, logits);
}

absl::StatusOr<std::unique_ptr<Model>> FromEngine(const ModelFiles& files,
                                                  const EngineOptions& o) {
  return LoadCudaModel(files, {.device = o.device,
                               .decode_graph = !o.profile,
                               .profile = o.profile,
                               .experts = o.experts,
                               .routing_observer = o.routing_observer,
                               .routing_source = o.routing_source,
                               .expert_warm = o.expert_warm,
                               .kv_on_demand = o.kv_on_demand,
                               .load_progress = o.load_progress});
}

const bool kRegistered = RegisterBackend(Backend::kCuda, FromEngine);

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadCudaModel(const ModelFiles& files,
                                                     const CudaModelOptions& options) {
  ASSIGN_OR_RETURN(ArchDesc desc, DescribeModel(files));
  RETURN_IF_ERROR(CheckCudaPieces(desc, "cuda backend"));
  RETURN_IF_ERROR(BindRoutingSource(options.routing_source, desc));
  ASSIGN_OR_RETURN(std::unique_ptr<CudaModel> m,
                   CudaModel::Create(files, std::move(desc), options));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace sluice
