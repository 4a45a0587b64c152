// The CUDA forward-pass kernels (kernels/cuda/ops.h) against the CPU
// backend's blocks (model/) on random data: RMSNorm with the residual add,
// top-k routing, a whole gated attention block with sectioned RoPE over a KV
// cache, and a whole Gated DeltaNet block (conv, L2 norms, recurrence, gated
// norm), with F32 weights so that only the kernels differ. Each case prints
// its error; the device cases skip where no CUDA device is present. The
// several-sequence forms (ops.h SeqBatch) against the one-sequence forms
// run on each sequence alone: bit for bit.
//
// Error measure: max |gpu - cpu| / max |cpu| over the outputs (summation
// order differs, so agreement is to F32 rounding, not bit for bit).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_matmul.h"
#include "model/cuda/testing/sm90.h"
#include "model/arch_util.h"
#include "model/attention.h"
#include "model/blocks.h"
#include "model/delta_net.h"
#include "model/moe.h"
#include "model/state.h"

namespace sluice {
namespace {

using sm90::Dev;
using sm90::Random;
using sm90::RelErr;

constexpr double kMaxRelErr = 2e-5;

// An F32 matrix view of host floats (rows x cols).
Matrix HostMatrix(const std::vector<float>& w, int64_t rows, int64_t cols) {
  return Matrix{GgmlType::kF32, reinterpret_cast<const uint8_t*>(w.data()), rows,
                cols, static_cast<uint64_t>(cols) * 4};
}

class OpsVsCpuSm90Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = cuda::SetDevice(0); !s.ok()) {
      SLUICE_SKIP("no CUDA device here: " + s.ToString());
    }
    cuda::PrepareKernels();
  }
};

TEST_F(OpsVsCpuSm90Test, AddRmsNormMatchesTheCpu) {
  const int64_t n_tok = 5, n = 2048;
  auto x = Random(n_tok * n, 1), add = Random(n_tok * n, 2), w = Random(n, 3);
  std::vector<float> cpu_x = x, cpu_xn(n_tok * n);
  AddResidual(cpu_x.data(), add.data(), n_tok * n);
  for (int64_t t = 0; t < n_tok; ++t) {
    RmsNorm(cpu_x.data() + t * n, n, w.data(), 1e-6f, cpu_xn.data() + t * n);
  }
  Dev d;
  float *dx = d.Put(x), *dadd = d.Put(add), *dw = d.Put(w);
  float* dxn = d.Zeros<float>(n_tok * n);
  cuda::AddRmsNorm(dx, dadd, n_tok, n, dw, 1e-6f, dxn, nullptr);
  const double ex = RelErr(d.Get(dx, n_tok * n), cpu_x);
  const double exn = RelErr(d.Get(dxn, n_tok * n), cpu_xn);
  std::printf("AddRmsNorm: residual rel err %.3g, normed rel err %.3g\n", ex, exn);
  EXPECT_LT(ex, kMaxRelErr);
  EXPECT_LT(exn, kMaxRelErr);
}

// 256 and 512 experts take the registers path of the routing, 640 the
// shared-memory one.
TEST_F(OpsVsCpuSm90Test, TopKChoosesTheCpuExpertsAndWeights) {
  for (const int n_expert : {256, 512, 640}) {
    SCOPED_TRACE(n_expert);
    const int n_tok = 7, k = n_expert == 512 ? 10 : 8;
    auto logits = Random(n_tok * n_expert, 4, 2.0f);
    Dev d;
    float* dl = d.Put(logits);
    int32_t* ids = d.Zeros<int32_t>(n_tok * k);
    float* weights = d.Zeros<float>(n_tok * k);
    cuda::TopK(dl, n_tok, n_expert, k, ids, weights, nullptr);
    auto gid = d.Get(ids, n_tok * k);
    auto gw = d.Get(weights, n_tok * k);
    double max_w = 0;
    for (int t = 0; t < n_tok; ++t) {
      Routing r;
      RouteToken(logits.data() + t * n_expert, n_expert, k, &r);
      for (int s = 0; s < k; ++s) {
        EXPECT_EQ(gid[t * k + s], r.expert[s]) << "token " << t << " slot " << s;
        max_w = std::max(max_w, std::fabs(static_cast<double>(gw[t * k + s]) - r.weight[s]));
      }
    }
    std::printf("TopK %d experts: ids equal, max |weight diff| %.3g\n", n_expert, max_w);
    EXPECT_LT(max_w, 1e-6);
  }
}

