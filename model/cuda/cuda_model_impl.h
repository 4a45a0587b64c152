// The CUDA backend's model class, shared by the two files that define it:
// cuda_model_load.cc (loading: weights, the expert stream, shapes, buffers)
// and cuda_model.cc (state, statistics, the forward passes). Private to
// model/cuda; the rest of the tree sees LoadCudaModel (cuda_model.h).
#ifndef SLUICE_MODEL_CUDA_CUDA_MODEL_IMPL_H_
#define SLUICE_MODEL_CUDA_CUDA_MODEL_IMPL_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/decode_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_pages.h"
#include "kernels/cuda/mla_ops.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/route_ops.h"
#include "memory/expert_profile.h"
#include "model/cuda/batch_pass.h"
#include "model/cuda/cuda_model.h"
#include "model/cuda/decode_step.h"
#include "model/cuda/device_layers.h"
#include "model/cuda/device_state.h"
#include "model/cuda/device_weights.h"
#include "model/cuda/expert_stream.h"
#include "model/cuda/host_misses.h"
#include "model/cuda/workspace.h"

namespace sluice::cuda_model_internal {

using cuda::Stream;

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
  // --expert_skip's threshold where it applies (streaming experts), else 0.
  double SkipThreshold() const {
    return experts_ != nullptr ? options_.experts.skip_threshold : 0.0;
  }
  // The state's decode program of the current variant (built at first use).
  absl::StatusOr<DecodeProgram*> Program(DeviceState& st) const;
  absl::Status DecodeStep(DeviceState& st) const;
  absl::StatusOr<DeviceState*> Own(SequenceState& seq, const std::string& what) const;
  // One sequence's piece (ForwardImpl); experts_per_layer as EnqueueBatch's.
  absl::Status ForwardOne(absl::Span<const int32_t> tokens, DeviceState& st, LogitRows rows,
                          std::vector<float>* logits,
                          std::vector<int32_t>* experts_per_layer) const;
  // A one-token pass's experts_per_layer: k in each MoE block, 0 in a dense.
  void OneTokenExperts(std::vector<int32_t>* experts_per_layer) const;
  // Launches `graph`, captured from `enqueue`'s launches on stream_ first
  // where it is not valid yet: true. False where the capture fails (with a
  // line on stderr naming `what`; nothing of it ran) or failed before
  // (`failed`, set then): the caller runs the pass eagerly.
  absl::StatusOr<bool> ReplayCaptured(cuda::Graph& graph, bool& failed,
                                      const std::function<absl::Status()>& enqueue,
                                      const std::string& what) const;
  // Whether nothing in a pass waits for the host: all experts resident, no
  // routing observed or forced, no profile (decode_graph is off while
  // profiling: the sections' events).
  bool PassGraphApplies() const {
    return options_.decode_graph && experts_ == nullptr &&
           options_.routing_observer == nullptr && options_.routing_source == nullptr;
  }
  // A decode step of a model without a decode program: the one-token batch
  // pass through the state's captured graph where PassGraphApplies; false
  // in *done where it does not apply.
  absl::Status OnePassByGraph(DeviceState& st, const PassSequence& one,
                              absl::Span<const RowRun> runs,
                              std::vector<int32_t>* experts_per_layer, bool* done) const;
  // Decode steps of at most kMaxDecodedAlone sequences, every expert
  // resident, with the fused decode program: each sequence's step alone
  // costs less than their batch pass (H100, 2026-12-06, run 6: bench35
  // 0.71 ms a step alone against 2.60 for two in one pass; bench397 1.65
  // against 4.61; three were not measured; at four the pass wins on
  // bench397, 5.54 against 4 x 1.65, and about ties on bench35, 2.97
  // against 4 x 0.71). Each sequence then gets the logits it gets alone.
  static constexpr size_t kMaxDecodedAlone = 2;
  bool DecodesEachAlone(absl::Span<const BatchChunk> pieces) const;
  absl::Status ForwardEachAlone(absl::Span<const BatchChunk> pieces,
                                std::vector<float>* logits, BatchForwardStats* stats) const;
  // The most one-row sequences a pass replayed from a graph has
  // (batch_graphs_ holds one for each count up to it).
  static constexpr int64_t kMaxGraphRows = 64;
  // A pass of fewer than kTensorCoreMinEntries sequences of one row each
  // (WideBatchGraphsEnabled: at most kMaxGraphRows), each wanting its
  // logits (a decode step of a batch): replayed from the
  // graph captured for that many rows (EnqueueBatch's capture mode) where
  // PassGraphApplies; false in *done where it does not apply. After
  // FinishPass, CountBatchGraphExperts fills experts_per_layer.
  absl::Status BatchByGraph(absl::Span<const PassSequence> seqs, absl::Span<const RowRun> runs,
                            bool* done) const;
  void CountBatchGraphExperts(std::vector<int32_t>* experts_per_layer) const;
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
  cuda::PinnedBuffer host_begin_, host_routing_, host_slots_;
  cuda::PinnedBuffer host_forced_;  // forced routing: [n_layer][k] of a decode step
  // A captured batch pass's group bounds, [n_layer][n_expert + 1].
  cuda::PinnedBuffer host_bounds_;
  // BatchByGraph's graphs by rows, each for the KV capacity it was
  // captured with; `failed`: its capture failed, those passes run eagerly.
  struct BatchGraph {
    cuda::Graph graph;
    int capacity = 0;
    bool failed = false;
  };
  mutable std::vector<BatchGraph> batch_graphs_;
  cuda::Event routed_ = nullptr;
  mutable int64_t launches_per_decode_ = 0;
  // Whether a decode step prefetches (--expert_prefetch) when it runs the
  // host path or not: not with it. Measured on the H100 (run 22, 25% of the
  // experts): where the cost policy's host worked (bench35 uniform, 47% of
  // the misses) prefetching took its share onto the link, 334.4 against
  // 417.2 tok/s; where the host path was off, prefetching won (bench397
  // 318.5 against 240.0, locality 0.2 665.1 against 472.4, copy 416.7
  // against 361.0).
  // Whether the next decode step runs the host path (the miss policy's
  // per-step choice, where there is a host share at all).
  bool HostPathOn() const { return host_path_ && host_ != nullptr; }
  bool PrefetchesWith(bool host_path) const {
    return options_.experts.prefetch && !host_path;
  }
  // Host time of the replayed decode steps (BackendStats::decode_host);
  // step_wait_s_ the step in flight's routing waits.
  mutable DecodeHostTimes decode_host_;
  double step_wait_s_ = 0;
  int64_t experts_warmed_ = 0, experts_warm_planned_ = 0;
  uint64_t free_at_start_ = 0;
  mutable std::unique_ptr<PassProfiler> profiler_;
  // options.kv_on_demand: the device pages every state's KV ranges share.
  std::shared_ptr<cuda::DevicePagePool> kv_pages_;
};

}  // namespace sluice::cuda_model_internal

#endif  // SLUICE_MODEL_CUDA_CUDA_MODEL_IMPL_H_
