#include "model/delta_net.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/f32_ops.h"
#include "model/blocks.h"

namespace sluice {
namespace {

// Causal depthwise conv + SiLU over the batch, in place on qkv
// ([n_tok][channels]); the state holds the previous conv_kernel - 1 inputs
// (oldest first) and is advanced past the batch. Channels are the inner
// loop (contiguous, vectorizable); each output still sums its taps in
// order 0..taps-1.
void ConvSilu(const DeltaNetConfig& c, const float* kernel, float* qkv,
              int64_t n_tok, float* conv_state, ThreadPool* pool) {
  const int64_t ch = c.conv_channels();
  const int64_t taps = c.conv_kernel;
  const int64_t hist = taps - 1;
  // Inputs with their history: row r is input r - hist of the batch.
  std::vector<float> src((hist + n_tok) * ch);
  std::memcpy(src.data(), conv_state, hist * ch * sizeof(float));
  std::memcpy(src.data() + hist * ch, qkv, n_tok * ch * sizeof(float));
  // Tap-major copy of the [ch][taps] kernel.
  std::vector<float> wt(taps * ch);
  for (int64_t ci = 0; ci < ch; ++ci) {
    for (int64_t j = 0; j < taps; ++j) wt[j * ch + ci] = kernel[ci * taps + j];
  }
  ParallelRange(pool, ch, ch * n_tok * taps, [&](int64_t begin, int64_t end) {
    for (int64_t t = 0; t < n_tok; ++t) {
      float* out = qkv + t * ch;
      for (int64_t ci = begin; ci < end; ++ci) out[ci] = 0.0f;
      for (int64_t j = 0; j < taps; ++j) {
        const float* in = src.data() + (t + j) * ch;
        const float* w = wt.data() + j * ch;
        for (int64_t ci = begin; ci < end; ++ci) out[ci] += in[ci] * w[ci];
      }
      for (int64_t ci = begin; ci < end; ++ci) out[ci] = Silu(out[ci]);
    }
  });
  std::memcpy(conv_state, src.data() + n_tok * ch, hist * ch * sizeof(float));
}

// The delta-rule recurrence of v head j over the batch; writes o rows.
void ScanHead(const DeltaNetConfig& c, int64_t j, const float* qkv,
              const float* beta, const float* g, int64_t n_tok, float* s_mat,
              float* o) {
  const int64_t n = c.state_size;
  const int64_t ch = c.conv_channels();
  const int64_t kh = j % c.n_k_heads;
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* q = qkv + t * ch + kh * n;
    const float* k = qkv + t * ch + c.key_dim() + kh * n;
    const float* v = qkv + t * ch + 2 * c.key_dim() + j * n;
    const float decay = std::exp(g[t * c.n_v_heads + j]);
    const float b = beta[t * c.n_v_heads + j];
    float* oj = o + t * c.value_dim() + j * n;
    // Two fused passes per state row; the values are those of "scale,
    // Dot, Axpy, Dot" (same lane order).
    kernels::DeltaRuleStep(s_mat, n, q, k, v, decay, b, oj);
  }
}

}  // namespace

absl::Status RunDeltaNet(const DeltaNetConfig& c, const DeltaNetWeights& w,
                         const float* x, int64_t n_tok, BlockState& st,
                         float* out, ThreadPool* pool) {
  const int64_t ch = c.conv_channels();
  const int64_t n = c.state_size;
  const int64_t r = c.n_v_heads;
  std::vector<float> qkv(n_tok * ch), z(n_tok * c.value_dim());
  std::vector<float> beta(n_tok * r), g(n_tok * r);
  if (n_tok == 1) {
    const RowJob jobs[] = {{&w.qkv, x, qkv.data()}, {&w.gate, x, z.data()},
                           {&w.beta, x, beta.data()}, {&w.alpha, x, g.data()}};
    RETURN_IF_ERROR(ProjectRows(jobs, pool));
  } else {
    const Matrix* ws[] = {&w.qkv, &w.gate, &w.beta, &w.alpha};
    float* ys[] = {qkv.data(), z.data(), beta.data(), g.data()};
    RETURN_IF_ERROR(ProjectShared(ws, x, n_tok, ys, pool));
  }
  for (int64_t i = 0; i < n_tok * r; ++i) {
    beta[i] = Sigmoid(beta[i]);
    g[i] = Softplus(g[i] + w.dt_bias[i % r]) * w.a[i % r];
  }

  ConvSilu(c, w.conv, qkv.data(), n_tok, st.conv.data(), pool);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t t = 0; t < n_tok; ++t) {
    float* row = qkv.data() + t * ch;
    for (int64_t h = 0; h < 2 * c.n_k_heads; ++h) {
      L2Normalize(row + h * n, n, c.eps);
    }
    for (int64_t i = 0; i < c.key_dim(); ++i) row[i] *= q_scale;
  }

  std::vector<float> o(n_tok * c.value_dim());
  ParallelRange(pool, r, r * n_tok * n * n * 3, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      ScanHead(c, j, qkv.data(), beta.data(), g.data(), n_tok,
               st.ssm.data() + j * n * n, o.data());
    }
  });

  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t j = 0; j < r; ++j) {
      float* oh = o.data() + t * c.value_dim() + j * n;
      const float* zh = z.data() + t * c.value_dim() + j * n;
      RmsNorm(oh, n, w.norm, c.eps, oh);
      for (int64_t i = 0; i < n; ++i) oh[i] *= Silu(zh[i]);
    }
  }
  return Project(w.out, o.data(), n_tok, out, pool);
}

}  // namespace sluice
