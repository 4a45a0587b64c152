#include "model/blocks.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "base/status_macros.h"
#include "kernels/cpu/matvec.h"

namespace sluice {

absl::Status Project(const Matrix& w, const float* x, int64_t n_tok, float* y,
                     ThreadPool* pool) {
  const int64_t work = w.rows * w.cols * n_tok;
  return kernels::MatMul(w.type, w.data, w.rows, w.cols, x, n_tok, y,
                         work < kMinParallelMatMulWork ? nullptr : pool);
}

namespace {

// Activation buffers reused across calls on this thread (decode issues
// many small products per step; allocating each time shows in profiles).
std::vector<kernels::PreparedActivations>& ActScratch() {
  thread_local std::vector<kernels::PreparedActivations> scratch;
  return scratch;
}

// For each (x, n_tok) input and weight, the index into `acts` of x prepared
// for that weight's type; an input is converted once per partner format.
absl::Status PrepareInputs(absl::Span<const Matrix* const> ws,
                           absl::Span<const float* const> xs, int64_t n_tok,
                           std::vector<kernels::PreparedActivations>& acts,
                           absl::InlinedVector<size_t, 16>& index) {
  index.assign(ws.size(), 0);
  size_t used = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    size_t found = used;
    for (size_t j = 0; j < i; ++j) {
      if (xs[j] == xs[i] && acts[index[j]].CompatibleWith(ws[i]->type, ws[i]->cols)) {
        found = index[j];
        break;
      }
    }
    if (found == used) {
      if (acts.size() <= used) acts.resize(used + 1);
      RETURN_IF_ERROR(
          acts[used].Prepare(ws[i]->type, xs[i], ws[i]->cols, n_tok));
      ++used;
    }
    index[i] = found;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ProjectPrepared(const Matrix& w,
                             const kernels::PreparedActivations& act, float* y,
                             ThreadPool* pool) {
  const int64_t work = w.rows * w.cols * act.n_tok();
  return kernels::MatMulPrepared(w.type, w.data, w.rows, w.cols, act, y,
                                 work < kMinParallelMatMulWork ? nullptr : pool);
}

absl::Status ProjectShared(absl::Span<const Matrix* const> ws, const float* x,
                           int64_t n_tok, absl::Span<float* const> ys,
                           ThreadPool* pool) {
  std::vector<kernels::PreparedActivations>& acts = ActScratch();
  absl::InlinedVector<const float*, 16> xs(ws.size(), x);
  absl::InlinedVector<size_t, 16> index;
  RETURN_IF_ERROR(PrepareInputs(ws, xs, n_tok, acts, index));
  for (size_t i = 0; i < ws.size(); ++i) {
    RETURN_IF_ERROR(ProjectPrepared(*ws[i], acts[index[i]], ys[i], pool));
  }
  return absl::OkStatus();
}

absl::Status ProjectRows(absl::Span<const RowJob> jobs,
                         ThreadPool* pool) {
  int64_t total_rows = 0, work = 0;
  absl::InlinedVector<const Matrix*, 16> ws;
  absl::InlinedVector<const float*, 16> xs;
  for (const RowJob& j : jobs) {
    total_rows += j.w->rows;
    work += j.w->rows * j.w->cols;
    ws.push_back(j.w);
    xs.push_back(j.x);
  }
  std::vector<kernels::PreparedActivations>& acts = ActScratch();
  absl::InlinedVector<size_t, 16> index;
  RETURN_IF_ERROR(PrepareInputs(ws, xs, 1, acts, index));
  // Rows [begin, end) of the concatenation, one product per job touched.
  const auto run = [&](int64_t begin, int64_t end) -> absl::Status {
    int64_t base = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const RowJob& j = jobs[i];
      const int64_t lo = std::max(begin, base) - base;
      const int64_t hi = std::min(end, base + j.w->rows) - base;
      base += j.w->rows;
      if (lo >= hi) continue;
      absl::Status s = kernels::MatMulPrepared(
          j.w->type, j.w->data + lo * j.w->row_bytes, hi - lo, j.w->cols,
          acts[index[i]], j.y + lo, nullptr);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  };
  if (pool == nullptr || pool->num_threads() == 1 ||
      work < kMinParallelMatMulWork) {
    return run(0, total_rows);
  }
  std::vector<absl::Status> status(pool->num_threads());
  std::atomic<int> next{0};
  pool->ParallelForGrain(total_rows, 4, [&](int64_t begin, int64_t end) {
    status[next.fetch_add(1)] = run(begin, end);
  });
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void ParallelRange(ThreadPool* pool, int64_t n, int64_t work,
                   absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (pool == nullptr || pool->num_threads() == 1 || work < kMinParallelWork) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->ParallelFor(n, fn);
}

void RmsNorm(const float* x, int64_t n, const float* w, float eps, float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w == nullptr) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  }
}

void L2Normalize(float* x, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale =
      1.0f / std::max(static_cast<float>(std::sqrt(sum)), eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

namespace {

// Which of the four position streams pair i of a multi-section rope uses.
int SectionStream(const std::array<int32_t, 4>& sections, int64_t i) {
  const int64_t total = sections[0] + sections[1] + sections[2] + sections[3];
  const int64_t s = total > 0 ? i % total : i;
  if (s % 3 == 1 && s < 3 * sections[1]) return 1;
  if (s % 3 == 2 && s < 3 * sections[2]) return 2;
  if (s % 3 == 0 && s < 3 * sections[0]) return 0;
  return 3;
}

}  // namespace

void RopeAngles(const RopeConfig& config, const std::array<int32_t, 4>& pos,
                float* cos_out, float* sin_out) {
  const int64_t half = config.n_rot / 2;
  const float theta_scale =
      std::pow(config.freq_base, -2.0f / static_cast<float>(config.n_rot));
  // One running theta per stream, each multiplied at every pair, so pair i's
  // angle is pos * theta_scale^i rounded as ggml rounds it.
  std::array<float, 4> theta;
  for (int s = 0; s < 4; ++s) theta[s] = static_cast<float>(pos[s]);
  for (int64_t i = 0; i < half; ++i) {
    const int stream =
        config.multi_section ? SectionStream(config.sections, i) : 0;
    cos_out[i] = std::cos(theta[stream]);
    sin_out[i] = std::sin(theta[stream]);
    for (float& t : theta) t *= theta_scale;
  }
}

void ApplyRope(float* head, int64_t n_rot, const float* cos_v,
               const float* sin_v) {
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float x0 = head[i];
    const float x1 = head[i + half];
    head[i] = x0 * cos_v[i] - x1 * sin_v[i];
    head[i + half] = x0 * sin_v[i] + x1 * cos_v[i];
  }
}

}  // namespace sluice
