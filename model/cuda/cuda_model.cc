#include "model/cuda/cuda_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_matmul.h"
#include "loader/model_files.h"
#include "model/cuda/device_weights.h"
#include "model/cuda/expert_stream.h"
#include "model/cuda/device_state.h"
#include "model/cuda/workspace.h"
#include "model/engine.h"

namespace sluice {
namespace {

using cuda::Stream;

struct DeviceAttention {
  DeviceMatrix wq, wk, wv, wo;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  cuda::DeviceBuffer kv_table;  // {wk, wv}: one decode launch for both
};

struct DeviceDeltaNet {
  DeviceMatrix qkv, gate, beta, alpha, out;
  const float *conv = nullptr, *dt_bias = nullptr, *a = nullptr, *norm = nullptr;
  cuda::DeviceBuffer beta_alpha_table;  // {beta, alpha}
};

struct DeviceMoe {
  DeviceMatrix router;
  GgmlType gate_type, up_type, down_type;
  // Per-expert pointer tables on the device: what the grouped products read,
  // so a cache can repoint them. gate_up holds [n_expert] gate pointers then
  // [n_expert] up pointers (a decode step multiplies both in one launch when
  // they share a type); down [n_expert].
  cuda::DeviceBuffer gate_up_table, down_table;
  int n_expert = 0;
  const void* const* gate_table() const { return gate_up_table.as<const void*>(); }
  const void* const* up_table() const { return gate_table() + n_expert; }
  // The shared expert's gate and up pointers, for one launch of both.
  cuda::DeviceBuffer shared_gate_up_table;
  const float* shared_gate_inp = nullptr;
  DeviceMatrix shared_gate, shared_up, shared_down;
};

struct DeviceLayer {
  MixerKind mixer;
  const float* mixer_norm = nullptr;
  const float* ffn_norm = nullptr;
  DeviceAttention attn;
  DeviceDeltaNet delta;
  DeviceMoe moe;
};

// A device table of the given host views' device addresses, in order.
absl::StatusOr<cuda::DeviceBuffer> PointerTable(
    const DeviceWeights& w, const std::vector<const uint8_t*>& views,
    Stream stream) {
  std::vector<const void*> ptrs(views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    ASSIGN_OR_RETURN(ptrs[i], w.Translate(views[i]));
  }
  ASSIGN_OR_RETURN(cuda::DeviceBuffer table,
                   cuda::DeviceBuffer::Create(ptrs.size() * sizeof(void*)));
  RETURN_IF_ERROR(cuda::CopyToDevice(table.data(), ptrs.data(),
                                     ptrs.size() * sizeof(void*), stream));
  RETURN_IF_ERROR(cuda::Synchronize(stream));
  return table;
}

// With `stream_experts` the routed-expert tables are allocated but left for
// the ExpertStream to fill.
absl::Status BindLayer(const DeviceWeights& w, const LayerDesc& l,
                       int64_t shared_ff, bool stream_experts, Stream stream,
                       DeviceLayer& d) {
  d.mixer = l.mixer;
  ASSIGN_OR_RETURN(d.mixer_norm, w.Floats(l.mixer_norm));
  ASSIGN_OR_RETURN(d.ffn_norm, w.Floats(l.ffn_norm));
  if (l.mixer == MixerKind::kAttention) {
    ASSIGN_OR_RETURN(d.attn.wq, w.Matrix(l.attn.wq));
    ASSIGN_OR_RETURN(d.attn.wk, w.Matrix(l.attn.wk));
    ASSIGN_OR_RETURN(d.attn.wv, w.Matrix(l.attn.wv));
    ASSIGN_OR_RETURN(d.attn.wo, w.Matrix(l.attn.wo));
    ASSIGN_OR_RETURN(d.attn.q_norm, w.Floats(l.attn.q_norm));
    ASSIGN_OR_RETURN(d.attn.k_norm, w.Floats(l.attn.k_norm));
    ASSIGN_OR_RETURN(d.attn.kv_table,
                     PointerTable(w, {l.attn.wk.data, l.attn.wv.data}, stream));
  } else {
    ASSIGN_OR_RETURN(d.delta.qkv, w.Matrix(l.delta.qkv));
    ASSIGN_OR_RETURN(d.delta.gate, w.Matrix(l.delta.gate));
    ASSIGN_OR_RETURN(d.delta.beta, w.Matrix(l.delta.beta));
    ASSIGN_OR_RETURN(d.delta.alpha, w.Matrix(l.delta.alpha));
    ASSIGN_OR_RETURN(d.delta.out, w.Matrix(l.delta.out));
    ASSIGN_OR_RETURN(d.delta.conv, w.Floats(l.delta.conv));
    ASSIGN_OR_RETURN(d.delta.dt_bias, w.Floats(l.delta.dt_bias));
    ASSIGN_OR_RETURN(d.delta.a, w.Floats(l.delta.a));
    ASSIGN_OR_RETURN(d.delta.norm, w.Floats(l.delta.norm));
    ASSIGN_OR_RETURN(d.delta.beta_alpha_table,
                     PointerTable(w, {l.delta.beta.data, l.delta.alpha.data}, stream));
  }
  const MoeWeights& m = l.moe;
  ASSIGN_OR_RETURN(d.moe.router, w.Matrix(m.router));
  for (const ExpertMatrix* e : {&m.gate, &m.up, &m.down}) {
    if (!cuda::MatMulSupported(e->type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cuda backend: no device kernel for routed experts of type ",
          std::string(TraitsOf(e->type).name)));
    }
  }
  d.moe.gate_type = m.gate.type;
  d.moe.up_type = m.up.type;
  d.moe.down_type = m.down.type;
  std::vector<const uint8_t*> gate_up, down;
  for (int64_t e = 0; e < m.gate.n_expert; ++e) gate_up.push_back(m.gate.expert(e).data);
  for (int64_t e = 0; e < m.up.n_expert; ++e) gate_up.push_back(m.up.expert(e).data);
  for (int64_t e = 0; e < m.down.n_expert; ++e) down.push_back(m.down.expert(e).data);
  d.moe.n_expert = static_cast<int>(m.gate.n_expert);
  if (stream_experts) {
    ASSIGN_OR_RETURN(d.moe.gate_up_table,
                     cuda::DeviceBuffer::Create(gate_up.size() * sizeof(void*)));
    ASSIGN_OR_RETURN(d.moe.down_table,
                     cuda::DeviceBuffer::Create(down.size() * sizeof(void*)));
  } else {
    ASSIGN_OR_RETURN(d.moe.gate_up_table, PointerTable(w, gate_up, stream));
    ASSIGN_OR_RETURN(d.moe.down_table, PointerTable(w, down, stream));
  }
  if (shared_ff > 0) {
    ASSIGN_OR_RETURN(d.moe.shared_gate_inp, w.Floats(m.shared_gate_inp));
    ASSIGN_OR_RETURN(d.moe.shared_gate, w.Matrix(m.shared_gate));
    ASSIGN_OR_RETURN(d.moe.shared_up, w.Matrix(m.shared_up));
    ASSIGN_OR_RETURN(d.moe.shared_down, w.Matrix(m.shared_down));
    ASSIGN_OR_RETURN(d.moe.shared_gate_up_table,
                     PointerTable(w, {m.shared_gate.data, m.shared_up.data}, stream));
  }
  return absl::OkStatus();
}

class CudaModel final : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<CudaModel>> Create(
      const ModelFiles& files, ArchDesc desc, const CudaModelOptions& options);
  ~CudaModel() override {
    cuda::SetDevice(device_).IgnoreError();
    for (cuda::Event e : events_) cuda::DestroyEvent(e);
    if (routed_ != nullptr) cuda::DestroyEvent(routed_);
    cuda::DestroyStream(stream_);
  }