// A gated attention block with sectioned RoPE, evaluated as a 6-token batch
// after 3 tokens already cached (so both prefill and the cache are used).
TEST_F(OpsVsCpuSm90Test, GatedAttentionBlockMatchesTheCpu) {
  AttentionConfig c;
  c.n_embd = 256;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 64;
  c.eps = 1e-6f;
  c.gated = true;
  c.rope.n_rot = 32;
  c.rope.freq_base = 1e7f;
  c.rope.multi_section = true;
  c.rope.sections = {5, 5, 6, 0};
  const int64_t e = c.n_embd, qw = 2 * c.n_head * c.head_dim;
  const int64_t kv = c.n_head_kv * c.head_dim, ow = c.n_head * c.head_dim;
  auto wq = Random(qw * e, 10, 0.05f), wk = Random(kv * e, 11, 0.05f);
  auto wv = Random(kv * e, 12, 0.05f), wo = Random(e * ow, 13, 0.05f);
  auto qn = Random(c.head_dim, 14), kn = Random(c.head_dim, 15);
  AttentionWeights w{HostMatrix(wq, qw, e), HostMatrix(wk, kv, e),
                     HostMatrix(wv, kv, e), HostMatrix(wo, e, ow), qn.data(),
                     kn.data()};
  const int capacity = 16;
  State st(capacity, {BlockStateShape{.kv_dim = kv}});
  auto x0 = Random(3 * e, 16), x1 = Random(6 * e, 17);
  std::vector<float> out0(3 * e), cpu(6 * e);
  ASSERT_TRUE(RunAttention(c, w, x0.data(), 3, 0, st.block(0), out0.data(), nullptr).ok());
  ASSERT_TRUE(RunAttention(c, w, x1.data(), 6, 3, st.block(0), cpu.data(), nullptr).ok());

  cuda::AttentionShape s;
  s.n_head = c.n_head;
  s.n_head_kv = c.n_head_kv;
  s.head_dim = c.head_dim;
  s.gated = true;
  s.eps = c.eps;
  s.n_rot = c.rope.n_rot;
  s.freq_base = c.rope.freq_base;
  s.multi_section = true;
  for (int i = 0; i < 4; ++i) s.sections[i] = c.rope.sections[i];
  s.kv_capacity = capacity;
  Dev d;
  float *dwq = d.Put(wq), *dwk = d.Put(wk), *dwv = d.Put(wv), *dwo = d.Put(wo);
  float *dqn = d.Put(qn), *dkn = d.Put(kn);
  float *kc = d.Zeros<float>(capacity * kv), *vc = d.Zeros<float>(capacity * kv);
  float *q = d.Zeros<float>(6 * qw), *k = d.Zeros<float>(6 * kv), *v = d.Zeros<float>(6 * kv);
  float *o = d.Zeros<float>(6 * ow), *y = d.Zeros<float>(6 * e);
  int32_t* pos = d.Zeros<int32_t>(1);
  for (auto [x, n, p0] : {std::tuple{&x0, 3, 0}, std::tuple{&x1, 6, 3}}) {
    float* dx = d.Put(*x);
    ASSERT_TRUE(cuda::CopyToDevice(pos, &p0, 4, nullptr).ok());
    ASSERT_TRUE(cuda::MatMul(GgmlType::kF32, dwq, qw, e, dx, n, q, nullptr).ok());
    ASSERT_TRUE(cuda::MatMul(GgmlType::kF32, dwk, kv, e, dx, n, k, nullptr).ok());
    ASSERT_TRUE(cuda::MatMul(GgmlType::kF32, dwv, kv, e, dx, n, v, nullptr).ok());
    cuda::AttentionPrepare(s, q, k, v, dqn, dkn, pos, n, kc, vc, nullptr);
    cuda::Attend(s, q, kc, vc, pos, n, o, nullptr);
    ASSERT_TRUE(cuda::MatMul(GgmlType::kF32, dwo, e, ow, o, n, y, nullptr).ok());
  }
  const double err = RelErr(d.Get(y, 6 * e), cpu);
  const double kerr = RelErr(d.Get(kc, 9 * kv),
                             std::vector<float>(st.block(0).k.begin(),
                                                st.block(0).k.begin() + 9 * kv));
  std::printf("gated attention block: output rel err %.3g, cached keys rel err %.3g\n",
              err, kerr);
  EXPECT_LT(err, kMaxRelErr);
  EXPECT_LT(kerr, kMaxRelErr);
}

