#include "model/mla.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/f32_ops.h"
#include "kernels/cpu/half_acc.h"
#include "model/blocks.h"

namespace sluice {
namespace {

// q [n_tok][n_head * head_k] and the kv_a rows [n_tok][cache_width] of x.
absl::Status ProjectInputs(const MlaConfig& c, const MlaWeights& w,
                           const float* x, int64_t n_tok, float* q,
                           float* ckv, ThreadPool* pool) {
  if (c.q_lora_rank == 0) {
    if (n_tok == 1) {
      const RowJob jobs[] = {{&w.wq, x, q}, {&w.wkv_a, x, ckv}};
      return ProjectRows(jobs, pool);
    }
    const Matrix* ws[] = {&w.wq, &w.wkv_a};
    float* ys[] = {q, ckv};
    return ProjectShared(ws, x, n_tok, ys, pool);
  }
  std::vector<float> qa(n_tok * c.q_lora_rank);
  if (n_tok == 1) {
    const RowJob jobs[] = {{&w.wq_a, x, qa.data()}, {&w.wkv_a, x, ckv}};
    RETURN_IF_ERROR(ProjectRows(jobs, pool));
  } else {
    const Matrix* ws[] = {&w.wq_a, &w.wkv_a};
    float* ys[] = {qa.data(), ckv};
    RETURN_IF_ERROR(ProjectShared(ws, x, n_tok, ys, pool));
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    float* row = qa.data() + t * c.q_lora_rank;
    RmsNorm(row, c.q_lora_rank, w.q_a_norm, c.eps, row);
  }
  return Project(w.wq_b, qa.data(), n_tok, q, pool);
}

// y[t] = M_h applied to src[t] for every token, where src rows are a head's
// slice (stride src_stride) and y rows have stride y_stride: one product
// of n_tok rows through the head's matrix.
absl::Status PerHead(const Matrix& m, const float* src, int64_t src_stride,
                     int64_t n_tok, float* y, int64_t y_stride,
                     std::vector<float>& in_buf, std::vector<float>& out_buf,
                     ThreadPool* pool) {
  in_buf.resize(n_tok * m.cols);
  out_buf.resize(n_tok * m.rows);
  for (int64_t t = 0; t < n_tok; ++t) {
    std::memcpy(in_buf.data() + t * m.cols, src + t * src_stride,
                m.cols * sizeof(float));
  }
  RETURN_IF_ERROR(Project(m, in_buf.data(), n_tok, out_buf.data(), pool));
  for (int64_t t = 0; t < n_tok; ++t) {
    std::memcpy(y + t * y_stride, out_buf.data() + t * m.rows,
                m.rows * sizeof(float));
  }
  return absl::OkStatus();
}

// y[t] = M_h^T src[t] for a head matrix stored rows = nope, cols = latent
// (the fused attn_kv_b): the rows are dequantized once and accumulated.
absl::Status PerHeadTransposed(const Matrix& m, const float* src,
                               int64_t src_stride, int64_t n_tok, float* y,
                               int64_t y_stride, std::vector<float>& rows) {
  rows.resize(m.rows * m.cols);
  for (int64_t r = 0; r < m.rows; ++r) {
    RETURN_IF_ERROR(kernels::DequantizeRow(m.type, m.data + r * m.row_bytes,
                                           m.cols, rows.data() + r * m.cols));
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    float* out = y + t * y_stride;
    std::fill(out, out + m.cols, 0.0f);
    const float* in = src + t * src_stride;
    for (int64_t r = 0; r < m.rows; ++r) {
      Axpy(in[r], rows.data() + r * m.cols, out, m.cols);
    }
  }
  return absl::OkStatus();
}

// o = sum_j softmax_j(scale * q . row_j) row_j[0, latent) over cache rows
// 0..n_ctx-1 (row width `width`), as ggml's CPU flash attention computes
// it for half-precision keys and values (the reference's arithmetic: q and
// the rows are half values already): one pass with a running maximum M and
// sum S, the value accumulator rounded to half after every update, divided
// by S at the end. acc: `latent` floats of scratch.
void AttendLatent(const float* q, const float* cache, int64_t width,
                  int64_t latent, int64_t n_ctx, float scale, float* acc,
                  float* o) {
  float sum = 0.0f, max_s = -INFINITY;
  bool half = true;  // false from the first update past the half range on
  std::fill(acc, acc + latent, 0.0f);
  for (int64_t j = 0; j < n_ctx; ++j) {
    const float* row = cache + j * width;
    const float s = kernels::DotLanes(q, row, width) * scale;
    float ms = 1.0f, vs = 1.0f;
    if (s > max_s) {
      ms = std::exp(max_s - s);
      max_s = s;
      if (half) {
        half = kernels::ScaleHalfAcc(acc, latent, ms);
      } else {
        for (int64_t i = 0; i < latent; ++i) acc[i] *= ms;
      }
    } else {
      vs = std::exp(s - max_s);
    }
    if (half) {
      half = kernels::MadHalfAcc(acc, row, latent, vs);
    } else {
      kernels::AxpyF32(vs, row, acc, latent);
    }
    sum = sum * ms + vs;
  }
  const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
  for (int64_t i = 0; i < latent; ++i) o[i] = acc[i] * inv;
}

}  // namespace

absl::StatusOr<std::vector<float>> UnfusedKb(const MlaWeights& w) {
  if (!w.k_b_transposed) {
    return absl::InvalidArgumentError("UnfusedKb: K_b is in the split layout already");
  }
  const ExpertMatrix& k = w.k_b;  // per head: rows nope, cols latent
  const int64_t nope = k.rows, lat = k.cols;
  std::vector<float> out(static_cast<size_t>(k.n_expert * lat * nope));
  std::vector<float> row(lat);
  for (int64_t h = 0; h < k.n_expert; ++h) {
    const Matrix m = k.expert(h);
    float* head = out.data() + h * lat * nope;
    for (int64_t r = 0; r < nope; ++r) {
      RETURN_IF_ERROR(kernels::DequantizeRow(m.type, m.data + r * m.row_bytes, lat, row.data()));
      for (int64_t c = 0; c < lat; ++c) head[c * nope + r] = row[c];
    }
  }
  return out;
}

absl::Status RunMla(const MlaConfig& c, const MlaWeights& w, const float* x,
                    int64_t n_tok, int32_t pos0, BlockState& kv, float* out,
                    ThreadPool* pool) {
  const int64_t n_head = c.n_head, dk = c.head_k, n_rot = c.n_rot;
  const int64_t nope = c.nope(), lat = c.kv_lora_rank, width = c.cache_width();
  const int64_t dv = c.head_v;
  const int64_t q_width = n_head * dk;

  std::vector<float> q(n_tok * q_width), ckv(n_tok * width);
  RETURN_IF_ERROR(ProjectInputs(c, w, x, n_tok, q.data(), ckv.data(), pool));

  // The cache rows [RMSNorm(c) | RoPE(k_pe)], and the rotated q_pe of every
  // head.
  std::vector<float> cos_v(n_rot / 2), sin_v(n_rot / 2);
  for (int64_t t = 0; t < n_tok; ++t) {
    const int32_t pos = pos0 + static_cast<int32_t>(t);
    ScaledRopeAngles(c.rope, pos, cos_v.data(), sin_v.data());
    float* row = kv.k.data() + static_cast<int64_t>(pos) * width;
    const float* src = ckv.data() + t * width;
    RmsNorm(src, lat, w.kv_a_norm, c.eps, row);
    std::memcpy(row + lat, src + lat, n_rot * sizeof(float));
    ApplyScaledRope(c.rope, row + lat, cos_v.data(), sin_v.data());
    kernels::RoundToHalf(row, width);
    for (int64_t h = 0; h < n_head; ++h) {
      ApplyScaledRope(c.rope, q.data() + t * q_width + h * dk + nope,
                      cos_v.data(), sin_v.data());
    }
  }

  // Absorbed queries [K_b,h q_nope | q_pe], one row of `width` per (t, h).
  // A single token's heads run as one parallel loop (ProjectRows).
  std::vector<float> qa(n_tok * n_head * width);
  std::vector<float> in_buf, out_buf;
  std::vector<Matrix> heads(n_head);
  std::vector<RowJob> jobs;
  for (int64_t h = 0; h < n_head; ++h) {
    heads[h] = w.k_b.expert(h);
    const float* src = q.data() + h * dk;
    float* dst = qa.data() + h * width;
    if (w.k_b_transposed) {
      RETURN_IF_ERROR(PerHeadTransposed(heads[h], src, q_width, n_tok, dst,
                                        n_head * width, out_buf));
    } else if (n_tok == 1) {
      jobs.push_back({&heads[h], src, dst});
    } else {
      RETURN_IF_ERROR(PerHead(heads[h], src, q_width, n_tok, dst,
                              n_head * width, in_buf, out_buf, pool));
    }
    for (int64_t t = 0; t < n_tok; ++t) {
      std::memcpy(dst + t * n_head * width + lat, src + t * q_width + nope,
                  n_rot * sizeof(float));
    }
  }
  if (!jobs.empty()) RETURN_IF_ERROR(ProjectRows(jobs, pool));

  // Attention in the latent space: o_lat [n_tok][n_head][lat].
  kernels::RoundToHalf(qa.data(), static_cast<int64_t>(qa.size()));
  std::vector<float> o_lat(n_tok * n_head * lat);
  const int64_t work = n_tok * n_head * (pos0 + n_tok) * (width + lat);
  ParallelRange(pool, n_tok * n_head, work, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(lat);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t = i / n_head;
      AttendLatent(qa.data() + i * width, kv.k.data(), width, lat,
                   pos0 + t + 1, c.kq_scale, acc.data(),
                   o_lat.data() + i * lat);
    }
  });

  // Back to per-head values, then the output projection.
  std::vector<float> o(n_tok * n_head * dv);
  jobs.clear();
  for (int64_t h = 0; h < n_head; ++h) {
    heads[h] = w.v_b.expert(h);
    if (n_tok == 1) {
      jobs.push_back({&heads[h], o_lat.data() + h * lat, o.data() + h * dv});
      continue;
    }
    RETURN_IF_ERROR(PerHead(heads[h], o_lat.data() + h * lat, n_head * lat,
                            n_tok, o.data() + h * dv, n_head * dv, in_buf,
                            out_buf, pool));
  }
  if (!jobs.empty()) RETURN_IF_ERROR(ProjectRows(jobs, pool));
  return Project(w.wo, o.data(), n_tok, out, pool);
}

}  // namespace sluice