  const ModelInfo& info() const override { return desc_.info; }

  absl::StatusOr<std::unique_ptr<SequenceState>> CreateState(
      int capacity) const override;
  uint64_t StateBytes(int capacity) const override {
    return DeviceState::BytesFor(capacity, desc_.StateShapes());
  }
  BackendStats Stats() const override;
  ExpertStreamStats ExpertStats() const override {
    return experts_ != nullptr ? experts_->Stats() : ExpertStreamStats{};
  }

 protected:
  absl::Status ForwardImpl(absl::Span<const int32_t> tokens,
                           SequenceState& seq, LogitRows rows,
                           std::vector<float>* logits) const override;

 private:
  CudaModel(ArchDesc desc, const CudaModelOptions& options)
      : desc_(std::move(desc)), options_(options), device_(options.device) {}

  // Enqueues the body of one micro-batch: embedding to logits (rows
  // selected by `rows`) into ws_.logits. Host-to-device copies of the
  // tokens and the position are the caller's.
  absl::Status Enqueue(int64_t n_tok, DeviceState& st, LogitRows rows) const;
  absl::Status Mixer(int64_t il, int64_t n_tok, DeviceState& st) const;
  absl::Status Attention(const DeviceAttention& a, int64_t n_tok,
                         int kv_capacity, float* k_cache,
                         float* v_cache) const;
  absl::Status DeltaNet(const DeviceDeltaNet& d, int64_t n_tok, float* conv,
                        float* ssm) const;
  absl::Status Moe(int64_t il, const DeviceMoe& m, int64_t n_tok) const;
  // Streaming or observing: reads layer il's routing back, tells the
  // observer, and has the expert stream acquire the routed experts.
  // `begin` is the batch's group_begin already read back (empty: decode).
  absl::Status AcquireRouted(int64_t il, int64_t n_tok,
                             const std::vector<int32_t>& begin) const;
  absl::Status SharedExpert(const DeviceMoe& m, int64_t n_tok) const;
  absl::Status Project(const DeviceMatrix& w, const float* x, int64_t n_tok,
                       float* y) const;
  // ya = a x and yb = b x. One token and matrices of one type and shape:
  // one launch through `table` ({a, b} on the device); else two.
  // Precondition: yb > ya (workspace order).
  absl::Status ProjectPair(const DeviceMatrix& a, const DeviceMatrix& b,
                           const cuda::DeviceBuffer& table, const float* x,
                           int64_t n_tok, float* ya, float* yb) const;

  ArchDesc desc_;
  CudaModelOptions options_;
  int device_;
  Stream stream_ = nullptr;
  std::unique_ptr<DeviceWeights> weights_;
  // Set when routed experts stream through a slot arena.
  std::unique_ptr<ExpertStream> experts_;
  std::vector<DeviceLayer> layers_;
  DeviceMatrix token_embd_, output_;
  const float* output_norm_ = nullptr;
  cuda::AttentionShape attn_shape_;
  cuda::DeltaNetShape ssm_shape_;
  // One forward pass at a time: the workspace and the stream are shared.
  mutable std::mutex mu_;
  mutable Workspace ws_;
  mutable int64_t launches_ = 0;
  // While a segmented decode step is being captured: its state (the
  // segments go there).
  mutable DeviceState::DecodeGraph* capturing_ = nullptr;
  // Ends the capture of the current decode segment, stores and launches it
  // and records what the host does next (`cut`); a routing cut then waits
  // for the segment's routing record (the rest of the segment runs on).
  absl::Status CutSegment(DecodeCut cut) const;
  // Host miss policy, decode: computes host_experts_ from host_x_ into the
  // rows of host_y_ (zeros for the device's experts) and times it.
  absl::Status RunHostExperts() const;

