#include "model/cuda/batch_pass.h"

#include <algorithm>

#include "base/env_switch.h"
#include "base/status_macros.h"
#include "kernels/cuda/decode_ops.h"
#include "kernels/cuda/mla_ops.h"
#include "kernels/cuda/quant_matmul.h"
#include "kernels/cuda/route_ops.h"

namespace sluice {
namespace {

// A decode batch's DeltaNet (one row a sequence) as one cluster launch
// (DeltaNetDecodeFusedSeqs) instead of gates, conv, norms and scan.
EnvSwitch delta_fused_batch("SLUICE_CUDA_DELTA_FUSED_BATCH", true);

// The weight type of a block mixer's first product of xn.
GgmlType MixerInputType(const DeviceLayer& l) {
  switch (l.mixer) {
    case MixerKind::kAttention: return l.attn.wq.type;
    case MixerKind::kDeltaNet: return l.delta.qkv.type;
    default: return l.mla.wq_a.data != nullptr ? l.mla.wq_a.type : l.mla.wq.type;
  }
}

class Pass {
 public:
  Pass(const BatchContext& c, int64_t n_tok, absl::Span<const PassSequence> seqs,
       std::vector<int32_t>* experts_per_layer)
      : c_(c), w_(*c.ws), n_(n_tok), seqs_(seqs), experts_per_layer_(experts_per_layer) {
    // The tensor cores round activations and weights to BF16: worth it for
    // a prompt's chunk, not for a pass whose sequences each bring a few
    // rows (decode steps). Those round the activations to 8 bits as the
    // decode program does for one sequence alone (and llama.cpp's CPU
    // backend, the goldens' reference), and multiply in integer products.
    int64_t longest = 0;
    for (const PassSequence& s : seqs) {
      longest = std::max(longest, s.n);
      max_capacity_ = std::max(max_capacity_, s.state->capacity());
    }
    one_row_each_ = longest == 1 && n_tok == static_cast<int64_t>(seqs.size());
    tensor_cores_ = longest >= cuda::kTensorCoreMinEntries;
    q8_ = !tensor_cores_;
    // Short sequences first, then long chunks only: their rows can be
    // multiplied apart (SplitKindsEnabled).
    if (tensor_cores_ && SplitKindsEnabled()) {
      size_t i = 0;
      while (i < seqs.size() && seqs[i].n < cuda::kTensorCoreMinEntries) short_rows_ += seqs[i++].n;
      bool ordered = true;
      for (; i < seqs.size(); ++i) ordered &= seqs[i].n >= cuda::kTensorCoreMinEntries;
      if (!ordered) short_rows_ = 0;
    }
  }
  absl::Status Run(absl::Span<const RowRun> logit_rows);

