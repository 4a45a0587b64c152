// The forward pass of a batch of tokens (prefill, and any call that is not
// a one-token decode step) on the GPU: embedding to logits with the batch
// kernels (ops.h, quant_matmul.h), the routed experts grouped by expert so
// each expert's weights are read once per group. Where experts stream or a
// routing observer listens, each layer's routing is read back and the
// experts acquired before they are computed. Mixers: attention, Gated
// DeltaNet, latent attention (deepseek2, mla_ops.h); FFNs: routed experts
// (qwen's top-k, or route_ops.h's routing where ModelView::plain_routing is
// false or a block has a selection bias; a gated or ungated shared expert)
// or a dense SwiGLU. deepseek2 decodes here too, one token a pass (the
// fused decode program does not handle it).
//
// Thread-safety: none; the model runs one pass at a time.
#ifndef SLUICE_MODEL_CUDA_BATCH_PASS_H_
#define SLUICE_MODEL_CUDA_BATCH_PASS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"
#include "model/arch.h"
#include "model/cuda/device_layers.h"
#include "model/cuda/device_state.h"
#include "model/cuda/expert_stream.h"
#include "model/cuda/workspace.h"
#include "model/moe.h"

namespace sluice {

// Events around each section of a pass, summed per "<phase>.<section>"
// (BackendStats::profile).
class PassProfiler {
 public:
  explicit PassProfiler(bool on) : on_(on) {}
  ~PassProfiler();
  void Start(cuda::Stream stream);
  void Mark(const char* section, cuda::Stream stream);
  absl::Status Collect(const char* phase, cuda::Stream stream);
  const std::vector<std::pair<std::string, double>>& ms() const { return ms_; }