  // Host miss policy: after the routed down products of a decode step, the
  // host's results join them (expert_y += host_y) before the combine.
  absl::Status AddHostExperts(int64_t il) const;
  // Set when a decode step's misses may be computed by the host CPU.
  bool host_misses_ = false;
  // Whether decode steps run the host's share (the graph variant with its
  // cuts). Always with the host policy; with cost, while the splits the
  // cost model predicts save more than the extra segment, copy and add
  // cost per layer (ChooseHostPath).
  mutable bool host_path_ = false;
  mutable double host_saving_s_ = -1;  // smoothed per token; < 0: none yet
  void ChooseHostPath() const;
  std::unique_ptr<kernels::ThreadPool> host_pool_;
  // The decode step's MoE input and the host's expert outputs [k][n_embd]
  // (pinned), their device copy, and the host's experts of the layer in
  // flight.
  cuda::PinnedBuffer host_x_, host_y_;
  cuda::DeviceBuffer device_host_y_;
  mutable std::vector<HostExpert> host_experts_;
  // Whether host_y_ holds rows of an earlier step (must be zeroed).
  mutable bool host_y_used_ = false;
  // RunHostExperts' scratch, kept between layers (it runs once per layer).
  mutable std::vector<ExpertWeights> host_weights_;
  mutable std::vector<float> host_out_;
  // Pinned host copies of a batch's group bounds and of the routing (ids,
  // then weights), and the event that says they arrived.
  cuda::PinnedBuffer host_begin_, host_routing_;
  // Decode prefetch: the next layer's predicted experts (ids, weights).
  cuda::DeviceBuffer predicted_;
  cuda::Event routed_ = nullptr;
  mutable int64_t launches_per_decode_ = 0;
  uint64_t free_at_start_ = 0;
  // Profiling (options_.profile): events recorded after each section of
  // the current call, and the sums per "<phase>.<section>".
  void Mark(const char* section) const;
  absl::Status CollectProfile(const char* phase) const;
  mutable std::vector<cuda::Event> events_;
  mutable std::vector<const char*> marks_;
  mutable std::vector<std::pair<std::string, double>> profile_ms_;
};

void CudaModel::Mark(const char* section) const {
  if (!options_.profile) return;
  if (marks_.size() + 1 >= events_.size()) {
    auto e = cuda::CreateEvent(/*timing=*/true);
    if (!e.ok()) return;
    events_.push_back(*e);
    if (events_.size() == 1) {
      auto e2 = cuda::CreateEvent(true);
      if (!e2.ok()) return;
      events_.push_back(*e2);
    }
  }
  cuda::RecordEvent(events_[marks_.size() + 1], stream_).IgnoreError();
  marks_.push_back(section);
}