// A Gated DeltaNet block: a 5-token batch, then one more token (the state
// carries over), against RunDeltaNet. State sizes 16 (the row-per-thread
// scan) and 32 / 128 (the register scan, 1 and 4 threads per state row).
void CheckDeltaNetBlock(int64_t state_size) {
  DeltaNetConfig c;
  c.n_embd = 256;
  c.state_size = state_size;
  c.n_k_heads = 2;
  c.n_v_heads = 4;
  c.conv_kernel = 4;
  c.eps = 1e-6f;
  const int64_t e = c.n_embd, ch = c.conv_channels(), vd = c.value_dim();
  const int64_t r = c.n_v_heads;
  auto wqkv = Random(ch * e, 20, 0.05f), wz = Random(vd * e, 21, 0.05f);
  auto wb = Random(r * e, 22, 0.05f), wa = Random(r * e, 23, 0.05f);
  auto wout = Random(e * vd, 24, 0.05f), conv = Random(ch * c.conv_kernel, 25, 0.5f);
  auto dt = Random(r, 26), a = Random(r, 27), norm = Random(c.state_size, 28);
  for (float& v : a) v = -std::fabs(v);
  DeltaNetWeights w;
  w.qkv = HostMatrix(wqkv, ch, e);
  w.gate = HostMatrix(wz, vd, e);
  w.beta = HostMatrix(wb, r, e);
  w.alpha = HostMatrix(wa, r, e);
  w.out = HostMatrix(wout, e, vd);
  w.conv = conv.data();
  w.dt_bias = dt.data();
  w.a = a.data();
  w.norm = norm.data();
  BlockStateShape shape{.conv_kernel = c.conv_kernel, .conv_channels = ch,
                        .v_heads = r, .state_size = c.state_size};
  State st(1, {shape});
  auto x0 = Random(5 * e, 29), x1 = Random(e, 30);
  std::vector<float> cpu0(5 * e), cpu1(e);
  ASSERT_TRUE(RunDeltaNet(c, w, x0.data(), 5, st.block(0), cpu0.data(), nullptr).ok());
  ASSERT_TRUE(RunDeltaNet(c, w, x1.data(), 1, st.block(0), cpu1.data(), nullptr).ok());

  cuda::DeltaNetShape s{static_cast<int>(c.state_size), static_cast<int>(c.n_k_heads),
                        static_cast<int>(r), static_cast<int>(c.conv_kernel), c.eps};
  Dev d;
  float *dqkvw = d.Put(wqkv), *dzw = d.Put(wz), *dbw = d.Put(wb), *daw = d.Put(wa);
  float *doutw = d.Put(wout), *dconv = d.Put(conv), *ddt = d.Put(dt), *da = d.Put(a);
  float* dnorm = d.Put(norm);
  float* conv_state = d.Zeros<float>((c.conv_kernel - 1) * ch);
  float* ssm = d.Zeros<float>(r * c.state_size * c.state_size);
  float *qkv = d.Zeros<float>(5 * ch), *z = d.Zeros<float>(5 * vd);
  float *beta = d.Zeros<float>(5 * r), *g = d.Zeros<float>(5 * r);
  float *o = d.Zeros<float>(5 * vd), *y = d.Zeros<float>(5 * e);
  std::vector<float> gpu0, gpu1;
  for (auto [x, n] : {std::pair{&x0, 5}, std::pair{&x1, 1}}) {
    float* dx = d.Put(*x);
    ASSERT_TRUE(cuda::MatMul(GgmlType::kF32, dqkvw, ch, e, dx, n, qkv, nullptr).ok());
    ASSERT_TRUE(cuda::MatMul(GgmlType::kF32, dzw, vd, e, dx, n, z, nullptr).ok());
    ASSERT_TRUE(cuda::MatMul(GgmlType::kF32, dbw, r, e, dx, n, beta, nullptr).ok());
    ASSERT_TRUE(cuda::MatMul(GgmlType::kF32, daw, r, e, dx, n, g, nullptr).ok());
    cuda::DeltaNetGates(s, beta, g, ddt, da, n, nullptr);
    cuda::DeltaNetConv(s, dconv, qkv, n, conv_state, nullptr);
    cuda::DeltaNetScan(s, qkv, beta, g, z, dnorm, n, ssm, o, nullptr);
    ASSERT_TRUE(cuda::MatMul(GgmlType::kF32, doutw, e, vd, o, n, y, nullptr).ok());
    (n == 5 ? gpu0 : gpu1) = d.Get(y, n * e);
  }
  const double e0 = RelErr(gpu0, cpu0), e1 = RelErr(gpu1, cpu1);
  const double es = RelErr(d.Get(ssm, r * c.state_size * c.state_size), st.block(0).ssm);
  std::printf("DeltaNet block (state %lld): batch rel err %.3g, next token %.3g, state %.3g\n",
              static_cast<long long>(state_size), e0, e1, es);
  EXPECT_LT(e0, kMaxRelErr);
  EXPECT_LT(e1, kMaxRelErr);
  EXPECT_LT(es, kMaxRelErr);
}

