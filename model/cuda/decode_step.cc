#include "model/cuda/decode_step.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/env_switch.h"
#include "base/status_macros.h"
#include "kernels/cuda/decode_ops.h"
#include "kernels/cuda/host_rows.h"
#include "kernels/cuda/quant_matmul.h"
#include "model/cuda/host_misses.h"

namespace sluice {
namespace {

int TypeId(GgmlType t) { return static_cast<int>(t); }

// The host path's rows added after the down launch, which then does not
// wait for the host's share (the host computes while the device's own
// products run); off: the down launch adds them. Read when a program is
// built.
EnvSwitch host_rows_late("SLUICE_CUDA_HOST_ROWS_LATE", false);

// Which decode inputs are quantized once, by an op of their own
// (DecodePrepare), rather than by every block of the launches that read
// them: bits of PrepareSite. SLUICE_CUDA_PREPARE (read when a program is
// built) overrides the default for A/B runs. Same bits either way.
enum PrepareSite : int {
  kPrepareBlockIn = 1,   // delta.in, attn.in
  kPrepareMixerOut = 2,  // delta.out, attn.out
  kPrepareRoute = 4,     // moe.route and moe.gate_up
  kPrepareDown = 8,      // moe.down
  kPrepareHead = 16,     // head
};
int PrepareSites() {
  const char* v = std::getenv("SLUICE_CUDA_PREPARE");
  return v != nullptr ? std::atoi(v) : 0;
}
uint64_t Bytes(const DeviceMatrix& m) { return cuda::RowBytes(m.type, m.cols) * m.rows; }

cuda::DecodeMatrix Mat(const DeviceMatrix& m, float* y) {
  return {TypeId(m.type), m.data, nullptr, m.rows, y};
}

// Builds one program; the residual stream alternates between two rows of
// the workspace (a launch that adds into it reads one and writes the other,
// so none of its blocks reads a row another block writes).
class Builder {
 public:
  Builder(const DecodeContext& c, DeviceState& st, HostMisses* host)
      : c_(c), w_(*c.ws), st_(st), host_(host), e_(c.desc->info.n_embd), prepare_(PrepareSites()) {
    x_[0] = w_.x;
    x_[1] = w_.x + e_;
  }

  DecodeProgram Build() {
    const DeviceMatrix emb = c_.token_embd;
    float* x0 = x_[0];
    const Workspace* w = &w_;
    Op("embed", cuda::RowBytes(emb.type, emb.cols), [emb, x0, w, e = e_](cuda::Stream s) {
      return cuda::DequantRows(emb.type, emb.data, e, w->ids_in, 1, x0, s);
    });
    for (int il = 0; il < static_cast<int>(c_.layers->size()); ++il) {
      if ((*c_.layers)[il].mixer == MixerKind::kAttention) {
        Attention(il);
      } else {
        DeltaNet(il);
      }
      Moe(il);
    }
    cuda::DecodeProjection h;
    h.in = Normed(c_.output_norm, nullptr);
    h.m[0] = Mat(c_.output, w_.logits);
    h.n_matrices = 1;
    Project("head", h, kPrepareHead);
    return std::move(p_);
  }

 private:
  void Op(std::string label, uint64_t bytes, std::function<absl::Status(cuda::Stream)> fn) {
    p_.Add({std::move(label), bytes, std::move(fn)});
  }
  // An op of kernels that report errors through LastLaunchError.
  void Kernels(std::string label, uint64_t bytes, std::function<void(cuda::Stream)> fn) {
    std::string what = label;
    Op(std::move(label), bytes, [fn = std::move(fn), what](cuda::Stream s) {
      fn(s);
      return cuda::LastLaunchError(what.c_str());
    });
  }
  static int FormatsOf(const cuda::DecodeProjection& p) {
    int types[cuda::kMaxDecodeMatrices];
    for (int i = 0; i < p.n_matrices; ++i) types[i] = p.m[i].type;
    return cuda::DecodeQ8Formats(types, p.n_matrices, p.in.n);
  }
  // Quantizes p's input once, in an op of its own before p's launch, for
  // p's products and for others reading the `extra` formats of it (p then
  // reads the prepared vector); returns it (none when `site` is not prepared or
  // nothing reads 8 bits).
  cuda::DecodeQ8 Prepare(const std::string& label, cuda::DecodeProjection& p, int extra,
                         int site) {
    const int f = (prepare_ & site) != 0 ? (FormatsOf(p) | extra) : 0;
    if (f == 0) return {};
    cuda::DecodeInput src = p.in;
    if (src.norm_w != nullptr && src.xn_out == nullptr) src.xn_out = w_.xn;
    uint8_t* q8 = w_.decode_q8;
    Kernels(label + ".q8", 0, [src, q8, f](cuda::Stream s) { cuda::DecodePrepare(src, q8, f, s); });
    cuda::DecodeInput in;
    in.x = src.norm_w != nullptr ? src.xn_out : src.x;
    in.n = src.n;
    in.prepared = {q8, f};
    p.in = in;
    return in.prepared;
  }
  void Project(std::string label, cuda::DecodeProjection p, int site, int extra = 0,
               cuda::DecodeQ8* prepared = nullptr) {
    const cuda::DecodeQ8 q = Prepare(label, p, extra, site);
    if (prepared != nullptr) *prepared = q;
    uint64_t bytes = 0;
    for (int i = 0; i < p.n_matrices; ++i) {
      const cuda::DecodeMatrix& m = p.m[i];
      bytes += cuda::RowBytes(static_cast<GgmlType>(m.type), p.in.n) * m.rows *
               (m.up != nullptr ? 2 : 1);
    }
    Kernels(std::move(label), bytes, [p](cuda::Stream s) { cuda::DecodeProject(p, s); });
  }
  static std::string L(int il, const char* part) { return absl::StrCat(il, ".", part); }