absl::Status CudaModel::CollectProfile(const char* phase) const {
  if (!options_.profile) return absl::OkStatus();
  RETURN_IF_ERROR(cuda::Synchronize(stream_));
  const auto add = [&](const std::string& key, double v) {
    for (auto& [k, ms] : profile_ms_) {
      if (k == key) {
        ms += v;
        return;
      }
    }
    profile_ms_.push_back({key, v});
  };
  for (size_t i = 0; i < marks_.size(); ++i) {
    ASSIGN_OR_RETURN(const float ms, cuda::ElapsedMs(events_[i], events_[i + 1]));
    add(absl::StrCat(phase, ".", marks_[i]), ms);
  }
  add(absl::StrCat(phase, ".calls"), 1);
  marks_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaModel>> CudaModel::Create(
    const ModelFiles& files, ArchDesc desc, const CudaModelOptions& options) {
  RETURN_IF_ERROR(cuda::SetDevice(options.device));
  auto m = std::unique_ptr<CudaModel>(new CudaModel(std::move(desc), options));
  ASSIGN_OR_RETURN(m->stream_, cuda::CreateStream());
  cuda::PrepareKernels();
  ASSIGN_OR_RETURN(const auto mem, cuda::MemoryInfo());
  m->free_at_start_ = mem.first;
  const ArchDesc& d = m->desc_;
  const int64_t all_experts = static_cast<int64_t>(d.layers.size()) * d.moe.n_expert;
  int64_t slots = options.expert_slots;
  if (slots < 0 && options.expert_arena_fraction > 0) {
    slots = std::min<int64_t>(
        all_experts, static_cast<int64_t>(std::ceil(
                         options.expert_arena_fraction * all_experts - 1e-9)));
  }
  const bool stream_experts = slots >= 0;
  ASSIGN_OR_RETURN(m->weights_, DeviceWeights::Upload(files, options.device,
                                                      m->stream_, !stream_experts));
  ASSIGN_OR_RETURN(m->token_embd_, m->weights_->Matrix(d.head.token_embd));
  ASSIGN_OR_RETURN(m->output_, m->weights_->Matrix(d.head.output));
  ASSIGN_OR_RETURN(m->output_norm_, m->weights_->Floats(d.head.output_norm));
  m->layers_.resize(d.layers.size());
  for (size_t il = 0; il < d.layers.size(); ++il) {
    RETURN_IF_ERROR(BindLayer(*m->weights_, d.layers[il], d.moe.shared_ff,
                              stream_experts, m->stream_, m->layers_[il]));
  }
  if (stream_experts) {
    std::vector<LayerExpertViews> views;
    std::vector<void*> gate_up, down;
    for (size_t il = 0; il < d.layers.size(); ++il) {
      const MoeWeights& w = d.layers[il].moe;
      views.push_back({w.gate, w.up, w.down});
      gate_up.push_back(m->layers_[il].moe.gate_up_table.data());
      down.push_back(m->layers_[il].moe.down_table.data());
    }
    memory::MissSplitOptions miss;
    ASSIGN_OR_RETURN(miss.policy,
                     memory::ParseMissPolicy(options.expert_miss_policy));
    ASSIGN_OR_RETURN(m->experts_,
                     ExpertStream::Create(std::move(views), std::move(gate_up),
                                          std::move(down),
                                          {.slots = slots,
                                           .policy = options.expert_policy,
                                           .host_tier_bytes =
                                               options.expert_host_tier_bytes,
                                           .files = &files,
                                           .miss = miss},
                                          m->stream_));
    if (miss.policy != memory::MissPolicy::kCopy) {
      m->host_misses_ = true;
      m->host_path_ = true;
      // The decode thread takes part (after launching the device's share).
      // Measured on the H200 (docs/STATUS.md): handing the share to another
      // thread as soon as the split was known, to overlap it with issuing
      // the copies, was slower (228 vs 289 tok/s, all misses on the host).
      const int threads =
          options.expert_host_threads > 0
              ? options.expert_host_threads
              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      m->host_pool_ = std::make_unique<kernels::ThreadPool>(threads);
      const uint64_t row = d.moe.n_embd * sizeof(float);
      ASSIGN_OR_RETURN(m->host_x_, cuda::PinnedBuffer::Create(row));
      ASSIGN_OR_RETURN(m->host_y_,
                       cuda::PinnedBuffer::Create(d.moe.n_expert_used * row));
      ASSIGN_OR_RETURN(m->device_host_y_,
                       cuda::DeviceBuffer::Create(d.moe.n_expert_used * row));
    }
  } else if (options.expert_miss_policy != "copy") {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: expert miss policy \"", options.expert_miss_policy,
        "\" needs streaming experts (an arena or slot count)"));
  }
  cuda::AttentionShape& a = m->attn_shape_;
  a.n_head = static_cast<int>(d.attn.n_head);
  a.n_head_kv = static_cast<int>(d.attn.n_head_kv);
  a.head_dim = static_cast<int>(d.attn.head_dim);
  a.gated = d.attn.gated;
  a.eps = d.attn.eps;
  a.n_rot = static_cast<int>(d.attn.rope.n_rot);
  a.freq_base = d.attn.rope.freq_base;
  a.multi_section = d.attn.rope.multi_section;
  for (int i = 0; i < 4; ++i) a.sections[i] = d.attn.rope.sections[i];
  cuda::DeltaNetShape& s = m->ssm_shape_;
  s.state_size = static_cast<int>(d.ssm.state_size);
  s.n_k_heads = static_cast<int>(d.ssm.n_k_heads);
  s.n_v_heads = static_cast<int>(d.ssm.n_v_heads);
  s.conv_kernel = static_cast<int>(d.ssm.conv_kernel);
  s.eps = d.ssm.eps;
  if (s.state_size > cuda::DeltaNetMaxStateSize()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: ssm.state_size ", s.state_size, " exceeds ",
        cuda::DeltaNetMaxStateSize()));
  }
  if (s.conv_kernel > 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: ssm.conv_kernel ", s.conv_kernel, " exceeds 8"));
  }
  RETURN_IF_ERROR(m->ws_.Allocate(d, Model::kMaxMicroBatch));
  ASSIGN_OR_RETURN(m->host_begin_,
                   cuda::PinnedBuffer::Create((d.moe.n_expert + 1) * sizeof(int32_t)));
  ASSIGN_OR_RETURN(m->host_routing_,
                   cuda::PinnedBuffer::Create(Model::kMaxMicroBatch *
                                              d.moe.n_expert_used * 8));
  ASSIGN_OR_RETURN(m->routed_, cuda::CreateEvent());
  ASSIGN_OR_RETURN(m->predicted_,
                   cuda::DeviceBuffer::Create(2 * d.moe.n_expert_used * 4));
  return m;
}

absl::StatusOr<std::unique_ptr<SequenceState>> CudaModel::CreateState(
    int capacity) const {
  if (capacity > cuda::AttentionMaxCapacity()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: context length ", capacity, " exceeds the ",
        cuda::AttentionMaxCapacity(), " tokens the attention kernel holds"));
  }
  RETURN_IF_ERROR(cuda::SetDevice(device_));
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceState> st,
                   DeviceState::Create(this, capacity, desc_.StateShapes(),
                                       stream_));
  return std::unique_ptr<SequenceState>(std::move(st));
}

BackendStats CudaModel::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BackendStats s;
  s.device_memory = {{"dense", weights_->dense_bytes()},
                     {"experts", experts_ != nullptr ? experts_->arena_bytes()
                                                     : weights_->expert_bytes()},
                     {"workspace", ws_.bytes()}};
  s.launches_per_decode = launches_per_decode_;
  if (auto mem = cuda::MemoryInfo(); mem.ok() && mem->first < free_at_start_) {
    s.device_in_use_measured = free_at_start_ - mem->first;
  }
  s.decode_graph = options_.decode_graph;
  s.profile = profile_ms_;
  if (experts_ != nullptr) s.experts = experts_->Stats();
  return s;
}

absl::Status CudaModel::Project(const DeviceMatrix& w, const float* x,
                                int64_t n_tok, float* y) const {
  ++launches_;
  return cuda::MatMul(w.type, w.data, w.rows, w.cols, x, n_tok, y, stream_);
}

absl::Status CudaModel::ProjectPair(const DeviceMatrix& a, const DeviceMatrix& b,
                                    const cuda::DeviceBuffer& table,
                                    const float* x, int64_t n_tok, float* ya,
                                    float* yb) const {
  if (n_tok != 1 || a.type != b.type || a.rows != b.rows || a.cols != b.cols) {
    RETURN_IF_ERROR(Project(a, x, n_tok, ya));
    return Project(b, x, n_tok, yb);
  }
  cuda::GroupedMatMul g;
  g.type = a.type;
  g.rows = a.rows;
  g.cols = a.cols;
  g.n_groups = 2;
  g.max_entries_per_group = 1;
  g.d_weights = table.as<const void*>();
  g.d_x_row = ws_.zeros;  // both entries read activation row 0
  g.d_x = x;
  g.x_stride = a.cols;
  g.d_y = ya;
  g.y_stride = yb - ya;
  ++launches_;
  return cuda::LaunchGroupedMatMul(g, stream_);
}