TEST_F(OpsVsCpuSm90Test, DeltaNetBlockMatchesTheCpuState16) { CheckDeltaNetBlock(16); }
TEST_F(OpsVsCpuSm90Test, DeltaNetBlockMatchesTheCpuState32) { CheckDeltaNetBlock(32); }
TEST_F(OpsVsCpuSm90Test, DeltaNetBlockMatchesTheCpuState128) { CheckDeltaNetBlock(128); }

// Three sequences of 1, 4 and 2 rows at positions 5, 0 and 3 (their states
// random, as if earlier tokens had run): the *Seqs launches over all rows
// against the one-sequence launches on each alone, every output and every
// state byte equal.
constexpr int kSeqs = 3;
constexpr int kSeqRows[kSeqs] = {1, 4, 2};
constexpr int kSeqPos[kSeqs] = {5, 0, 3};
constexpr int kSeqTotal = 7;

// The device tables of those three sequences, states (a, b) given.
cuda::SeqBatch MakeSeqBatch(Dev& d, const std::vector<cuda::SeqState>& states) {
  std::vector<cuda::SeqRows> rows;
  std::vector<int32_t> row_seq;
  int row = 0;
  for (int i = 0; i < kSeqs; ++i) {
    rows.push_back({row, kSeqRows[i], kSeqPos[i], 0});
    for (int r = 0; r < kSeqRows[i]; ++r) row_seq.push_back(i);
    row += kSeqRows[i];
  }
  auto* d_rows = d.Zeros<cuda::SeqRows>(kSeqs);
  auto* d_row_seq = d.Zeros<int32_t>(kSeqTotal);
  auto* d_states = d.Zeros<cuda::SeqState>(kSeqs);
  EXPECT_TRUE(cuda::CopyToDevice(d_rows, rows.data(), sizeof(rows[0]) * kSeqs, nullptr).ok());
  EXPECT_TRUE(cuda::CopyToDevice(d_row_seq, row_seq.data(), 4 * kSeqTotal, nullptr).ok());
  EXPECT_TRUE(
      cuda::CopyToDevice(d_states, states.data(), sizeof(states[0]) * kSeqs, nullptr).ok());
  return {kSeqs, d_rows, d_row_seq, d_states};
}