  // The normed input of a block's launch; consumes the pending residual add.
  cuda::DecodeInput Normed(const float* norm, float* xn_out) {
    cuda::DecodeInput in;
    in.x = x_[cur_];
    in.add = add_;
    in.norm_w = norm;
    in.eps = c_.desc->eps;
    in.xn_out = xn_out;
    in.n = e_;
    if (add_ != nullptr) {
      in.x_out = x_[1 - cur_];
      cur_ = 1 - cur_;
    }
    add_ = nullptr;
    return in;
  }
  static cuda::DecodeInput Raw(const float* x, int64_t n) {
    cuda::DecodeInput in;
    in.x = x;
    in.n = n;
    return in;
  }

  void DeltaNet(int il) {
    const DeviceLayer& l = (*c_.layers)[il];
    const DeviceDeltaNet& d = l.delta;
    Workspace& w = w_;
    cuda::DecodeProjection in;
    in.in = Normed(l.mixer_norm, nullptr);
    in.m[0] = Mat(d.qkv, w.qkv);
    in.m[1] = Mat(d.gate, w.z);
    in.m[2] = Mat(d.beta, w.beta);
    in.m[3] = Mat(d.alpha, w.g);
    in.n_matrices = 4;
    Project(L(il, "delta.in"), in, kPrepareBlockIn);
    const cuda::DeltaNetShape s = c_.ssm;
    float* conv = st_.conv(il);
    float* ssm = st_.ssm(il);
    const uint64_t conv_bytes = static_cast<uint64_t>(s.channels()) * s.conv_kernel * 8;
    const float *dt_bias = d.dt_bias, *a = d.a, *conv_w = d.conv, *norm = d.norm;
    Workspace* wp = &w_;
    const uint64_t state_bytes =
        static_cast<uint64_t>(s.n_v_heads) * s.state_size * s.state_size * 8;
    if (cuda::DeltaNetDecodeFusedSupports(s)) {
      Kernels(L(il, "delta.fused"), conv_bytes + state_bytes,
              [s, dt_bias, a, conv_w, conv, norm, ssm, wp](cuda::Stream st) {
                cuda::DeltaNetDecodeFused(s, wp->qkv, wp->beta, wp->g, dt_bias, a, conv_w, wp->z,
                                          norm, conv, ssm, wp->ssm_o, st);
              });
    } else {
      Kernels(L(il, "delta.prep"), conv_bytes, [s, dt_bias, a, conv_w, conv, wp](cuda::Stream st) {
        cuda::DeltaNetDecodePrep(s, wp->beta, wp->g, dt_bias, a, conv_w, wp->qkv, conv, st);
      });
      Kernels(L(il, "delta.scan"), state_bytes, [s, norm, ssm, wp](cuda::Stream st) {
        cuda::DeltaNetScan(s, wp->qkv, wp->beta, wp->g, wp->z, norm, 1, ssm, wp->ssm_o, st);
      });
    }
    cuda::DecodeProjection out;
    out.in = Raw(w.ssm_o, s.value_dim());
    out.m[0] = Mat(d.out, w.y);
    out.n_matrices = 1;
    Project(L(il, "delta.out"), out, kPrepareMixerOut);
    add_ = w.y;
  }