absl::Status CudaModel::Attention(const DeviceAttention& a, int64_t n_tok,
                                  int kv_capacity, float* k_cache,
                                  float* v_cache) const {
  Workspace& w = ws_;
  cuda::AttentionShape shape = attn_shape_;
  shape.kv_capacity = kv_capacity;
  RETURN_IF_ERROR(Project(a.wq, w.xn, n_tok, w.q));
  RETURN_IF_ERROR(ProjectPair(a.wk, a.wv, a.kv_table, w.xn, n_tok, w.k, w.v));
  Mark("attn.qkv_proj");
  cuda::AttentionPrepare(shape, w.q, w.k, w.v, a.q_norm, a.k_norm, w.pos0,
                         n_tok, k_cache, v_cache, stream_);
  cuda::Attend(shape, w.q, k_cache, v_cache, w.pos0, n_tok, w.attn_o,
               stream_);
  launches_ += 2;
  Mark("attn.core");
  RETURN_IF_ERROR(Project(a.wo, w.attn_o, n_tok, w.y));
  Mark("attn.out_proj");
  return absl::OkStatus();
}

absl::Status CudaModel::DeltaNet(const DeviceDeltaNet& d, int64_t n_tok,
                                 float* conv, float* ssm) const {
  Workspace& w = ws_;
  RETURN_IF_ERROR(Project(d.qkv, w.xn, n_tok, w.qkv));
  RETURN_IF_ERROR(Project(d.gate, w.xn, n_tok, w.z));
  RETURN_IF_ERROR(ProjectPair(d.beta, d.alpha, d.beta_alpha_table, w.xn, n_tok,
                              w.beta, w.g));
  Mark("delta.in_proj");
  cuda::DeltaNetGates(ssm_shape_, w.beta, w.g, d.dt_bias, d.a, n_tok, stream_);
  cuda::DeltaNetConv(ssm_shape_, d.conv, w.qkv, n_tok, conv, stream_);
  Mark("delta.gates_conv");
  cuda::DeltaNetScan(ssm_shape_, w.qkv, w.beta, w.g, w.z, d.norm, n_tok, ssm,
                     w.ssm_o, stream_);
  launches_ += 4;
  Mark("delta.scan");
  RETURN_IF_ERROR(Project(d.out, w.ssm_o, n_tok, w.y));
  Mark("delta.out_proj");
  return absl::OkStatus();
}

absl::Status CudaModel::SharedExpert(const DeviceMoe& m, int64_t n_tok) const {
  Workspace& w = ws_;
  const MoeConfig& c = desc_.moe;
  RETURN_IF_ERROR(ProjectPair(m.shared_gate, m.shared_up, m.shared_gate_up_table,
                              w.xn, n_tok, w.shared_g, w.shared_u));
  cuda::SwiGlu(w.shared_g, w.shared_u, n_tok * c.shared_ff, stream_);
  ++launches_;
  return Project(m.shared_down, w.shared_g, n_tok, w.shared_y);
}

absl::Status CudaModel::AcquireRouted(int64_t il, int64_t n_tok,
                                      const std::vector<int32_t>& begin) const {
  const int k = static_cast<int>(desc_.moe.n_expert_used);
  const int n_expert = static_cast<int>(desc_.moe.n_expert);
  const int32_t* ids = host_routing_.as<int32_t>();
  if (options_.routing_observer != nullptr) {
    const float* weights = reinterpret_cast<const float*>(ids + n_tok * k);
    std::vector<Routing> routes(n_tok);
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int j = 0; j < k; ++j) {
        routes[t].expert[j] = ids[t * k + j];
        routes[t].weight[j] = weights[t * k + j];
      }
    }
    options_.routing_observer->OnRouting(il, k, routes);
  }
  if (experts_ == nullptr) return absl::OkStatus();
  std::vector<int32_t> used;
  if (begin.empty()) {
    used.assign(ids, ids + k);  // one token: k distinct experts
  } else {
    for (int x = 0; x < n_expert; ++x) {
      if (begin[x + 1] > begin[x]) used.push_back(x);
    }
  }
  RETURN_IF_ERROR(experts_->Acquire(
      static_cast<int>(il), used, stream_,
      begin.empty() && host_misses_ ? &host_experts_ : nullptr));
  if (begin.empty() && options_.expert_prefetch &&
      il + 1 < static_cast<int64_t>(layers_.size())) {
    RETURN_IF_ERROR(experts_->Prefetch(static_cast<int>(il + 1),
                                       absl::MakeConstSpan(ids + 2 * k, k),
                                       stream_));
  }
  return absl::OkStatus();
}