 private:
  void Mark(const char* s) const {
    if (c_.profiler != nullptr) c_.profiler->Mark(s, c_.stream);
  }
  // Rows [r0, r0 + n) of a pass and how their products go: tensor cores
  // (activations and weights rounded to BF16) or, without, 8-bit rows.
  struct RowKind {
    int64_t r0, n;
    bool tensor_cores, q8;
  };
  absl::Status Project(const DeviceMatrix& w, const float* x, float* y) const {
    return ProjectKinds(w, x, y, n_, short_rows_);
  }
  // n rows, the first `short_n` of them short sequences' multiplied apart
  // in 8 bits (0: every row as the pass's products go).
  absl::Status ProjectKinds(const DeviceMatrix& w, const float* x, float* y, int64_t n,
                            int64_t short_n) const {
    if (short_n == 0) return ProjectRows(w, x, y, {0, n, tensor_cores_, q8_});
    RETURN_IF_ERROR(ProjectRows(w, x, y, {0, short_n, false, true}));
    if (n == short_n) return absl::OkStatus();
    return ProjectRows(w, x, y, {short_n, n - short_n, true, false});
  }
  // xq: the rows rounded already, or null (rounded here where they are).
  absl::Status ProjectRows(const DeviceMatrix& w, const float* x, float* y, const RowKind& rows,
                           const uint8_t* xq = nullptr) const {
    const float* xr = x + rows.r0 * w.cols;
    if (xq == nullptr) {
      ASSIGN_OR_RETURN(xq, Rounded(w.type, xr, rows.n, w.cols, rows.q8));
    }
    return cuda::MatMul(w.type, w.data, w.rows, w.cols, xr, rows.n, y + rows.r0 * w.rows,
                        c_.stream, rows.tensor_cores, rows.q8, xq);
  }
  // x's n_rows rows of cols (contiguous) rounded to 8 bits for a product
  // with weights of `type`, or null where that product keeps F32
  // activations. xn is rounded once per format until it changes (XnChanged);
  // any other input into act_q8 for each product, which the stream's order
  // keeps from overwriting rows a product before it still reads.
  absl::StatusOr<const uint8_t*> Rounded(GgmlType type, const float* x, int64_t n_rows,
                                         int64_t cols) const {
    return Rounded(type, x, n_rows, cols, q8_);
  }
  absl::StatusOr<const uint8_t*> Rounded(GgmlType type, const float* x, int64_t n_rows,
                                         int64_t cols, bool q8) const;
  // The 8-bit format rows of cols are rounded to for a product with
  // weights of `type` (kNone: it keeps F32 activations, or q8 is off).
  static cuda::Q8Format RoundedFormat(GgmlType type, int64_t cols, bool q8);
  void XnChanged() const { xn_rounded_rows_[0] = xn_rounded_rows_[1] = 0; }
  // x += add (unless null), xn = RMSNorm(x) * w; where the pass rounds
  // xn to 8 bits for products with `next`-type weights (its first product's)
  // and FuseRoundingEnabled, in the norm's own launch (the same bits).
  absl::Status NormXn(const float* add, const float* w, GgmlType next) const;
  // g = SiLU(g) * u over n_rows rows of cols, and those rows rounded for
  // the next product (weights of `type`) where it takes 8-bit rows (q8):
  // Rounded's result, in the SwiGLU's own launch where
  // FuseRoundingEnabled (the same bits).
  absl::StatusOr<const uint8_t*> SwiGluRounded(GgmlType type, float* g, const float* u,
                                               int64_t n_rows, int64_t cols, bool q8) const;
  // Project with x's rows rounded already (xq, SwiGluRounded's), or as
  // Project where xq is null.
  absl::Status ProjectRounded(const DeviceMatrix& w, const float* x, const uint8_t* xq,
                              float* y) const {
    if (xq == nullptr || short_rows_ != 0) return Project(w, x, y);
    return ProjectRows(w, x, y, {0, n_, tensor_cores_, q8_}, xq);
  }
  absl::Status ProjectPair(const DeviceMatrix& a, const DeviceMatrix& b,
                           const cuda::DeviceBuffer& table, const float* x, float* ya,
                           float* yb) const;
  // Layer il's view of the sequence tables (UploadSequences).
  cuda::SeqBatch Seqs(int il) const;
  absl::Status Attention(const DeviceAttention& a, int il) const;
  absl::Status DeltaNet(const DeviceDeltaNet& d, int il) const;
  // Latent attention (mla_ops.h): the query and latent projections, the
  // cache rows, the per-head products around the attention, the output.
  absl::Status Mla(const DeviceMla& m, int il) const;
  absl::Status MlaQuery(const DeviceMla& m) const;
  // One per-head grouped product of the heads' table (rows x cols each):
  // entry h * n + t reads x row x_row[...] (or its own index without
  // x_row) of stride x_stride, and writes y row h * n + t.
  absl::Status HeadProduct(GgmlType type, const cuda::DeviceBuffer& table, int64_t rows,
                           int64_t cols, const float* x, const int32_t* x_row,
                           int64_t x_stride, float* y, int64_t y_stride) const;
  absl::Status DenseFfn(const DeviceDenseFfn& d) const;
  absl::Status SharedExpert(const DeviceMoe& m) const;
  absl::Status Moe(int il, const DeviceMoe& m) const;
  absl::Status ForceIds(int il) const;
  // One token streaming with prefetch: the next block's router and routing
  // on this block's input (the decode program's prediction), its k ids to
  // host_routing + 2k before the routed event. False where there is no
  // next block with routed experts (nothing enqueued).
  absl::StatusOr<bool> PredictNext(int il) const;
  // n rows of block m's router logits to k ids and weights each (and their
  // paired gate/up rows, unless null): qwen's top-k or deepseek2's routing.
  void RouteRows(const DeviceMoe& m, const float* logits, int64_t n, int32_t* ids,
                 float* weights, int32_t* paired) const {
    const int k = static_cast<int>(c_.desc->moe.n_expert_used);
    const int n_expert = static_cast<int>(c_.desc->moe.n_expert);
    if (c_.plain_routing && m.selection_bias == nullptr) {
      cuda::TopK(logits, n, n_expert, k, ids, weights, c_.stream, paired);
    } else {
      cuda::Route(c_.route, logits, m.selection_bias, n, ids, weights, c_.stream, paired);
    }
  }
  // The routed experts' products; several rows: over `groups` of
  // GroupByExpert's non-empty groups (all of them, or a bound on their
  // number with the empty ones after), the largest max_entries rows. A
  // mixed pass (short_rows_) groups and multiplies each kind of rows apart.
  absl::Status Experts(const DeviceMoe& m, int max_entries, int groups) const;
  // GroupByExpert's outputs for some rows (entries local to them).
  struct Groups {
    int32_t *group_begin, *active_experts, *active_begin, *entry_token, *slot_entry;
  };
  // The pass's groups, or kind 0 / 1 of a mixed pass (its short / long rows).
  Groups AllGroups() const {
    return {w_.group_begin, w_.active_experts, w_.active_begin, w_.entry_token, w_.slot_entry};
  }
  Groups KindGroups(int kind) const;
  RowKind Kind(int kind) const {
    return kind == 0 ? RowKind{0, short_rows_, false, true}
                     : RowKind{short_rows_, n_ - short_rows_, true, false};
  }
  // A mixed pass: each kind's rows grouped apart and their bounds copied to
  // host_begin's second and third rows, read after the routed event.
  absl::Status GroupKinds() const;
  // Experts over several rows with groups g.
  absl::Status ExpertsOver(const DeviceMoe& m, const RowKind& rows, const Groups& g,
                           int max_entries, int groups) const;
  // One token's k routed experts (TokenExperts over every slot), combined
  // in slot order.
  absl::Status OneTokenExperts(const DeviceMoe& m) const;
  // The same, those in slots first, then, once their copies land, the
  // `pending` ones (OverlapMissesEnabled): the same products and combine,
  // bit for bit.
  absl::Status OneTokenOverlapped(const DeviceMoe& m, const std::vector<int32_t>& pending) const;
  // `count` of one token's routed experts, ids (device [count]) and paired
  // (their ids, then ids + n_expert: one launch of gate and up when they
  // share a type): gate and up into expert_g from row 2 x first, SwiGLU,
  // down into expert_y rows [first, first + count).
  absl::Status TokenExperts(const DeviceMoe& m, const int32_t* ids, const int32_t* paired,
                            int first, int count) const;