  void Attention(int il) {
    const DeviceLayer& l = (*c_.layers)[il];
    const DeviceAttention& a = l.attn;
    Workspace& w = w_;
    cuda::DecodeProjection in;
    in.in = Normed(l.mixer_norm, nullptr);
    in.m[0] = Mat(a.wq, w.q);
    in.m[1] = Mat(a.wk, w.k);
    in.m[2] = Mat(a.wv, w.v);
    in.n_matrices = 3;
    Project(L(il, "attn.in"), in, kPrepareBlockIn);
    cuda::AttentionShape s = c_.attn;
    s.kv_capacity = st_.capacity();
    float* kc = st_.k(il);
    float* vc = st_.v(il);
    const float *q_norm = a.q_norm, *k_norm = a.k_norm;
    Workspace* wp = &w_;
    Kernels(L(il, "attn.prepare"), 0, [s, q_norm, k_norm, kc, vc, wp](cuda::Stream st) {
      cuda::AttentionPrepare(s, wp->q, wp->k, wp->v, q_norm, k_norm, wp->pos0, 1, kc, vc, st);
    });
    if (cuda::AttendDecodeSupports(s)) {
      Kernels(L(il, "attn.core"), 0, [s, kc, vc, wp](cuda::Stream st) {
        cuda::AttendDecode(s, wp->q, kc, vc, wp->pos0, wp->attn_scratch,
                           wp->decode_counters + 1, wp->attn_o, st);
      });
    } else {
      Kernels(L(il, "attn.core"), 0, [s, kc, vc, wp](cuda::Stream st) {
        cuda::Attend(s, wp->q, kc, vc, wp->pos0, 1, wp->attn_o, st);
      });
    }
    cuda::DecodeProjection out;
    out.in = Raw(w.attn_o, static_cast<int64_t>(s.n_head) * s.head_dim);
    out.m[0] = Mat(a.wo, w.y);
    out.n_matrices = 1;
    Project(L(il, "attn.out"), out, kPrepareMixerOut);
    add_ = w.y;
  }

  void Moe(int il);
  void RoutingOut(int il);