absl::Status CudaModel::Moe(int64_t il, const DeviceMoe& m, int64_t n_tok) const {
  Workspace& w = ws_;
  const MoeConfig& c = desc_.moe;
  const int k = static_cast<int>(c.n_expert_used);
  const int n_expert = static_cast<int>(c.n_expert);
  const int64_t e = c.n_embd, ff = c.expert_ff;
  RETURN_IF_ERROR(Project(m.router, w.xn, n_tok, w.router_logits));
  Mark("moe.router_proj");
  const bool one = n_tok == 1;
  // A decode step multiplies gate and up in one launch (2k groups through
  // the paired ids) when they share a type.
  const bool fuse_gate_up = one && m.gate_type == m.up_type;
  cuda::TopK(w.router_logits, n_tok, n_expert, k, w.ids, w.weights, stream_,
             fuse_gate_up ? w.paired_ids : nullptr);
  ++launches_;
  Mark("moe.topk");
  // Decode: one group per routed slot, weights picked through the ids;
  // batches: the pairs grouped by expert so each expert's weights are read
  // once per group.
  if (!one) {
    cuda::GroupByExpert(w.ids, n_tok, k, n_expert, w.counts, w.group_begin,
                        w.entry_token, w.slot_entry, stream_);
    launches_ += 4;
    Mark("moe.group");
  }
  // What the host needs from the routing goes back through pinned memory
  // while the shared expert computes: a batch's group bounds (its launch is
  // sized by the largest group: a 512-token batch spread over 256 experts
  // then launches ~16x fewer blocks), and when streaming or observing the
  // routed ids (and weights).
  const bool streaming = experts_ != nullptr;
  const bool observing = options_.routing_observer != nullptr;
  const bool need_ids = streaming || observing;
  // Decode prefetch: the next layer's router on this layer's input.
  const bool predict = streaming && one && options_.expert_prefetch &&
                       il + 1 < static_cast<int64_t>(layers_.size());
  if (predict) {
    RETURN_IF_ERROR(Project(layers_[il + 1].moe.router, w.xn, 1,
                            w.router_logits));
    cuda::TopK(w.router_logits, 1, n_expert, k, predicted_.as<int32_t>(),
               predicted_.as<float>() + k, stream_, nullptr);
    ++launches_;
    RETURN_IF_ERROR(cuda::CopyToHost(host_routing_.as<int32_t>() + 2 * k,
                                     predicted_.data(), k * sizeof(int32_t),
                                     stream_));
    Mark("moe.predict");
  }
  if (!one) {
    RETURN_IF_ERROR(cuda::CopyToHost(host_begin_.data(), w.group_begin,
                                     (n_expert + 1) * sizeof(int32_t), stream_));
  }
  if (need_ids) {
    int32_t* ids = host_routing_.as<int32_t>();
    RETURN_IF_ERROR(cuda::CopyToHost(ids, w.ids, n_tok * k * sizeof(int32_t),
                                     stream_));
    if (observing) {
      RETURN_IF_ERROR(cuda::CopyToHost(ids + n_tok * k, w.weights,
                                       n_tok * k * sizeof(float), stream_));
    }
    if (one && host_path_) {
      RETURN_IF_ERROR(cuda::CopyToHost(host_x_.data(), w.xn, e * sizeof(float),
                                       stream_));
    }
  }
  // (While a decode step is captured the record is a node of the segment's
  // graph: the host waits for it, not for the whole segment, and acquires
  // the experts while the shared expert computes.)
  if (!one || need_ids) {
    RETURN_IF_ERROR(capturing_ != nullptr
                        ? cuda::RecordEventInGraph(routed_, stream_)
                        : cuda::RecordEvent(routed_, stream_));
  }
  // The shared expert does not depend on the routing: it runs while the
  // host reads the routing back and misses are copied.
  if (c.shared_ff > 0) {
    RETURN_IF_ERROR(SharedExpert(m, n_tok));
    Mark("moe.shared");
  }
  int max_entries = static_cast<int>(n_tok);
  std::vector<int32_t> begin;
  // (While capturing, the wait is CutSegment's, after the launch.)
  if ((!one || need_ids) && capturing_ == nullptr) {
    RETURN_IF_ERROR(cuda::WaitEvent(routed_));
  }
  if (!one) {
    const int32_t* b = host_begin_.as<int32_t>();
    begin.assign(b, b + n_expert + 1);
    max_entries = 1;
    for (int x = 0; x < n_expert; ++x) {
      max_entries = std::max(max_entries, begin[x + 1] - begin[x]);
    }
  }
  if (need_ids) {
    if (capturing_ != nullptr) {
      RETURN_IF_ERROR(CutSegment({DecodeCut::kRouting, il}));
    }
    RETURN_IF_ERROR(AcquireRouted(il, n_tok, begin));
    Mark("moe.acquire");
    if (capturing_ != nullptr) RETURN_IF_ERROR(cuda::Graph::BeginCapture(stream_));
  }
  cuda::GroupedMatMul g;
  g.rows = ff;
  g.cols = e;
  g.n_groups = one ? k : n_expert;
  g.max_entries_per_group = max_entries;
  g.d_group_weight = one ? w.ids : nullptr;
  g.d_group_begin = one ? nullptr : w.group_begin;
  g.d_x_row = one ? w.zeros : w.entry_token;
  g.d_x = w.xn;
  g.x_stride = e;
  g.y_stride = ff;
  g.type = m.gate_type;
  float* up_out = w.expert_u;
  if (fuse_gate_up) {
    // Rows 0..k-1 of expert_g get the gate products, k..2k-1 the up ones.
    g.n_groups = 2 * k;
    g.d_group_weight = w.paired_ids;
    g.d_weights = m.gate_table();
    g.d_y = w.expert_g;
    RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(g, stream_));
    up_out = w.expert_g + k * ff;
    g.n_groups = k;
    g.d_group_weight = w.ids;
  } else {
    g.d_weights = m.gate_table();
    g.d_y = w.expert_g;
    RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(g, stream_));
    g.type = m.up_type;
    g.d_weights = m.up_table();
    g.d_y = w.expert_u;
    RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(g, stream_));
  }
  cuda::SwiGlu(w.expert_g, up_out, n_tok * k * ff, stream_);
  cuda::GroupedMatMul down = g;
  down.type = m.down_type;
  down.rows = e;
  down.cols = ff;
  down.d_weights = m.down_table.as<const void*>();
  down.d_x_row = nullptr;
  down.d_x = w.expert_g;
  down.x_stride = ff;
  down.d_y = w.expert_y;
  down.y_stride = e;
  RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(down, stream_));
  if (one && host_path_) RETURN_IF_ERROR(AddHostExperts(il));
  cuda::CombineExperts(w.expert_y, one ? w.iota : w.slot_entry, w.weights,
                       n_tok, k, e, w.y, stream_);
  launches_ += fuse_gate_up ? 4 : 5;
  Mark("moe.experts");
  if (c.shared_ff == 0) return absl::OkStatus();
  cuda::AddGatedShared(m.shared_gate_inp, w.xn, w.shared_y, n_tok, e, w.y,
                       stream_);
  ++launches_;
  Mark("moe.shared_add");
  return absl::OkStatus();
}