  const BatchContext& c_;
  Workspace& w_;
  const int64_t n_;
  const absl::Span<const PassSequence> seqs_;
  std::vector<int32_t>* const experts_per_layer_;
  int max_capacity_ = 0;  // the largest KV cache of the pass's sequences
  // A mixed pass whose short sequences (fewer than kTensorCoreMinEntries
  // rows) come first: their rows [0, short_rows_) multiplied apart in 8
  // bits (SplitKindsEnabled); 0 otherwise.
  int64_t short_rows_ = 0;
  bool one_row_each_ = false;  // every sequence brings one row (a decode step)
  bool tensor_cores_ = true;  // whether its products may take them
  bool q8_ = false;           // whether the others round activations to 8 bits
  mutable int64_t xn_rounded_rows_[2] = {0, 0};  // rows of xn in xn_q8[format]
};

cuda::Q8Format Pass::RoundedFormat(GgmlType type, int64_t cols, bool q8) {
  if (!q8 || !cuda::Q8ActivationsEnabled() || !cuda::Q8RoundOnceEnabled()) {
    return cuda::Q8Format::kNone;
  }
  return cuda::Q8ActivationFormat(type, cols);
}

absl::StatusOr<const uint8_t*> Pass::Rounded(GgmlType type, const float* x, int64_t n_rows,
                                             int64_t cols, bool q8) const {
  const cuda::Q8Format format = RoundedFormat(type, cols, q8);
  if (format == cuda::Q8Format::kNone) return nullptr;
  if (x != w_.xn) {
    RETURN_IF_ERROR(cuda::RoundActivationsQ8(type, x, n_rows, cols, cols, w_.act_q8, c_.stream));
    return w_.act_q8;
  }
  const int f = format == cuda::Q8Format::kQ8K ? 0 : 1;
  if (xn_rounded_rows_[f] < n_rows) {
    RETURN_IF_ERROR(cuda::RoundActivationsQ8(type, x, n_rows, cols, cols, w_.xn_q8[f], c_.stream));
    xn_rounded_rows_[f] = n_rows;
  }
  return w_.xn_q8[f];
}

absl::Status Pass::NormXn(const float* add, const float* w, GgmlType next) const {
  const int64_t e = c_.desc->info.n_embd;
  XnChanged();
  const cuda::Q8Format format = RoundedFormat(next, e, q8_ && short_rows_ == 0);
  if (format != cuda::Q8Format::kNone && cuda::FuseRoundingEnabled()) {
    const int f = format == cuda::Q8Format::kQ8K ? 0 : 1;  // as Rounded's
    RETURN_IF_ERROR(cuda::AddRmsNormRoundQ8(next, w_.x, add, n_, e, w, c_.desc->eps, w_.xn,
                                            w_.xn_q8[f], c_.stream));
    xn_rounded_rows_[f] = n_;
    return absl::OkStatus();
  }
  cuda::AddRmsNorm(w_.x, add, n_, e, w, c_.desc->eps, w_.xn, c_.stream);
  return absl::OkStatus();
}

absl::StatusOr<const uint8_t*> Pass::SwiGluRounded(GgmlType type, float* g, const float* u,
                                                   int64_t n_rows, int64_t cols,
                                                   bool q8) const {
  if (RoundedFormat(type, cols, q8) != cuda::Q8Format::kNone && cuda::FuseRoundingEnabled()) {
    RETURN_IF_ERROR(cuda::SwiGluRoundQ8(type, g, u, n_rows, cols, w_.act_q8, c_.stream));
    return w_.act_q8;  // where Rounded puts any input but xn
  }
  cuda::SwiGlu(g, u, n_rows * cols, c_.stream);
  return Rounded(type, g, n_rows, cols, q8);
}

absl::Status Pass::ProjectPair(const DeviceMatrix& a, const DeviceMatrix& b,
                               const cuda::DeviceBuffer& table, const float* x, float* ya,
                               float* yb) const {
  if (a.type != b.type || a.rows != b.rows || a.cols != b.cols ||
      (n_ != 1 && (tensor_cores_ || short_rows_ > 0))) {
    RETURN_IF_ERROR(Project(a, x, ya));
    return Project(b, x, yb);
  }
  cuda::GroupedMatMul g;
  g.type = a.type;
  g.rows = a.rows;
  g.cols = a.cols;
  g.d_weights = table.as<const void*>();
  g.d_x = x;
  g.x_stride = a.cols;
  g.d_y = ya;
  g.q8_activations = q8_;
  ASSIGN_OR_RETURN(g.d_x_q8, Rounded(a.type, x, n_, a.cols));
  if (n_ == 1) {
    // One token: one launch of both through {a, b} on the device.
    g.n_groups = 2;
    g.max_entries_per_group = 1;
    g.d_x_row = w_.zeros;  // both entries read activation row 0
    g.y_stride = yb - ya;
    return cuda::LaunchGroupedMatMul(g, c_.stream);
  }
  // Several rows of one kind: {a, b} as a pair over one group of them
  // (one launch where the streamed kernel takes it).
  g.n_groups = 1;
  g.max_entries_per_group = static_cast<int>(n_);
  g.one_group_entries = n_;
  g.tensor_cores = false;  // none in this pass (above)
  g.y_stride = a.rows;
  g.pair_offset = 1;
  g.d_y_up = yb;
  return cuda::LaunchGroupedMatMul(g, c_.stream);
}

// The projections over every row; the cache update and the attention on
// each row's own sequence (its cache, its positions).
absl::Status Pass::Attention(const DeviceAttention& a, int il) const {
  RETURN_IF_ERROR(Project(a.wq, w_.xn, w_.q));
  RETURN_IF_ERROR(ProjectPair(a.wk, a.wv, a.kv_table, w_.xn, w_.k, w_.v));
  Mark("attn.qkv_proj");
  cuda::AttentionShape shape = c_.attn;
  if (seqs_.size() == 1) {
    DeviceState& st = *seqs_[0].state;
    shape.kv_capacity = st.capacity();
    cuda::AttentionPrepare(shape, w_.q, w_.k, w_.v, a.q_norm, a.k_norm, w_.pos0, n_, st.k(il),
                           st.v(il), c_.stream);
    cuda::Attend(shape, w_.q, st.k(il), st.v(il), w_.pos0, n_, w_.attn_o, c_.stream);
  } else {
    shape.kv_capacity = max_capacity_;
    const cuda::SeqBatch b = Seqs(il);
    cuda::AttentionPrepareSeqs(shape, w_.q, w_.k, w_.v, a.q_norm, a.k_norm, b, n_, c_.stream);
    cuda::AttendSeqs(shape, w_.q, b, n_, w_.attn_o, c_.stream);
  }
  Mark("attn.core");
  RETURN_IF_ERROR(Project(a.wo, w_.attn_o, w_.y));
  Mark("attn.out_proj");
  return absl::OkStatus();
}

// The projections and the gates over every row; the conv and the
// recurrence on each row's own sequence state.
absl::Status Pass::DeltaNet(const DeviceDeltaNet& d, int il) const {
  RETURN_IF_ERROR(Project(d.qkv, w_.xn, w_.qkv));
  RETURN_IF_ERROR(Project(d.gate, w_.xn, w_.z));
  RETURN_IF_ERROR(ProjectPair(d.beta, d.alpha, d.beta_alpha_table, w_.xn, w_.beta, w_.g));
  Mark("delta.in_proj");
  // A decode step of several sequences: gates, conv and scan in one launch.
  const bool fused = seqs_.size() > 1 && one_row_each_ && delta_fused_batch.on() &&
                     cuda::DeltaNetDecodeFusedSupports(c_.ssm);
  if (!fused) cuda::DeltaNetGates(c_.ssm, w_.beta, w_.g, d.dt_bias, d.a, n_, c_.stream);
  if (fused) {
    cuda::DeltaNetDecodeFusedSeqs(c_.ssm, w_.qkv, w_.beta, w_.g, d.dt_bias, d.a, d.conv, w_.z,
                                  d.norm, Seqs(il), w_.ssm_o, c_.stream);
  } else if (seqs_.size() == 1) {
    DeviceState& st = *seqs_[0].state;
    cuda::DeltaNetConv(c_.ssm, d.conv, w_.qkv, n_, st.conv(il), c_.stream);
    Mark("delta.gates_conv");
    cuda::DeltaNetScan(c_.ssm, w_.qkv, w_.beta, w_.g, w_.z, d.norm, n_, st.ssm(il), w_.ssm_o,
                       c_.stream);
  } else {
    const cuda::SeqBatch b = Seqs(il);
    cuda::DeltaNetConvSeqs(c_.ssm, d.conv, w_.qkv, b, n_, c_.stream);
    Mark("delta.gates_conv");
    cuda::DeltaNetScanSeqs(c_.ssm, w_.qkv, w_.beta, w_.g, w_.z, d.norm, b, w_.ssm_o, c_.stream);
  }
  Mark("delta.scan");
  RETURN_IF_ERROR(Project(d.out, w_.ssm_o, w_.y));
  Mark("delta.out_proj");
  return absl::OkStatus();
}

absl::Status Pass::MlaQuery(const DeviceMla& m) const {
  if (m.wq_a.data == nullptr) return Project(m.wq, w_.xn, w_.mla_q);
  RETURN_IF_ERROR(Project(m.wq_a, w_.xn, w_.mla_qa));
  // In place, as the CPU norms the LoRA rows.
  cuda::AddRmsNorm(w_.mla_qa, nullptr, n_, m.wq_a.rows, m.q_a_norm, c_.mla.eps, w_.mla_qa,
                   c_.stream);
  Mark("mla.q_a");
  return Project(m.wq_b, w_.mla_qa, w_.mla_q);
}

absl::Status Pass::HeadProduct(GgmlType type, const cuda::DeviceBuffer& table, int64_t rows,
                               int64_t cols, const float* x, const int32_t* x_row,
                               int64_t x_stride, float* y, int64_t y_stride) const {
  cuda::GroupedMatMul g;
  g.type = type;
  g.rows = rows;
  g.cols = cols;
  g.n_groups = c_.mla.n_head;
  g.max_entries_per_group = static_cast<int>(n_);
  g.d_weights = table.as<const void*>();
  g.d_group_begin = w_.mla_head_begin;
  g.d_x_row = x_row;
  g.d_x = x;
  g.x_stride = x_stride;
  g.d_y = y;
  g.y_stride = y_stride;
  g.tensor_cores = tensor_cores_;
  // Each block rounds its own rows (the inputs are strided head slices).
  g.q8_activations = q8_;
  return cuda::LaunchGroupedMatMul(g, c_.stream);
}

// The projections over every row; the cache rows and the attention on each
// row's own sequence; heads grouped through the products (model/mla.cc).
absl::Status Pass::Mla(const DeviceMla& m, int il) const {
  cuda::MlaShape s = c_.mla;
  // The attention splits each row's keys by the capacity (mla_ops.h).
  s.kv_capacity = seqs_.size() == 1 ? seqs_[0].state->capacity() : max_capacity_;
  const int64_t width = s.width(), lat = s.kv_lora_rank;
  RETURN_IF_ERROR(MlaQuery(m));
  Mark("mla.q_b");
  RETURN_IF_ERROR(Project(m.wkv_a, w_.xn, w_.mla_ckv));
  Mark("mla.kv_a");
  cuda::MlaHeadEntries(s.n_head, n_, w_.mla_head_begin, w_.mla_x_row, c_.stream);
  if (seqs_.size() == 1) {
    float* cache = seqs_[0].state->k(il);
    cuda::MlaPrepare(s, w_.mla_ckv, w_.mla_q, m.kv_a_norm, w_.pos0, n_, cache, w_.mla_q_abs,
                     c_.stream);
  } else {
    cuda::MlaPrepareSeqs(s, w_.mla_ckv, w_.mla_q, m.kv_a_norm, Seqs(il), n_, w_.mla_q_abs,
                         c_.stream);
  }
  // Absorb K_b: head h of token t's nope query into its latent query.
  RETURN_IF_ERROR(HeadProduct(m.k_b_type, m.k_b_table, lat, s.nope(), w_.mla_q, w_.mla_x_row,
                              s.head_k, w_.mla_q_abs, width));
  Mark("mla.prepare");
  if (seqs_.size() == 1) {
    cuda::MlaAttend(s, w_.mla_q_abs, seqs_[0].state->k(il), w_.pos0, n_, w_.mla_o_lat,
                    w_.mla_part, c_.stream);
  } else {
    cuda::MlaAttendSeqs(s, w_.mla_q_abs, Seqs(il), n_, w_.mla_o_lat, w_.mla_part, c_.stream);
  }
  Mark("mla.core");
  RETURN_IF_ERROR(HeadProduct(m.v_b_type, m.v_b_table, s.head_v, lat, w_.mla_o_lat, nullptr, lat,
                              w_.mla_o_heads, s.head_v));
  cuda::HeadsToTokens(w_.mla_o_heads, s.n_head, n_, s.head_v, w_.mla_o, c_.stream);
  Mark("mla.v_b");
  RETURN_IF_ERROR(Project(m.wo, w_.mla_o, w_.y));
  Mark("mla.out_proj");
  return absl::OkStatus();
}

absl::Status Pass::DenseFfn(const DeviceDenseFfn& d) const {
  RETURN_IF_ERROR(ProjectPair(d.gate, d.up, d.gate_up_table, w_.xn, w_.dense_g, w_.dense_u));
  ASSIGN_OR_RETURN(const uint8_t* xq, SwiGluRounded(d.down.type, w_.dense_g, w_.dense_u, n_,
                                                   d.gate.rows, q8_ && short_rows_ == 0));
  RETURN_IF_ERROR(ProjectRounded(d.down, w_.dense_g, xq, w_.y));
  Mark("dense_ffn");
  return absl::OkStatus();
}

cuda::SeqBatch Pass::Seqs(int il) const {
  const int n_seqs = static_cast<int>(seqs_.size());
  return {n_seqs, w_.seq_rows, w_.row_seq, w_.seq_states + static_cast<size_t>(il) * n_seqs};
}

absl::Status Pass::SharedExpert(const DeviceMoe& m) const {
  RETURN_IF_ERROR(ProjectPair(m.shared_gate, m.shared_up, m.shared_gate_up_table, w_.xn,
                              w_.shared_g, w_.shared_u));
  ASSIGN_OR_RETURN(const uint8_t* xq,
                   SwiGluRounded(m.shared_down.type, w_.shared_g, w_.shared_u, n_,
                                 c_.desc->moe.shared_ff, q8_ && short_rows_ == 0));
  return ProjectRounded(m.shared_down, w_.shared_g, xq, w_.shared_y);
}

// The source's ids over TopK's, each sequence's rows from its own stream.
// From pageable memory: the copy has read the ids when it returns.
absl::Status Pass::ForceIds(int il) const {
  const int64_t k = c_.desc->moe.n_expert_used;
  std::vector<int32_t> ids(n_ * k);
  for (const PassSequence& s : seqs_) {
    c_.source->Next(il, s.state, s.n, ids.data() + s.row * k);
  }
  RETURN_IF_ERROR(cuda::CopyToDevice(w_.ids, ids.data(), ids.size() * sizeof(int32_t), c_.stream));
  if (n_ != 1) return absl::OkStatus();
  // One token: the rows of ExpertsOver's fused gate/up launch (the gate
  // experts, then the up ones in the table's second half), which TopK
  // leaves alone under forced routing.
  const int64_t n_expert = c_.desc->moe.n_expert;
  std::vector<int32_t> paired(2 * k);
  for (int64_t j = 0; j < k; ++j) {
    paired[j] = ids[j];
    paired[k + j] = static_cast<int32_t>(ids[j] + n_expert);
  }
  return cuda::CopyToDevice(w_.paired_ids, paired.data(), paired.size() * sizeof(int32_t),
                            c_.stream);
}

absl::StatusOr<bool> Pass::PredictNext(int il) const {
  const std::vector<DeviceLayer>& layers = *c_.layers;
  if (il + 1 >= static_cast<int>(layers.size()) || layers[il + 1].moe.stream_layer < 0) {
    return false;
  }
  const DeviceMoe& next = layers[il + 1].moe;
  const int k = static_cast<int>(c_.desc->moe.n_expert_used);
  const int n_expert = static_cast<int>(c_.desc->moe.n_expert);
  // One token's rows leave the workspace's second rows free: the logits'
  // row 1, and paired_ids past its first 2k (ids, then weights).
  float* logits = w_.router_logits + n_expert;
  int32_t* ids = w_.paired_ids + 2 * k;
  float* weights = reinterpret_cast<float*>(w_.paired_ids + 3 * k);
  RETURN_IF_ERROR(Project(next.router, w_.xn, logits));
  RouteRows(next, logits, 1, ids, weights, nullptr);
  RETURN_IF_ERROR(cuda::LastLaunchError("predict"));
  RETURN_IF_ERROR(cuda::CopyToHost(c_.host_routing + 2 * k, ids, k * sizeof(int32_t), c_.stream));
  return true;
}

absl::Status Pass::Moe(int il, const DeviceMoe& m) const {
  const MoeConfig& mc = c_.desc->moe;
  const int k = static_cast<int>(mc.n_expert_used);
  const int n_expert = static_cast<int>(mc.n_expert);
  RETURN_IF_ERROR(Project(m.router, w_.xn, w_.router_logits));
  Mark("moe.router_proj");
  const bool one = n_ == 1;
  // Forced routing replaces the ids after TopK, so nothing may be derived
  // from them there (ForceIds writes the paired gate/up rows itself).
  const bool fuse_gate_up = one && m.gate_type == m.up_type && c_.source == nullptr;
  RouteRows(m, w_.router_logits, n_, w_.ids, w_.weights, fuse_gate_up ? w_.paired_ids : nullptr);
  Mark("moe.topk");
  if (c_.source != nullptr) RETURN_IF_ERROR(ForceIds(il));
  const bool captured = c_.graph_bounds != nullptr;
  if (!one) {
    cuda::GroupByExpert(w_.ids, n_, k, n_expert, w_.group_begin, w_.active_experts,
                        w_.active_begin, w_.entry_token, w_.slot_entry, c_.stream);
    Mark("moe.group");
    // A batch's launch is sized by its largest group: a 512-token batch
    // spread over 256 experts then launches ~16x fewer blocks. Captured,
    // the bounds go to the caller after the pass instead.
    int32_t* host = captured ? c_.graph_bounds + il * (n_expert + 1) : c_.host_begin;
    RETURN_IF_ERROR(
        cuda::CopyToHost(host, w_.group_begin, (n_expert + 1) * sizeof(int32_t), c_.stream));
    if (short_rows_ > 0) RETURN_IF_ERROR(GroupKinds());
  }
  const bool need_ids = c_.experts != nullptr || c_.observer != nullptr;
  if (captured && (need_ids || c_.source != nullptr)) {
    return absl::FailedPreconditionError(
        "cuda batch pass: a captured pass cannot stream experts or observe or force routing");
  }
  if (need_ids) {
    RETURN_IF_ERROR(cuda::CopyToHost(c_.host_routing, w_.ids, n_ * k * sizeof(int32_t), c_.stream));
    if (c_.observer != nullptr || c_.skip_threshold > 0) {
      RETURN_IF_ERROR(cuda::CopyToHost(c_.host_routing + n_ * k, w_.weights,
                                       n_ * k * sizeof(float), c_.stream));
    }
  }
  bool prefetch = false;
  if (one && c_.experts != nullptr && c_.prefetch) {
    ASSIGN_OR_RETURN(prefetch, PredictNext(il));
  }
  const bool wait = (!one && !captured) || need_ids;
  if (wait) RETURN_IF_ERROR(cuda::RecordEvent(c_.routed, c_.stream));
  // The shared expert does not depend on the routing: it runs while the
  // host reads the routing back and misses are copied.
  if (mc.shared_ff > 0) {
    RETURN_IF_ERROR(SharedExpert(m));
    Mark("moe.shared");
  }
  if (wait) RETURN_IF_ERROR(cuda::WaitEvent(c_.routed));
  int max_entries = 1;
  int used = k;  // one token: k distinct experts
  std::vector<int32_t> begin;
  if (captured && !one) {
    max_entries = static_cast<int>(n_);  // a group holds each row once at most
    used = static_cast<int>(std::min<int64_t>(n_expert, n_ * k));  // at most
  } else if (!one) {
    begin.assign(c_.host_begin, c_.host_begin + n_expert + 1);
    const GroupSizes sizes = SizesOf(begin.data(), n_expert);
    max_entries = sizes.largest;
    used = sizes.used;
  }
  if (experts_per_layer_ != nullptr && !(captured && !one)) (*experts_per_layer_)[il] = used;
  // One token streaming: with the overlap, the experts in slots are
  // multiplied while the missed ones are copied (OverlapMissesEnabled).
  std::vector<int32_t> pending;
  const bool overlap = one && c_.experts != nullptr && OverlapMissesEnabled();
  if (need_ids) {
    RETURN_IF_ERROR(AcquireRouted(c_, il, n_, begin, prefetch, nullptr,
                                  overlap ? &pending : nullptr));
    Mark("moe.acquire");
  }
  if (!pending.empty()) {
    RETURN_IF_ERROR(OneTokenOverlapped(m, pending));
  } else {
    RETURN_IF_ERROR(Experts(m, max_entries, used));
  }
  if (mc.shared_ff == 0) return absl::OkStatus();
  if (m.shared_gate_inp != nullptr) {
    cuda::AddGatedShared(m.shared_gate_inp, w_.xn, w_.shared_y, n_, mc.n_embd, w_.y, c_.stream);
  } else {
    cuda::Add(w_.y, w_.shared_y, n_ * mc.n_embd, c_.stream);
  }
  Mark("moe.shared_add");
  return absl::OkStatus();
}

Pass::Groups Pass::KindGroups(int kind) const {
  if (kind == 0) return AllGroups();
  const int64_t at = short_rows_ * c_.desc->moe.n_expert_used;
  return {w_.long_group_begin, w_.long_active_experts, w_.long_active_begin,
          w_.entry_token + at, w_.slot_entry + at};
}

absl::Status Pass::GroupKinds() const {
  const int k = static_cast<int>(c_.desc->moe.n_expert_used);
  const int n_expert = static_cast<int>(c_.desc->moe.n_expert);
  for (int kind = 0; kind < 2; ++kind) {
    const RowKind rows = Kind(kind);
    const Groups g = KindGroups(kind);
    cuda::GroupByExpert(w_.ids + rows.r0 * k, rows.n, k, n_expert, g.group_begin,
                        g.active_experts, g.active_begin, g.entry_token, g.slot_entry,
                        c_.stream);
    RETURN_IF_ERROR(cuda::CopyToHost(c_.host_begin + (kind + 1) * (n_expert + 1), g.group_begin,
                                     (n_expert + 1) * sizeof(int32_t), c_.stream));
  }
  return absl::OkStatus();
}

absl::Status Pass::Experts(const DeviceMoe& m, int max_entries, int groups) const {
  if (n_ == 1) return OneTokenExperts(m);
  if (short_rows_ == 0) {
    return ExpertsOver(m, {0, n_, tensor_cores_, q8_}, AllGroups(), max_entries, groups);
  }
  // Mixed: each kind of rows multiplied on its own (grouped by GroupKinds,
  // its bounds on the host since the routed event), the short sequences'
  // rows as in a pass of short rows (SplitKindsEnabled).
  const int n_expert = static_cast<int>(c_.desc->moe.n_expert);
  for (int kind = 0; kind < 2; ++kind) {
    const GroupSizes sizes = SizesOf(c_.host_begin + (kind + 1) * (n_expert + 1), n_expert);
    RETURN_IF_ERROR(ExpertsOver(m, Kind(kind), KindGroups(kind), sizes.largest, sizes.used));
  }
  return absl::OkStatus();
}

// Gate and up, SwiGLU, down over the groups' rows, the weighted combine
// into y.
absl::Status Pass::ExpertsOver(const DeviceMoe& m, const RowKind& rows, const Groups& gr,
                               int max_entries, int groups) const {
  const MoeConfig& mc = c_.desc->moe;
  const int k = static_cast<int>(mc.n_expert_used);
  const int64_t n = rows.n;
  const float* xn = w_.xn + rows.r0 * mc.n_embd;
  cuda::GroupedMatMul g;
  g.tensor_cores = rows.tensor_cores;
  g.q8_activations = rows.q8;
  g.rows = mc.expert_ff;
  g.cols = mc.n_embd;
  // Blocks only for the experts with rows (a decode batch of 8 on 256
  // experts launched ~6x more, idle).
  g.n_groups = groups;
  g.max_entries_per_group = max_entries;
  g.d_group_weight = gr.active_experts;
  g.d_group_begin = gr.active_begin;
  g.d_x_row = gr.entry_token;
  g.d_x = xn;
  g.x_stride = mc.n_embd;
  g.y_stride = mc.expert_ff;
  g.type = m.gate_type;
  g.d_weights = m.gate_table();
  g.d_y = w_.expert_g;
  ASSIGN_OR_RETURN(g.d_x_q8, Rounded(g.type, xn, n, mc.n_embd, rows.q8));
  if (m.gate_type == m.up_type) {
    // Gate and up as a pair: the up experts are the table's second half.
    cuda::GroupedMatMul pair = g;
    pair.pair_offset = static_cast<int>(mc.n_expert);
    pair.d_y_up = w_.expert_u;
    RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(pair, c_.stream));
  } else {
    RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(g, c_.stream));
    g.type = m.up_type;
    g.d_weights = m.up_table();
    g.d_y = w_.expert_u;
    ASSIGN_OR_RETURN(g.d_x_q8, Rounded(g.type, xn, n, mc.n_embd, rows.q8));
    RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(g, c_.stream));
  }
  Mark("moe.gate_up");
  ASSIGN_OR_RETURN(const uint8_t* xq, SwiGluRounded(m.down_type, w_.expert_g, w_.expert_u,
                                                   n * k, mc.expert_ff, rows.q8));
  Mark("moe.swiglu");
  cuda::GroupedMatMul down = g;
  down.type = m.down_type;
  down.rows = mc.n_embd;
  down.cols = mc.expert_ff;
  down.d_weights = m.down_table.as<const void*>();
  down.d_x_row = nullptr;
  down.d_x = w_.expert_g;
  down.x_stride = mc.expert_ff;
  down.d_y = w_.expert_y;
  down.y_stride = mc.n_embd;
  down.d_x_q8 = xq;
  RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(down, c_.stream));
  Mark("moe.down");
  cuda::CombineExperts(w_.expert_y, gr.slot_entry, w_.weights + rows.r0 * k, n, k, mc.n_embd,
                       w_.y + rows.r0 * mc.n_embd, c_.stream);
  Mark("moe.combine");
  return absl::OkStatus();
}

