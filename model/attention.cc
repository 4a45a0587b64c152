#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/f32_ops.h"

namespace sluice {
namespace {

// Normalizes and rotates the q heads (stride q_stride between heads) and k
// heads of one token, and stores k and v into the cache row `pos`.
void PrepareToken(const AttentionConfig& c, const AttentionWeights& w,
                  float* q, int64_t q_stride, float* k, const float* v,
                  int32_t pos, BlockState& kv, std::vector<float>& cos_v,
                  std::vector<float>& sin_v) {
  const int64_t d = c.head_dim;
  const int64_t kv_dim = c.n_head_kv * d;
  RopeAngles(c.rope, TextPositions(pos), cos_v.data(), sin_v.data());
  for (int64_t h = 0; h < c.n_head; ++h) {
    float* qh = q + h * q_stride;
    RmsNorm(qh, d, w.q_norm, c.eps, qh);
    ApplyRope(qh, c.rope.n_rot, cos_v.data(), sin_v.data());
  }
  float* k_row = kv.k.data() + static_cast<int64_t>(pos) * kv_dim;
  for (int64_t h = 0; h < c.n_head_kv; ++h) {
    float* kh = k_row + h * d;
    RmsNorm(k + h * d, d, w.k_norm, c.eps, kh);
    ApplyRope(kh, c.rope.n_rot, cos_v.data(), sin_v.data());
  }
  std::memcpy(kv.v.data() + static_cast<int64_t>(pos) * kv_dim, v,
              kv_dim * sizeof(float));
}

// o = softmax(scale * q K^T) V over cache rows 0..n_ctx-1 of kv head g.
void AttendOne(const float* q, const BlockState& kv, int64_t kv_dim,
               int64_t g, int64_t d, int64_t n_ctx, float scale,
               float* scores, float* o) {
  kernels::DotRowsLanes(q, kv.k.data() + g * d, kv_dim, n_ctx, d, scores);
  float max_s = -INFINITY;
  for (int64_t j = 0; j < n_ctx; ++j) {
    scores[j] *= scale;
    max_s = std::max(max_s, scores[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n_ctx; ++j) {
    scores[j] = std::exp(scores[j] - max_s);
    sum += scores[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n_ctx; ++j) scores[j] *= inv;
  std::fill(o, o + d, 0.0f);
  kernels::AxpyRowsF32(scores, kv.v.data() + g * d, kv_dim, n_ctx, d, o);
}

}  // namespace

absl::Status RunAttention(const AttentionConfig& c, const AttentionWeights& w,
                          const float* x, int64_t n_tok, int32_t pos0,
                          BlockState& kv, float* out,
                          ThreadPool* pool) {
  const int64_t d = c.head_dim;
  const int64_t q_head_stride = c.gated ? 2 * d : d;
  const int64_t q_width = c.n_head * q_head_stride;
  const int64_t kv_dim = c.n_head_kv * d;
  const int64_t o_width = c.n_head * d;

  std::vector<float> q(n_tok * q_width), k(n_tok * kv_dim), v(n_tok * kv_dim);
  if (n_tok == 1) {
    const RowJob jobs[] = {{&w.wq, x, q.data()}, {&w.wk, x, k.data()},
                           {&w.wv, x, v.data()}};
    RETURN_IF_ERROR(ProjectRows(jobs, pool));
  } else {
    const Matrix* ws[] = {&w.wq, &w.wk, &w.wv};
    float* ys[] = {q.data(), k.data(), v.data()};
    RETURN_IF_ERROR(ProjectShared(ws, x, n_tok, ys, pool));
  }

  std::vector<float> cos_v(c.rope.n_rot / 2), sin_v(c.rope.n_rot / 2);
  for (int64_t t = 0; t < n_tok; ++t) {
    PrepareToken(c, w, q.data() + t * q_width, q_head_stride,
                 k.data() + t * kv_dim, v.data() + t * kv_dim, pos0 + t, kv,
                 cos_v, sin_v);
  }

  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t group = c.n_head / c.n_head_kv;
  std::vector<float> o(n_tok * o_width);
  const int64_t work = n_tok * c.n_head * (pos0 + n_tok) * d * 2;
  ParallelRange(pool, n_tok * c.n_head, work, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(pos0 + n_tok);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t = i / c.n_head;
      const int64_t h = i % c.n_head;
      const float* qh = q.data() + t * q_width + h * q_head_stride;
      float* oh = o.data() + t * o_width + h * d;
      AttendOne(qh, kv, kv_dim, h / group, d, pos0 + t + 1, scale,
                scores.data(), oh);
      if (c.gated) {
        const float* gate = qh + d;
        for (int64_t j = 0; j < d; ++j) oh[j] *= Sigmoid(gate[j]);
      }
    }
  });
  return Project(w.wo, o.data(), n_tok, out, pool);
}

}  // namespace sluice