void ExpectSame(Dev& d, const float* a, const float* b, size_t n, const char* what) {
  const std::vector<float> x = d.Get(a, n), y = d.Get(b, n);
  size_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff += x[i] != y[i] ? 1 : 0;
  EXPECT_EQ(diff, 0u) << what << ": " << diff << " of " << n << " values differ";
}

// The gated shared expert's add (out += shared * sigmoid(gate_inp . x)
// a row) against double arithmetic, and its rows in parts of several
// blocks (the default at 2,048 columns) against one block a row: the
// same bits.
TEST_F(OpsVsCpuSm90Test, AddGatedSharedMatchesTheCpuInParts) {
  const int64_t n_tok = 3, n = 2048 + 40;
  auto gate = Random(n, 4), x = Random(n_tok * n, 5), shared = Random(n_tok * n, 6),
       out = Random(n_tok * n, 7);
  std::vector<float> want(n_tok * n);
  for (int64_t t = 0; t < n_tok; ++t) {
    double dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(gate[i]) * x[t * n + i];
    const double g = 1.0 / (1.0 + std::exp(-dot));
    for (int64_t i = 0; i < n; ++i) want[t * n + i] = out[t * n + i] + shared[t * n + i] * g;
  }
  Dev d;
  float *dg = d.Put(gate), *dx = d.Put(x), *ds = d.Put(shared);
  float *parts = d.Put(out), *one = d.Put(out);
  cuda::AddGatedShared(dg, dx, ds, n_tok, n, parts, nullptr);
  setenv("SLUICE_CUDA_GATED_SHARED_PARTS", "1", 1);
  cuda::AddGatedShared(dg, dx, ds, n_tok, n, one, nullptr);
  unsetenv("SLUICE_CUDA_GATED_SHARED_PARTS");
  const double err = RelErr(d.Get(parts, n_tok * n), want);
  std::printf("AddGatedShared: rel err %.3g\n", err);
  EXPECT_LT(err, kMaxRelErr);
  ExpectSame(d, parts, one, n_tok * n, "parts against one block a row");
}

TEST_F(OpsVsCpuSm90Test, AttentionOverSeveralSequencesEqualsEachAlone) {
  cuda::AttentionShape s;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = 64;
  s.gated = true;
  s.eps = 1e-6f;
  s.n_rot = 32;
  s.freq_base = 1e7f;
  s.kv_capacity = 16;
  const int64_t qw = 2 * s.n_head * s.head_dim, kv = s.n_head_kv * s.head_dim;
  const int64_t ow = s.n_head * s.head_dim, cache = s.kv_capacity * kv;
  Dev d;
  const auto q_h = Random(kSeqTotal * qw, 40), k_h = Random(kSeqTotal * kv, 41);
  const auto v_h = Random(kSeqTotal * kv, 42);
  float *qn = d.Put(Random(s.head_dim, 43)), *kn = d.Put(Random(s.head_dim, 44));
  float *q_all = d.Put(q_h), *k_all = d.Put(k_h), *v_all = d.Put(v_h);
  float* o_all = d.Zeros<float>(kSeqTotal * ow);
  float *q_one = d.Put(q_h), *o_one = d.Zeros<float>(kSeqTotal * ow);
  std::vector<cuda::SeqState> states;
  std::vector<std::pair<float*, float*>> alone;
  int32_t* pos = d.Zeros<int32_t>(1);
  for (int i = 0; i < kSeqs; ++i) {
    const auto kc = Random(cache, 50 + i), vc = Random(cache, 60 + i);
    states.push_back({d.Put(kc), d.Put(vc)});
    alone.push_back({d.Put(kc), d.Put(vc)});
  }
  const cuda::SeqBatch b = MakeSeqBatch(d, states);
  cuda::AttentionPrepareSeqs(s, q_all, k_all, v_all, qn, kn, b, kSeqTotal, nullptr);
  cuda::AttendSeqs(s, q_all, b, kSeqTotal, o_all, nullptr);
  int row = 0;
  for (int i = 0; i < kSeqs; ++i) {
    ASSERT_TRUE(cuda::CopyToDevice(pos, &kSeqPos[i], 4, nullptr).ok());
    cuda::AttentionPrepare(s, q_one + row * qw, k_all + row * kv, v_all + row * kv, qn, kn,
                           pos, kSeqRows[i], alone[i].first, alone[i].second, nullptr);
    cuda::Attend(s, q_one + row * qw, alone[i].first, alone[i].second, pos, kSeqRows[i],
                 o_one + row * ow, nullptr);
    ASSERT_TRUE(cuda::Synchronize(nullptr).ok());
    row += kSeqRows[i];
  }
  ExpectSame(d, q_all, q_one, kSeqTotal * qw, "rotated q");
  ExpectSame(d, o_all, o_one, kSeqTotal * ow, "attention output");
  for (int i = 0; i < kSeqs; ++i) {
    ExpectSame(d, states[i].a, alone[i].first, cache, "K cache");
    ExpectSame(d, states[i].b, alone[i].second, cache, "V cache");
  }
}