absl::Status Pass::OneTokenExperts(const DeviceMoe& m) const {
  const MoeConfig& mc = c_.desc->moe;
  const int k = static_cast<int>(mc.n_expert_used);
  // Slot s is expert_y row s (iota).
  RETURN_IF_ERROR(TokenExperts(m, w_.ids, w_.paired_ids, 0, k));
  cuda::CombineExperts(w_.expert_y, w_.iota, w_.weights, 1, k, mc.n_embd, w_.y, c_.stream);
  Mark("moe.combine");
  return absl::OkStatus();
}

absl::Status Pass::OneTokenOverlapped(const DeviceMoe& m,
                                      const std::vector<int32_t>& pending) const {
  const MoeConfig& mc = c_.desc->moe;
  const int k = static_cast<int>(mc.n_expert_used);
  const int n_expert = static_cast<int>(mc.n_expert);
  // The launch order and the tables of OverlapSlots, from the token's k
  // ids read back.
  const int in_place = OverlapSlots(absl::MakeConstSpan(c_.host_routing, k), pending, n_expert,
                                    c_.host_slots);
  RETURN_IF_ERROR(cuda::CopyToDevice(w_.overlap_slots, c_.host_slots, 4 * k * sizeof(int32_t),
                                     c_.stream));
  const int32_t* ids = w_.overlap_slots;
  const int32_t* paired = w_.overlap_slots + k;
  RETURN_IF_ERROR(TokenExperts(m, ids, paired, 0, in_place));
  RETURN_IF_ERROR(c_.experts->WaitForCopies(c_.stream));
  Mark("moe.wait_copies");
  RETURN_IF_ERROR(
      TokenExperts(m, ids + in_place, paired + 2 * in_place, in_place, k - in_place));
  cuda::CombineExperts(w_.expert_y, w_.overlap_slots + 3 * k, w_.weights, 1, k, mc.n_embd, w_.y,
                       c_.stream);
  Mark("moe.combine");
  return absl::OkStatus();
}

