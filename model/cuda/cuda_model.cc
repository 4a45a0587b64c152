#include "model/cuda/cuda_model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/quant_matmul.h"
#include "loader/model_files.h"
#include "model/cuda/cuda_model_impl.h"
#include "model/engine.h"

namespace sluice {
namespace cuda_model_internal {

// Bytes written to flush the L2 cache (60 MB on the H200) before each op
// TimeDecodeKernels replays.
constexpr uint64_t kFlushBytes = 256ull << 20;

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
  uint64_t dense = weights_->dense_bytes();
  for (const DeviceLayer& l : layers_) dense += l.mla.k_b_owned.bytes();  // unfused K_b
  s.device_memory = {{"dense", dense},
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
  s.decode_graph = decode_supported_.ok() ? options_.decode_graph : PassGraphApplies();
  s.profile = profiler_->ms();
  if (experts_ != nullptr) {
    s.experts = ByModelLayer(experts_->Stats());
    s.experts.skipping = SkipThreshold() > 0;
  }
  s.experts_warmed = experts_warmed_;
  s.experts_warm_planned = experts_warm_planned_;
  s.decode_host = decode_host_;
  if (host_ != nullptr) {
    for (int i = 0; i < 3; ++i) {
      s.decode_host.host_calls[i] = host_->calls()[i];
      s.decode_host.host_call_s[i] = host_->call_seconds()[i];
    }
  }
  return s;
}

absl::Status CudaModel::Run(const HostAction& action) {
  if (action.kind == HostAction::kHostExperts) return host_->Run(*experts_, stream_);
  const bool host = HostPathOn();
  // The host path: the pool wakes while the device computes up to the
  // routing, so the host's share does not pay the threads' wake-up (run 21
  // on the H100: the cost policy's host estimate had sunk to 1-2 GB/s with
  // its rare calls; run 22 with the wake: bench35's host took 47% of the
  // misses at 56 GB/s, bench397's still starved).
  if (host) host_->Wake();
  // The program recorded routed_ once the layer's routing was back.
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(cuda::WaitEvent(routed_));
  step_wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return AcquireRouted(Batch(), action.layer, 1, {}, PrefetchesWith(host),
                       host ? host_->experts() : nullptr);
}

absl::StatusOr<DecodeProgram*> CudaModel::Program(DeviceState& st) const {
  const bool host = HostPathOn();
  std::unique_ptr<DecodeProgram>& p = st.decode_program(host ? 1 : 0);
  if (p == nullptr) {
    DecodeContext c = Decode();
    c.prefetch = c.prefetch && PrefetchesWith(host);
    ASSIGN_OR_RETURN(DecodeProgram built, BuildDecodeProgram(c, st, host ? host_.get() : nullptr));
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
  // The capturing step is not timed (its host times hold the capture's).
  const bool replay = p->captured() || !options_.decode_graph;
  self->step_wait_s_ = 0;
  RETURN_IF_ERROR(p->Run(stream_, options_.decode_graph, *self,
                         replay ? &decode_host_ : nullptr));
  if (replay) decode_host_.routing_wait_s += step_wait_s_;
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
  ASSIGN_OR_RETURN(cuda::DeviceBuffer flush, cuda::DeviceBuffer::Create(kFlushBytes));
  if (!decode_supported_.ok()) {
    // No decode program (e.g. deepseek2): the captured one-token pass,
    // kernel node by kernel node, labelled by kernel (bytes not counted).
    if (!st->pass_graph().valid()) {
      return absl::FailedPreconditionError(
          "TimeDecodeKernels: no one-token pass was captured (decode a token first)");
    }
    ASSIGN_OR_RETURN(std::vector<cuda::Graph::KernelTime> times,
                     st->pass_graph().TimeKernels(stream_, reps, flush.data(), kFlushBytes));
    std::vector<KernelTiming> out;
    for (const cuda::Graph::KernelTime& t : times) {
      out.push_back({t.name, 0, 1, t.us,
                     absl::StrCat("grid ", t.grid[0], "x", t.grid[1], "x", t.grid[2], " block ",
                                  t.block)});
    }
    return out;
  }
  ASSIGN_OR_RETURN(DecodeProgram * p, Program(*st));
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

// Each piece's logit rows (of `vocab` floats), from the pass's order of the
// pieces (`order`) back to the pieces' own.
void PutBackInOrder(absl::Span<const BatchChunk> pieces, const std::vector<size_t>& order,
                    int64_t vocab, std::vector<float>* logits) {
  std::vector<int64_t> at(pieces.size() + 1, 0);  // a piece's first row, pieces' order
  for (size_t i = 0; i < pieces.size(); ++i) {
    at[i + 1] = at[i] + LogitRowCount(pieces[i].rows,
                                      static_cast<int64_t>(pieces[i].tokens.size()));
  }
  std::vector<float> back(logits->size());
  int64_t from = 0;
  for (const size_t i : order) {
    const int64_t rows = at[i + 1] - at[i];
    std::copy(logits->begin() + from * vocab, logits->begin() + (from + rows) * vocab,
              back.begin() + at[i] * vocab);
    from += rows;
  }
  *logits = std::move(back);
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
    if (experts_per_layer != nullptr) OneTokenExperts(experts_per_layer);
    return FinishPass(count, logits);
  }
  profiler_->Start(stream_);
  const PassSequence one{&st, 0, n_tok, pos0};
  std::vector<RowRun> runs;
  if (count > 0) runs.push_back({n_tok - count, count});
  if (decode) {
    bool done = false;
    RETURN_IF_ERROR(OnePassByGraph(st, one, runs, experts_per_layer, &done));
    if (done) return FinishPass(count, logits);
  }
  RETURN_IF_ERROR(EnqueueBatch(Batch(), n_tok, {&one, 1}, runs, experts_per_layer));
  // A decode step here is a one-token batch pass (no decode program for
  // this model, e.g. deepseek2): profiled as "decode.*".
  RETURN_IF_ERROR(profiler_->Collect(decode ? "decode" : "prefill", stream_));
  return FinishPass(count, logits);
}

void CudaModel::OneTokenExperts(std::vector<int32_t>* experts_per_layer) const {
  experts_per_layer->assign(layers_.size(), 0);
  for (size_t il = 0; il < layers_.size(); ++il) {
    if (layers_[il].ffn != FfnKind::kDense) {
      (*experts_per_layer)[il] = static_cast<int32_t>(desc_.moe.n_expert_used);
    }
  }
}

absl::StatusOr<bool> CudaModel::ReplayCaptured(cuda::Graph& graph, bool& failed,
                                               const std::function<absl::Status()>& enqueue,
                                               const std::string& what) const {
  if (failed) return false;
  if (!graph.valid()) {
    absl::Status s = cuda::Graph::BeginCapture(stream_);
    if (s.ok()) {
      const absl::Status enqueued = enqueue();
      absl::StatusOr<cuda::Graph> captured = cuda::Graph::EndCapture(stream_);
      s = enqueued.ok() ? captured.status() : enqueued;
      if (s.ok()) graph = std::move(*captured);
    }
    if (!s.ok()) {
      // Nothing of the capture ran: the caller runs the pass eagerly (and
      // meets any error that was not the capture's).
      cuda::LastLaunchError("capture").IgnoreError();
      std::fprintf(stderr, "cuda backend: %s was not captured (%s); it runs without a graph\n",
                   what.c_str(), s.ToString().c_str());
      failed = true;
      return false;
    }
  }
  RETURN_IF_ERROR(graph.Launch(stream_));
  return true;
}

absl::Status CudaModel::OnePassByGraph(DeviceState& st, const PassSequence& one,
                                       absl::Span<const RowRun> runs,
                                       std::vector<int32_t>* experts_per_layer,
                                       bool* done) const {
  *done = false;
  if (!PassGraphApplies()) return absl::OkStatus();
  cuda::Graph& graph = st.pass_graph();
  // Captured now, the pass writes experts_per_layer itself.
  const bool capture = !graph.valid();
  ASSIGN_OR_RETURN(*done, ReplayCaptured(
                              graph, st.pass_graph_failed(),
                              [&] { return EnqueueBatch(Batch(), 1, {&one, 1}, runs,
                                                        experts_per_layer); },
                              "the one-token pass"));
  if (*done && capture) launches_per_decode_ = graph.kernels();
  if (*done && !capture && experts_per_layer != nullptr) OneTokenExperts(experts_per_layer);
  return absl::OkStatus();
}

bool CudaModel::DecodesEachAlone(absl::Span<const BatchChunk> pieces) const {
  if (pieces.size() > kMaxDecodedAlone || !decode_supported_.ok() || experts_ != nullptr) {
    return false;
  }
  for (const BatchChunk& p : pieces) {
    if (p.tokens.size() != 1 || p.rows != LogitRows::kLast) return false;
  }
  return true;
}

absl::Status CudaModel::ForwardEachAlone(absl::Span<const BatchChunk> pieces,
                                         std::vector<float>* logits,
                                         BatchForwardStats* stats) const {
  std::vector<DeviceState*> states;
  for (size_t i = 0; i < pieces.size(); ++i) {
    // Every state is checked before any runs.
    ASSIGN_OR_RETURN(DeviceState * st, Own(*pieces[i].state, absl::StrCat("chunk ", i)));
    states.push_back(st);
  }
  stats->experts_per_layer.assign(layers_.size(), 0);
  std::vector<float> one;
  std::vector<int32_t> per_layer;
  for (size_t i = 0; i < pieces.size(); ++i) {
    RETURN_IF_ERROR(
        ForwardOne(pieces[i].tokens, *states[i], LogitRows::kLast, &one, &per_layer));
    logits->insert(logits->end(), one.begin(), one.end());
    for (size_t il = 0; il < layers_.size(); ++il) stats->experts_per_layer[il] += per_layer[il];
  }
  return absl::OkStatus();
}

absl::Status CudaModel::BatchByGraph(absl::Span<const PassSequence> seqs,
                                     absl::Span<const RowRun> runs, bool* done) const {
  *done = false;
  const int64_t n = static_cast<int64_t>(seqs.size());
  const int64_t most = WideBatchGraphsEnabled() ? kMaxGraphRows : cuda::kTensorCoreMinEntries - 1;
  if (!PassGraphApplies() || n > most ||
      runs.size() != 1 || runs[0].row != 0 || runs[0].n != n) {
    return absl::OkStatus();
  }
  int capacity = 0;
  for (const PassSequence& s : seqs) {
    if (s.n != 1) return absl::OkStatus();
    capacity = std::max(capacity, s.state->capacity());
  }
  BatchGraph& g = batch_graphs_[n];
  if (g.failed) return absl::OkStatus();
  BatchContext c = Batch();
  c.graph_bounds = host_bounds_.as<int32_t>();
  RETURN_IF_ERROR(UploadSequences(c, n, seqs));
  if (g.capacity != capacity) {
    g.graph = cuda::Graph();  // captured for another capacity
    g.capacity = capacity;
  }
  ASSIGN_OR_RETURN(*done, ReplayCaptured(g.graph, g.failed,
                                         [&] { return EnqueueBatch(c, n, seqs, runs, nullptr); },
                                         absl::StrCat("the pass of ", n, " one-row sequences")));
  return absl::OkStatus();
}

void CudaModel::CountBatchGraphExperts(std::vector<int32_t>* experts_per_layer) const {
  const int64_t n_expert = desc_.moe.n_expert;
  const int32_t* bounds = host_bounds_.as<int32_t>();
  experts_per_layer->assign(layers_.size(), 0);
  for (size_t il = 0; il < layers_.size(); ++il) {
    if (layers_[il].ffn == FfnKind::kDense) continue;
    (*experts_per_layer)[il] = SizesOf(bounds + il * (n_expert + 1), n_expert).used;
  }
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
  if (DecodesEachAlone(pieces)) return ForwardEachAlone(pieces, logits, stats);
  // The pass's order of the pieces: with SplitKindsEnabled, the short
  // ones first (batch_pass.h), the logits put back in the pieces' order.
  std::vector<size_t> order(pieces.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (SplitKindsEnabled()) {
    std::stable_partition(order.begin(), order.end(), [&](size_t i) {
      return static_cast<int64_t>(pieces[i].tokens.size()) < cuda::kTensorCoreMinEntries;
    });
  }
  std::vector<PassSequence> seqs;
  std::vector<RowRun> runs;
  std::vector<int32_t> ids;
  int64_t n_tok = 0, count = 0;
  for (const size_t i : order) {
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
  bool by_graph = false;
  RETURN_IF_ERROR(BatchByGraph(seqs, runs, &by_graph));
  if (by_graph) {
    RETURN_IF_ERROR(FinishPass(count, logits));
    CountBatchGraphExperts(&stats->experts_per_layer);
    return absl::OkStatus();
  }
  profiler_->Start(stream_);
  RETURN_IF_ERROR(EnqueueBatch(Batch(), n_tok, seqs, runs, &stats->experts_per_layer));
  RETURN_IF_ERROR(profiler_->Collect("batch", stream_));
  RETURN_IF_ERROR(FinishPass(count, logits));
  if (!std::is_sorted(order.begin(), order.end())) {
    PutBackInOrder(pieces, order, desc_.info.n_vocab, logits);
  }
  return absl::OkStatus();
}

namespace {

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
}  // namespace cuda_model_internal

absl::StatusOr<std::unique_ptr<Model>> LoadCudaModel(const ModelFiles& files,
                                                     const CudaModelOptions& options) {
  ASSIGN_OR_RETURN(ArchDesc desc, DescribeModel(files));
  RETURN_IF_ERROR(BindRoutingSource(options.routing_source, desc));
  ASSIGN_OR_RETURN(std::unique_ptr<cuda_model_internal::CudaModel> m,
                   cuda_model_internal::CudaModel::Create(files, std::move(desc), options));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace sluice