  const DecodeContext& c_;
  Workspace& w_;
  DeviceState& st_;
  HostMisses* host_;
  const int64_t e_;
  const int prepare_;  // PrepareSite bits
  DecodeProgram p_;
  float* x_[2];
  int cur_ = 0;
  const float* add_ = nullptr;
};

void Builder::Moe(int il) {
  const DeviceLayer& l = (*c_.layers)[il];
  const DeviceMoe& m = l.moe;
  const MoeConfig& mc = c_.desc->moe;
  Workspace& w = w_;
  const int k = static_cast<int>(mc.n_expert_used);
  const int64_t sff = mc.shared_ff;
  cuda::DecodeProjection r;
  r.in = Normed(l.ffn_norm, w.xn);
  r.m[0] = Mat(m.router, w.router_logits);
  r.topk = {k, w.ids, w.weights, nullptr, w.decode_counters};
  r.n_matrices = 1;
  const bool pair = sff > 0 && m.shared_gate.type == m.shared_up.type;
  if (sff > 0) {
    if (pair) {
      r.m[r.n_matrices++] = {TypeId(m.shared_gate.type), m.shared_gate.data, m.shared_up.data,
                             sff, w.shared_g};
    } else {
      r.m[r.n_matrices++] = Mat(m.shared_gate, w.shared_g);
      r.m[r.n_matrices++] = Mat(m.shared_up, w.shared_u);
    }
    r.m[r.n_matrices++] = {TypeId(GgmlType::kF32), m.shared_gate_inp, nullptr, 1,
                           w.shared_logit};
  }
  const int gate_up_types[2] = {TypeId(m.gate_type), TypeId(m.up_type)};
  cuda::DecodeQ8 xn_q8;
  Project(L(il, "moe.route"), r, kPrepareRoute, cuda::DecodeQ8Formats(gate_up_types, 2, e_), &xn_q8);
  if (c_.forced != nullptr) {
    // A copy node from pinned memory: the step reads the ids the host
    // wrote before launching it.
    const int32_t* src = c_.forced + static_cast<size_t>(il) * k;
    int32_t* ids = w.ids;
    Op(L(il, "moe.force"), 0, [src, ids, k](cuda::Stream s) {
      return cuda::CopyToDevice(ids, src, k * sizeof(int32_t), s);
    });
  }
  if (sff > 0 && !pair) {
    float *g = w.shared_g, *u = w.shared_u;
    Kernels(L(il, "moe.shared_swiglu"), 0,
            [sff, g, u](cuda::Stream s) { cuda::SwiGlu(g, u, sff, s); });
  }
  if (c_.cut_routing) RoutingOut(il);

  cuda::DecodeExperts x;
  x.k = k;
  x.ids = w.ids;
  x.weights = w.weights;
  x.gate = m.gate_table();
  x.up = m.up_table();
  x.down = m.down_table.as<const void*>();
  x.gate_type = TypeId(m.gate_type);
  x.up_type = TypeId(m.up_type);
  x.down_type = TypeId(m.down_type);
  x.n_embd = e_;
  x.ff = mc.expert_ff;
  x.xn = w.xn;
  x.xn_q8 = xn_q8;
  x.h = w.expert_g;
  if (sff > 0) {
    x.shared_ff = sff;
    x.shared_h = w.shared_g;
    x.shared_down = m.shared_down.data;
    x.shared_down_type = TypeId(m.shared_down.type);
    x.shared_logit = w.shared_logit;
  }
  // The host's rows: added by the down launch (which then waits for the
  // host's share), or after it in a launch of their own (HostRowsLate).
  const bool late_rows = host_ != nullptr && host_rows_late.on();
  x.host_y = host_ != nullptr && !late_rows ? host_->device_y() : nullptr;
  x.out = w.y;
  const uint64_t gate_up =
      k * (cuda::RowBytes(m.gate_type, e_) + cuda::RowBytes(m.up_type, e_)) * mc.expert_ff;
  uint64_t down = k * cuda::RowBytes(m.down_type, mc.expert_ff) * e_ +
                  (sff > 0 ? Bytes(m.shared_down) : 0);
  if (host_ == nullptr && cuda::DecodeExpertsSharedApart(x)) {
    // The shared expert's down product as a projection of its own (its
    // hidden row is final since moe.route); the down launch adds it. Not
    // in the host path's program: there bench397 at 25% with `cost`
    // decoded 283.3 and 263.6 tok/s with it against 302.8 and 284.0
    // without (H100, run 25), where resident decode gained 5% (772 against
    // 735) and `copy` 3%.
    cuda::DecodeProjection sd;
    sd.in = Raw(w.shared_g, sff);
    sd.m[0] = Mat(m.shared_down, w.shared_y);
    sd.n_matrices = 1;
    Project(L(il, "moe.shared_down"), sd, kPrepareDown);
    x.shared_y = w.shared_y;
    down -= Bytes(m.shared_down);
  }
  // The streamed gate/up launch quantizes the down launch's rows as it
  // completes them (no launch between them; cuda::DecodeExpertsGateUpQuantizes).
  if (const int f = cuda::DecodeExpertsDownFormats(x); f != 0 && (prepare_ & kPrepareDown) == 0) {
    cuda::DecodeExperts fused = x;
    fused.h_q8 = {w.decode_q8_h, f};
    fused.h_counters = w.decode_counters + Workspace::GateUpCountersAt(*c_.desc);
    if (cuda::DecodeExpertsGateUpQuantizes(fused)) x = fused;
  }
  Kernels(L(il, "moe.gate_up"), gate_up, [x](cuda::Stream s) { cuda::DecodeExpertsGateUp(x, s); });
  if (host_ != nullptr && !late_rows) p_.Cut({HostAction::kHostExperts, il});
  const int down_types[2] = {x.down_type, sff > 0 ? x.shared_down_type : x.down_type};
  if (const int f = (prepare_ & kPrepareDown) != 0 ? cuda::DecodeQ8Formats(down_types, 2, x.ff) : 0;
      f != 0) {
    uint8_t* q8 = w.decode_q8_h;
    Kernels(L(il, "moe.down.q8"), 0,
            [x, q8, f](cuda::Stream s) { cuda::DecodeExpertsPrepareDown(x, q8, f, s); });
    x.h_q8 = {q8, f};
  }
  Kernels(L(il, "moe.down"), down, [x](cuda::Stream s) { cuda::DecodeExpertsDown(x, s); });
  if (late_rows) {
    p_.Cut({HostAction::kHostExperts, il});
    const float* rows = host_->device_y();
    const float* weights = w.weights;
    float* y = w.y;
    const int64_t e = e_;
    Kernels(L(il, "moe.host_rows"), 0, [rows, weights, k, e, y](cuda::Stream s) {
      cuda::AddWeightedRows(rows, weights, k, e, y, s);
    });
  }
  add_ = w.y;
}

// The host's view of the layer's routing (and, predicting, of the next
// layer's), then the cut where it acquires the experts.
void Builder::RoutingOut(int il) {
  Workspace& w = w_;
  const MoeConfig& mc = c_.desc->moe;
  const int k = static_cast<int>(mc.n_expert_used);
  const int n_expert = static_cast<int>(mc.n_expert);
  int32_t* host = c_.host_routing;
  if (c_.prefetch && il + 1 < static_cast<int>(c_.layers->size())) {
    const DeviceMatrix next = (*c_.layers)[il + 1].moe.router;
    int32_t* predicted = w.paired_ids;  // scratch: decode never pairs ids
    const float* xn = w.xn;
    float* logits = w.router_logits;
    Op(L(il, "moe.predict"), Bytes(next),
       [next, predicted, host, k, n_expert, xn, logits](cuda::Stream s) {
      RETURN_IF_ERROR(cuda::MatMul(next.type, next.data, next.rows, next.cols, xn, 1, logits, s));
      cuda::TopK(logits, 1, n_expert, k, predicted,
                 reinterpret_cast<float*>(predicted + k), s, nullptr);
      RETURN_IF_ERROR(cuda::LastLaunchError("predict"));
      return cuda::CopyToHost(host + 2 * k, predicted, k * sizeof(int32_t), s);
    });
  }
  const bool weights = c_.copy_weights;
  void* host_x = host_ != nullptr ? host_->x() : nullptr;
  const int64_t e = e_;
  const cuda::Event routed = c_.routed;
  const int32_t* ids = w.ids;
  const float* wts = w.weights;
  const float* xn = w.xn;
  Op(L(il, "moe.routing_out"), 0,
     [host, k, weights, host_x, e, routed, ids, wts, xn](cuda::Stream s) {
    RETURN_IF_ERROR(cuda::CopyToHost(host, ids, k * sizeof(int32_t), s));
    if (weights) RETURN_IF_ERROR(cuda::CopyToHost(host + k, wts, k * sizeof(float), s));
    if (host_x != nullptr) RETURN_IF_ERROR(cuda::CopyToHost(host_x, xn, e * sizeof(float), s));
    // While captured, a node of the segment: the host waits for it, not for
    // the segment's end.
    return cuda::RecordEventInGraph(routed, s);
  });
  p_.Cut({HostAction::kRouting, il});
}

}  // namespace

absl::Status DecodeStepSupported(const DecodeContext& c) {
  const ArchDesc& d = *c.desc;
  // deepseek2's pieces have batch kernels only: its decode steps run the
  // batch pass one token at a time.
  for (const LayerDesc& l : d.layers) {
    if (l.mixer == MixerKind::kLatentAttention) {
      return absl::UnimplementedError("multi-head latent attention");
    }
    if (l.ffn == FfnKind::kDense) return absl::UnimplementedError("dense FFN blocks");
    if (l.moe.selection_bias != nullptr) return absl::UnimplementedError("a selection bias");
    if (d.moe.shared_ff > 0 && l.moe.shared_gate_inp == nullptr) {
      return absl::UnimplementedError("an ungated shared expert");
    }
  }
  if (!d.moe.plain_routing()) {
    return absl::UnimplementedError("sigmoid, group-limited or scaled routing");
  }
  const int64_t max_cols = cuda::DecodeMaxCols();
  const int64_t widest = std::max({d.info.n_embd, d.ssm.value_dim(),
                                   d.attn.n_head * d.attn.head_dim});
  if (widest > max_cols) {
    return absl::UnimplementedError(
        absl::StrCat("a decode input of ", widest, " floats exceeds ", max_cols));
  }
  if (d.moe.shared_ff > 0 && d.moe.shared_ff != d.moe.expert_ff) {
    return absl::UnimplementedError("a shared expert of another width than the routed ones");
  }
  if (!cuda::DecodeExpertsSupported(static_cast<int>(d.moe.n_expert_used), d.moe.shared_ff > 0,
                                    d.moe.expert_ff, d.info.n_embd)) {
    return absl::UnimplementedError(absl::StrCat(d.moe.n_expert_used, " experts of ",
                                                 d.moe.expert_ff, " rows per token"));
  }
  return absl::OkStatus();
}

bool HostRowsLateEnabled() { return host_rows_late.on(); }

void SetHostRowsLateEnabled(bool enabled) { host_rows_late.Set(enabled); }

absl::StatusOr<DecodeProgram> BuildDecodeProgram(const DecodeContext& c, DeviceState& st,
                                                 HostMisses* host) {
  RETURN_IF_ERROR(DecodeStepSupported(c));
  return Builder(c, st, host).Build();
}

}  // namespace sluice