// State sizes 16 (the row-per-thread scan) and 64 (the register scan).
void CheckDeltaNetSeqs(int state_size) {
  const cuda::DeltaNetShape s{state_size, 2, 4, 4, 1e-6f};
  const int64_t ch = s.channels(), vd = s.value_dim(), r = s.n_v_heads;
  const int64_t conv = (s.conv_kernel - 1) * ch, ssm = r * state_size * state_size;
  Dev d;
  const auto qkv_h = Random(kSeqTotal * ch, 70), z_h = Random(kSeqTotal * vd, 71);
  auto beta_h = Random(kSeqTotal * r, 72), g_h = Random(kSeqTotal * r, 73);
  for (float& x : beta_h) x = 1.0f / (1.0f + std::exp(-x));
  for (float& x : g_h) x = -std::fabs(x) * 0.1f;
  float *kernel = d.Put(Random(ch * s.conv_kernel, 74, 0.5f)), *norm = d.Put(Random(state_size, 75));
  float *qkv_all = d.Put(qkv_h), *qkv_one = d.Put(qkv_h);
  float *beta = d.Put(beta_h), *g = d.Put(g_h), *z = d.Put(z_h);
  float *o_all = d.Zeros<float>(kSeqTotal * vd), *o_one = d.Zeros<float>(kSeqTotal * vd);
  std::vector<cuda::SeqState> states;
  std::vector<std::pair<float*, float*>> alone;
  for (int i = 0; i < kSeqs; ++i) {
    const auto c = Random(conv, 80 + i), st = Random(ssm, 90 + i, 0.1f);
    states.push_back({d.Put(c), d.Put(st)});
    alone.push_back({d.Put(c), d.Put(st)});
  }
  const cuda::SeqBatch b = MakeSeqBatch(d, states);
  cuda::DeltaNetConvSeqs(s, kernel, qkv_all, b, kSeqTotal, nullptr);
  cuda::DeltaNetScanSeqs(s, qkv_all, beta, g, z, norm, b, o_all, nullptr);
  int row = 0;
  for (int i = 0; i < kSeqs; ++i) {
    cuda::DeltaNetConv(s, kernel, qkv_one + row * ch, kSeqRows[i], alone[i].first, nullptr);
    cuda::DeltaNetScan(s, qkv_one + row * ch, beta + row * r, g + row * r, z + row * vd, norm,
                       kSeqRows[i], alone[i].second, o_one + row * vd, nullptr);
    row += kSeqRows[i];
  }
  ExpectSame(d, qkv_all, qkv_one, kSeqTotal * ch, "conv output");
  ExpectSame(d, o_all, o_one, kSeqTotal * vd, "scan output");
  for (int i = 0; i < kSeqs; ++i) {
    ExpectSame(d, states[i].a, alone[i].first, conv, "conv state");
    ExpectSame(d, states[i].b, alone[i].second, ssm, "recurrent state");
  }
}

TEST_F(OpsVsCpuSm90Test, DeltaNetOverSeveralSequencesEqualsEachAloneState16) {
  CheckDeltaNetSeqs(16);
}
TEST_F(OpsVsCpuSm90Test, DeltaNetOverSeveralSequencesEqualsEachAloneState64) {
  CheckDeltaNetSeqs(64);
}

}  // namespace
}  // namespace sluice