absl::Status CudaModel::CutSegment(DecodeCut cut) const {
  ASSIGN_OR_RETURN(cuda::Graph g, cuda::Graph::EndCapture(stream_));
  RETURN_IF_ERROR(g.Launch(stream_));
  capturing_->segments.push_back(std::move(g));
  capturing_->cuts.push_back(cut);
  if (cut.kind != DecodeCut::kRouting) return absl::OkStatus();
  return cuda::WaitEvent(routed_);  // the segment's routing record
}

// What keeping the host's share ready costs a decode step per layer: the
// second segment's launch, the input's copy back, the rows' copy over and
// the add. Measured on the H200 (bench35, locality 0.2, 25%: the cost
// policy with almost nothing computed on the host ran ~24 us per layer
// slower than copy).
constexpr double kHostPathCostS = 20e-6;

void CudaModel::ChooseHostPath() const {
  if (experts_ == nullptr || !host_misses_) return;
  const double saving = experts_->TakeSaving();
  if (experts_->splitter().policy() != memory::MissPolicy::kCost) return;
  host_saving_s_ = host_saving_s_ < 0 ? saving : 0.9 * host_saving_s_ + 0.1 * saving;
  // Hysteresis: on above 1.5x the cost, off below it.
  const double cost = kHostPathCostS * static_cast<double>(layers_.size());
  if (host_path_ && host_saving_s_ < cost) host_path_ = false;
  if (!host_path_ && host_saving_s_ > 1.5 * cost) host_path_ = true;
  experts_->SetHostPath(host_path_);
}