absl::Status Pass::TokenExperts(const DeviceMoe& m, const int32_t* ids, const int32_t* paired,
                                int first, int count) const {
  if (count == 0) return absl::OkStatus();
  const MoeConfig& mc = c_.desc->moe;
  const int64_t ff = mc.expert_ff, e = mc.n_embd;
  float* gate_out = w_.expert_g + 2 * first * ff;
  float* up_out = gate_out + count * ff;
  cuda::GroupedMatMul g;
  g.tensor_cores = false;  // one row
  g.q8_activations = q8_;
  g.rows = ff;
  g.cols = e;
  g.max_entries_per_group = 1;
  g.d_group_begin = nullptr;
  g.d_x_row = w_.zeros;  // every slot reads row 0
  g.d_x = w_.xn;
  g.x_stride = e;
  g.y_stride = ff;
  g.type = m.gate_type;
  g.d_weights = m.gate_table();
  g.d_y = gate_out;
  ASSIGN_OR_RETURN(g.d_x_q8, Rounded(g.type, w_.xn, 1, e));
  if (m.gate_type == m.up_type) {
    // Rows [0, count) the gate products, [count, 2 count) the up ones.
    g.n_groups = 2 * count;
    g.d_group_weight = paired;
    RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(g, c_.stream));
  } else {
    g.n_groups = count;
    g.d_group_weight = ids;
    RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(g, c_.stream));
    g.type = m.up_type;
    g.d_weights = m.up_table();
    g.d_y = up_out;
    ASSIGN_OR_RETURN(g.d_x_q8, Rounded(g.type, w_.xn, 1, e));
    RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(g, c_.stream));
  }
  Mark("moe.gate_up");
  ASSIGN_OR_RETURN(const uint8_t* xq,
                   SwiGluRounded(m.down_type, gate_out, up_out, count, ff, q8_));
  Mark("moe.swiglu");
  cuda::GroupedMatMul down = g;
  down.type = m.down_type;
  down.rows = e;
  down.cols = ff;
  down.n_groups = count;
  down.d_group_weight = ids;
  down.d_weights = m.down_table.as<const void*>();
  down.d_x_row = nullptr;
  down.d_x = gate_out;
  down.x_stride = ff;
  down.d_y = w_.expert_y + first * e;
  down.y_stride = e;
  down.d_x_q8 = xq;
  RETURN_IF_ERROR(cuda::LaunchGroupedMatMul(down, c_.stream));
  Mark("moe.down");
  return absl::OkStatus();
}