 private:
  bool on_;
  std::vector<cuda::Event> events_;
  std::vector<const char*> marks_;
  std::vector<std::pair<std::string, double>> ms_;
};

struct BatchContext : ModelView {
  cuda::Stream stream = nullptr;
  ExpertStream* experts = nullptr;             // streaming, or null
  RoutingObserver* observer = nullptr;         // or null
  RoutingSource* source = nullptr;             // forced routing, or null
  // Pinned [3][n_expert + 1]: the bounds of a pass's groups, then of a
  // mixed pass's short and long rows' (SplitKindsEnabled).
  int32_t* host_begin = nullptr;
  // Pinned [4 x n_expert_used]: a one-token pass's slots ordered for the
  // overlap of misses (OverlapMissesEnabled).
  int32_t* host_slots = nullptr;
  int32_t* host_routing = nullptr;             // pinned ids, then weights
  // --expert_skip (model/expert_skip.h) in one-token passes while
  // streaming: 0 off. The routing's weights then come back with its ids.
  double skip_threshold = 0;
  // Streaming one-token passes predict the next block's experts and
  // prefetch them (ExpertStream::Prefetch), as the decode program does.
  bool prefetch = false;
  cuda::Event routed = nullptr;
  PassProfiler* profiler = nullptr;
  // Set while a pass of one-row sequences is captured into a graph
  // (EnqueueBatch's capture mode): pinned [n_layer][n_expert + 1], where
  // each MoE block's group bounds are copied for the caller to count its
  // experts once the pass ran.
  int32_t* graph_bounds = nullptr;
};

// One sequence's rows of a pass: rows [row, row + n) of the micro-batch, at
// positions pos0 .. pos0 + n - 1 of its own state.
struct PassSequence {
  DeviceState* state = nullptr;
  int64_t row = 0;
  int64_t n = 0;
  int32_t pos0 = 0;
};

// Rows [row, row + n) of the micro-batch whose logits a pass computes.
struct RowRun {
  int64_t row = 0;
  int64_t n = 0;
};

// Enqueues one micro-batch of n_tok tokens (ids already in the workspace;
// for one sequence its position too, in ws->pos0) of one or several
// sequences (`seqs`, in row order, covering every row): the mixers run on
// each row's own sequence state (for several, one launch over all of them,
// through the workspace's sequence tables, which this fills), everything
// else over all rows at once (the routed experts grouped over the whole
// batch, each acquired once). The logits of the rows of `logit_rows` go to
// ws->logits in that order. experts_per_layer, when not null, receives the
// distinct routed experts of each block (0 for a block without them).
//
// Capture mode (c.graph_bounds set; only without an expert stream, routing
// observer or source, for sequences of one row each):
// nothing waits for the host, so the launches can be captured into a graph
// and replayed for any sequences of as many rows: the sequence tables are
// not filled (UploadSequences does that before each replay), the grouped
// expert products are sized for the largest group there can be (every
// row), and experts_per_layer is left for the caller to count from
// c.graph_bounds (SizesOf).
absl::Status EnqueueBatch(const BatchContext& c, int64_t n_tok,
                          absl::Span<const PassSequence> seqs,
                          absl::Span<const RowRun> logit_rows,
                          std::vector<int32_t>* experts_per_layer);

// Whether a pass that mixes short sequences (fewer than
// cuda::kTensorCoreMinEntries rows: decode steps, short prompts) with long
// chunks multiplies the short ones' rows apart, as a pass of short rows
// would (8-bit rows, no tensor cores), and only the long chunks' on tensor
// cores. It needs the short sequences first: CudaModel orders a batch's
// pieces so. Without, every row of a pass with a long chunk is multiplied
// in BF16, and a prompt's decode rows inside a batch differed from alone
// past the gates (qwen35moe-tiny-mixed p1, 31/33 top-1; apart 33/33, H100
// 2026-12-06). On by default; SLUICE_CUDA_SPLIT_KINDS=0 turns it off (read
// once), SetSplitKindsEnabled at any time (tests).
bool SplitKindsEnabled();
void SetSplitKindsEnabled(bool enabled);

// Whether CudaModel captures and replays graphs for decode passes of
// kTensorCoreMinEntries to 64 one-row sequences too, not only for fewer.
// A decode pass never takes the tensor cores (its longest sequence has one
// row), so a captured pass picks the kernels an eager one does at any row
// count, and its grouped products are sized for every row. Off by default
// until measured on a GPU; SLUICE_CUDA_WIDE_BATCH_GRAPHS=1 turns it on
// (read once), SetWideBatchGraphsEnabled at any time (tests).
bool WideBatchGraphsEnabled();
void SetWideBatchGraphsEnabled(bool enabled);

// Fills the workspace's sequence tables of a pass of several sequences
// (their rows, positions and states) on c.stream.
absl::Status UploadSequences(const BatchContext& c, int64_t n_tok,
                             absl::Span<const PassSequence> seqs);

// A block's groups from their bounds ([n_expert + 1]): the largest (at
// least 1: a launch bound) and how many are not empty (distinct experts).
struct GroupSizes {
  int32_t largest = 1;
  int32_t used = 0;
};
GroupSizes SizesOf(const int32_t* bounds, int64_t n_expert);

// Tells the observer layer il's routing (host_routing holds n_tok x k ids,
// then the weights) and has the expert stream acquire the experts `begin`
// (a batch's group bounds) or the ids (one token) name; on_host, for a
// decode step with a host miss policy, receives the host's share; pending
// (ExpertStream::Acquire's) the experts whose copies the caller waits for.
// With c.skip_threshold > 0 and one token, the token's cold experts are
// skipped first (SkipRouted): its kept weights are rescaled in
// host_routing and on the device (ws->weights), the skipped ones acquired
// as zero.
absl::Status AcquireRouted(const BatchContext& c, int il, int64_t n_tok,
                           const std::vector<int32_t>& begin, bool prefetch,
                           std::vector<HostExpert>* on_host,
                           std::vector<int32_t>* pending = nullptr);

// Whether a one-token pass that streams experts multiplies the routed
// experts already in slots while the missed ones are copied, then the
// missed ones (each expert's products and the combine in slot order are
// those of the one launch: the same bits). Off by default: no faster on
// Kimi-K2 at 25% (run 12, H100); SLUICE_CUDA_OVERLAP_MISSES=1
// turns it on (read once), SetOverlapMissesEnabled at any time (tests).
bool OverlapMissesEnabled();
void SetOverlapMissesEnabled(bool enabled);

// The overlap's slot tables of one token (k = ids.size() routed experts in
// slot order, `pending` those still being copied), into out[4k]: [0, k)
// the ids in launch order, the slots in place first, each part in slot
// order; [k, 3k) each part's ids then its ids + n_expert (the up half of a
// gate/up table), the in-place part first; [3k, 4k) slot s's position in
// the launch order. Returns how many slots are in place.
int OverlapSlots(absl::Span<const int32_t> ids, absl::Span<const int32_t> pending,
                 int n_expert, int32_t* out);

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_BATCH_PASS_H_