absl::Status CudaModel::RunHostExperts() const {
  const int64_t e = desc_.moe.n_embd;
  float* y = host_y_.as<float>();
  if (host_y_used_) std::memset(y, 0, host_y_.bytes());
  host_y_used_ = !host_experts_.empty();
  if (host_experts_.empty()) return absl::OkStatus();
  std::vector<ExpertWeights>& ws = host_weights_;
  ws.clear();
  uint64_t bytes = 0;
  for (const HostExpert& h : host_experts_) {
    ws.push_back(h.weights);
    for (const Matrix* m : {&h.weights.gate, &h.weights.up, &h.weights.down}) {
      bytes += static_cast<uint64_t>(m->rows) * m->row_bytes;
    }
  }
  host_out_.resize(ws.size() * e);
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(ExpertsOneToken(ws, host_x_.as<float>(), host_out_.data(),
                                  host_pool_.get()));
  const std::chrono::duration<double> took =
      std::chrono::steady_clock::now() - t0;
  experts_->ObserveHost(bytes, took.count());
  for (size_t i = 0; i < host_experts_.size(); ++i) {
    std::memcpy(y + host_experts_[i].index * e, host_out_.data() + i * e,
                e * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status CudaModel::AddHostExperts(int64_t il) const {
  // The device's products are running; the host computes its share
  // meanwhile. While capturing, the segment so far is launched first (and
  // the host's work is redone between the two segments at every replay).
  if (capturing_ != nullptr) {
    RETURN_IF_ERROR(CutSegment({DecodeCut::kHostExperts, il}));
  }
  RETURN_IF_ERROR(RunHostExperts());
  if (capturing_ != nullptr) RETURN_IF_ERROR(cuda::Graph::BeginCapture(stream_));
  const int64_t n = desc_.moe.n_expert_used * desc_.moe.n_embd;
  RETURN_IF_ERROR(cuda::CopyToDevice(device_host_y_.data(), host_y_.data(),
                                     n * sizeof(float), stream_));
  cuda::Add(ws_.expert_y, device_host_y_.as<float>(), n, stream_);
  ++launches_;
  return absl::OkStatus();
}

absl::Status CudaModel::Mixer(int64_t il, int64_t n_tok,
                              DeviceState& st) const {
  const DeviceLayer& l = layers_[il];
  if (l.mixer == MixerKind::kAttention) {
    return Attention(l.attn, n_tok, st.capacity(), st.k(il), st.v(il));
  }
  return DeltaNet(l.delta, n_tok, st.conv(il), st.ssm(il));
}

absl::Status CudaModel::Enqueue(int64_t n_tok, DeviceState& st,
                                LogitRows rows) const {
  Workspace& w = ws_;
  const int64_t e = desc_.info.n_embd;
  const float eps = desc_.eps;
  RETURN_IF_ERROR(cuda::DequantRows(token_embd_.type, token_embd_.data, e,
                                    w.ids_in, n_tok, w.x, stream_));
  ++launches_;
  Mark("embed");
  for (int64_t il = 0; il < static_cast<int64_t>(layers_.size()); ++il) {
    const DeviceLayer& l = layers_[il];
    // The previous block's MoE output joins the residual stream here.
    cuda::AddRmsNorm(w.x, il == 0 ? nullptr : w.y, n_tok, e, l.mixer_norm, eps,
                     w.xn, stream_);
    Mark("norms");
    RETURN_IF_ERROR(Mixer(il, n_tok, st));
    cuda::AddRmsNorm(w.x, w.y, n_tok, e, l.ffn_norm, eps, w.xn, stream_);
    launches_ += 2;
    Mark("norms");
    RETURN_IF_ERROR(Moe(il, l.moe, n_tok));
  }
  if (rows == LogitRows::kNone) {
    return cuda::LastLaunchError("cuda forward");
  }
  const int64_t first = rows == LogitRows::kLast ? n_tok - 1 : 0;
  const int64_t count = n_tok - first;
  cuda::AddRmsNorm(w.x + first * e, w.y + first * e, count, e, output_norm_,
                   eps, w.xn, stream_);
  ++launches_;
  RETURN_IF_ERROR(Project(output_, w.xn, count, w.logits));
  Mark("head");
  return cuda::LastLaunchError("cuda forward");
}

absl::Status CudaModel::ForwardImpl(absl::Span<const int32_t> tokens,
                                    SequenceState& seq, LogitRows rows,
                                    std::vector<float>* logits) const {
  auto* st = dynamic_cast<DeviceState*>(&seq);
  if (st == nullptr || st->owner() != this) {
    return absl::InvalidArgumentError(
        "Forward: the state was not made by this CUDA model");
  }
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(cuda::SetDevice(device_));
  Workspace& w = ws_;
  const int64_t n_tok = static_cast<int64_t>(tokens.size());
  if (rows == LogitRows::kAll && n_tok > w.logits_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: logits of every row of a ", n_tok,
        "-token batch exceed the workspace (", w.logits_rows, " rows)"));
  }
  const int32_t pos0 = seq.position();
  RETURN_IF_ERROR(cuda::CopyToDevice(w.ids_in, tokens.data(),
                                     n_tok * sizeof(int32_t), stream_));
  RETURN_IF_ERROR(cuda::CopyToDevice(w.pos0, &pos0, sizeof(int32_t), stream_));
  const bool decode = n_tok == 1 && rows == LogitRows::kLast;
  if (decode && options_.decode_graph) {
    // A decode step is a CUDA graph, cut into one segment per layer while
    // the host must see each layer's routing (streaming experts, or a routing
    // observer).
    DeviceState::DecodeGraph& graph = st->decode_graph(host_path_ ? 1 : 0);
    std::vector<cuda::Graph>& segments = graph.segments;
    if (segments.empty()) {
      // Captured while it runs: each cut launches the segment so far and
      // lets the host act on the layer's routing. The copies above run
      // before the capture starts: the graph reads ids_in and pos0 where
      // they are.
      RETURN_IF_ERROR(cuda::Synchronize(stream_));
      RETURN_IF_ERROR(cuda::Graph::BeginCapture(stream_));
      const int64_t before = launches_;
      capturing_ = &graph;
      absl::Status body = Enqueue(1, *st, rows);
      capturing_ = nullptr;
      absl::StatusOr<cuda::Graph> last = cuda::Graph::EndCapture(stream_);
      if (!body.ok() || !last.ok()) {
        segments.clear();
        graph.cuts.clear();
        return body.ok() ? last.status() : body;
      }
      RETURN_IF_ERROR(last->Launch(stream_));
      segments.push_back(*std::move(last));
      launches_per_decode_ = launches_ - before;
    } else {
      const std::vector<DecodeCut>& cuts = graph.cuts;
      for (size_t i = 0; i < cuts.size(); ++i) {
        RETURN_IF_ERROR(segments[i].Launch(stream_));
        if (cuts[i].kind == DecodeCut::kHostExperts) {
          RETURN_IF_ERROR(RunHostExperts());
          continue;
        }
        // The segment records routed_ once the routing is back.
        RETURN_IF_ERROR(cuda::WaitEvent(routed_));
        RETURN_IF_ERROR(AcquireRouted(cuts[i].layer, 1, {}));
      }
      RETURN_IF_ERROR(segments.back().Launch(stream_));
    }
    ChooseHostPath();
  } else {
    const int64_t before = launches_;
    if (options_.profile) {
      Mark("start");
      marks_.clear();
      std::swap(events_[0], events_[1]);
    }
    RETURN_IF_ERROR(Enqueue(n_tok, *st, rows));
    if (decode) launches_per_decode_ = launches_ - before;
  }
  if (rows != LogitRows::kNone) {
    const int64_t count = rows == LogitRows::kLast ? 1 : n_tok;
    logits->resize(count * desc_.info.n_vocab);
    RETURN_IF_ERROR(cuda::CopyToHost(logits->data(), w.logits,
                                     logits->size() * sizeof(float), stream_));
  }
  RETURN_IF_ERROR(CollectProfile(n_tok == 1 ? "decode" : "prefill"));
  return cuda::Synchronize(stream_);
}

absl::StatusOr<std::unique_ptr<Model>> FromEngine(const ModelFiles& files,
                                                  const EngineOptions& o) {
  return LoadCudaModel(files, {.device = o.device,
                               .decode_graph = !o.profile,
                               .profile = o.profile,
                               .expert_slots = o.experts.slots,
                               .expert_arena_fraction = o.experts.arena_fraction,
                               .expert_policy = o.experts.policy,
                               .expert_prefetch = o.experts.prefetch,
                               .expert_host_tier_bytes = o.experts.host_tier_bytes,
                               .expert_miss_policy = o.experts.miss_policy,
                               .expert_host_threads = o.experts.host_threads,
                               .routing_observer = o.routing_observer});
}

const bool kRegistered = RegisterBackend(Backend::kCuda, FromEngine);

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadCudaModel(
    const ModelFiles& files, const CudaModelOptions& options) {
  ASSIGN_OR_RETURN(ArchDesc desc, DescribeModel(files));
  ASSIGN_OR_RETURN(std::unique_ptr<CudaModel> m,
                   CudaModel::Create(files, std::move(desc), options));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace sluice