absl::Status Pass::Run(absl::Span<const RowRun> logit_rows) {
  const int64_t e = c_.desc->info.n_embd;
  const float eps = c_.desc->eps;
  if (experts_per_layer_ != nullptr) experts_per_layer_->assign(c_.layers->size(), 0);
  // Captured: the caller fills the tables before each replay.
  if (seqs_.size() > 1 && c_.graph_bounds == nullptr) {
    RETURN_IF_ERROR(UploadSequences(c_, n_, seqs_));
  }
  RETURN_IF_ERROR(cuda::DequantRows(c_.token_embd.type, c_.token_embd.data, e, w_.ids_in, n_,
                                    w_.x, c_.stream));
  Mark("embed");
  for (int il = 0; il < static_cast<int>(c_.layers->size()); ++il) {
    const DeviceLayer& l = (*c_.layers)[il];
    // The previous block's MoE output joins the residual stream here.
    RETURN_IF_ERROR(NormXn(il == 0 ? nullptr : w_.y, l.mixer_norm, MixerInputType(l)));
    Mark("norms");
    if (l.mixer == MixerKind::kAttention) {
      RETURN_IF_ERROR(Attention(l.attn, il));
    } else if (l.mixer == MixerKind::kDeltaNet) {
      RETURN_IF_ERROR(DeltaNet(l.delta, il));
    } else {
      RETURN_IF_ERROR(Mla(l.mla, il));
    }
    RETURN_IF_ERROR(NormXn(w_.y, l.ffn_norm,
                           l.ffn == FfnKind::kDense ? l.dense.gate.type : l.moe.gate_type));
    Mark("norms");
    if (l.ffn == FfnKind::kDense) {
      RETURN_IF_ERROR(DenseFfn(l.dense));
    } else {
      RETURN_IF_ERROR(Moe(il, l.moe));
    }
  }
  if (logit_rows.empty()) return cuda::LastLaunchError("cuda forward");
  // The asked-for rows, packed into xn in order, then one head product.
  int64_t packed = 0;
  for (const RowRun& r : logit_rows) {
    cuda::AddRmsNorm(w_.x + r.row * e, w_.y + r.row * e, r.n, e, c_.output_norm, eps,
                     w_.xn + packed * e, c_.stream);
    packed += r.n;
  }
  XnChanged();
  // Mixed: the packed rows of short sequences come first.
  int64_t packed_short = 0;
  for (const RowRun& r : logit_rows) {
    packed_short += std::max<int64_t>(0, std::min(r.row + r.n, short_rows_) - r.row);
  }
  RETURN_IF_ERROR(ProjectKinds(c_.output, w_.xn, w_.logits, packed, packed_short));
  Mark("head");
  return cuda::LastLaunchError("cuda forward");
}

}  // namespace

absl::Status EnqueueBatch(const BatchContext& c, int64_t n_tok,
                          absl::Span<const PassSequence> seqs,
                          absl::Span<const RowRun> logit_rows,
                          std::vector<int32_t>* experts_per_layer) {
  return Pass(c, n_tok, seqs, experts_per_layer).Run(logit_rows);
}

}  // namespace sluice
