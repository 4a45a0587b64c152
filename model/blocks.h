// Element-wise and row-wise building blocks shared by the architectures:
// projections through the CPU matmul, RMSNorm, L2 norm, activations, RoPE.
//
// Numerics follow ggml's CPU backend, which produced the llama.cpp goldens:
// norm sums are accumulated in double, RoPE angles are built by repeated
// multiplication of theta by base^(-2/n_rot) in f32, and every product with
// a quantized weight quantizes the activations first (kernels/cpu/matvec.h).
//
// Thread-safety: all functions are reentrant; the pool serializes loops.
#ifndef SLUICE_MODEL_BLOCKS_H_
#define SLUICE_MODEL_BLOCKS_H_

#include <array>
#include <cmath>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/thread_pool.h"
#include "kernels/cpu/f32_ops.h"
#include "kernels/cpu/matvec.h"
#include "model/weights.h"

namespace sluice {

// Products smaller than this many multiply-adds run on the calling thread.
// The pool's workers poll between the back-to-back loops of a step, so a
// loop starts in about a microsecond; 2^14 multiply-adds take a few
// microseconds. Measured 2026-11-30 on the 2-core development machine
// (AMD EPYC, 2 threads): 2^14 beat 2^16 .. 2^20 on decode of every golden
// model (e.g. qwen35moe-tiny-q8_0 1509 vs 831 tok/s at 2^20).
inline constexpr int64_t kMinParallelMatMulWork = 1 << 14;

// y[t][r] = sum_c W[r][c] x[t][c] for n_tok rows of x ([n_tok][w.cols]);
// y is [n_tok][w.rows]. Errors are the kernel's.
absl::Status Project(const Matrix& w, const float* x, int64_t n_tok, float* y,
                     ThreadPool* pool);

// Project on activations prepared for w's type (kernels::MatMulPrepared);
// bit for bit Project on the x they came from.
absl::Status ProjectPrepared(const Matrix& w,
                             const kernels::PreparedActivations& act, float* y,
                             ThreadPool* pool);

// ys[i] = Project(*ws[i], x, n_tok) for every i, x converted once per
// activation format instead of once per product.
absl::Status ProjectShared(absl::Span<const Matrix* const> ws, const float* x,
                           int64_t n_tok, absl::Span<float* const> ys,
                           ThreadPool* pool);

// Runs fn over [0, n) split across the pool; inline when pool is null or
// the loop's estimated total `work` (multiply-adds) is below
// kMinParallelWork, where waking the workers costs more than it saves
// (same measurement as kMinParallelMatMulWork).
inline constexpr int64_t kMinParallelWork = 1 << 14;
void ParallelRange(ThreadPool* pool, int64_t n, int64_t work,
                   absl::FunctionRef<void(int64_t, int64_t)> fn);

// sum_i a[i] * b[i] in f32 with eight interleaved partial sums
// (kernels/cpu/f32_ops.h's lane order; SIMD where the CPU has it, same
// bits everywhere).
inline float Dot(const float* a, const float* b, int64_t n) {
  return kernels::DotLanes(a, b, n);
}

// y[i] += a * x[i].
inline void Axpy(float a, const float* x, float* y, int64_t n) {
  kernels::AxpyF32(a, x, y, n);
}

// One product of a single-token step: y = W x (x has w->cols floats, y
// w->rows).
struct RowJob {
  const Matrix* w;
  const float* x;
  float* y;
};

// Runs independent single-token products in ONE parallel loop: the rows of
// all jobs are concatenated and split evenly over the pool, each share
// computed by MatMul on the calling worker. A decode step thereby wakes the
// pool once for, say, the gate and up products of all chosen experts instead
// of twice per expert. Each output row is computed exactly as by Project
// (same kernel, same order), so results do not depend on the split.
absl::Status ProjectRows(absl::Span<const RowJob> jobs,
                         ThreadPool* pool);

// y = x / sqrt(mean(x^2) + eps) * w over n elements (w may be null: no
// scale). y may alias x.
void RmsNorm(const float* x, int64_t n, const float* w, float eps, float* y);

// x = x / max(||x||, eps), in place.
void L2Normalize(float* x, int64_t n, float eps);

inline float Silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// log(1 + e^x), linear above 20 as ggml does.
inline float Softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// Rotary position embedding of the first n_rot dims of a head, NEOX style:
// pair i (0 <= i < n_rot/2) is the dims (i, i + n_rot/2), rotated by
// pos * base^(-2i/n_rot). Dims n_rot.. pass through.
//
// Multi-section (qwen35moe's IMROPE, "interleaved"): each pair takes its
// position from one of four streams (t, h, w, e). With S = sum(sections)
// and s = i mod S, pair i uses stream h if s mod 3 == 1 and s < 3*sections[1],
// w if s mod 3 == 2 and s < 3*sections[2], t if s mod 3 == 0 and
// s < 3*sections[0], and e otherwise. Text feeds positions (p, p, p, 0).
struct RopeConfig {
  int64_t n_rot = 0;
  float freq_base = 10000.0f;
  bool multi_section = false;
  std::array<int32_t, 4> sections = {0, 0, 0, 0};
};

// The four position streams of a text token at position p.
inline std::array<int32_t, 4> TextPositions(int32_t p) { return {p, p, p, 0}; }

// cos/sin of each of the n_rot/2 pairs for one token. For NEOX rope only
// pos[0] is used. cos_out and sin_out hold n_rot/2 floats.
void RopeAngles(const RopeConfig& config, const std::array<int32_t, 4>& pos,
                float* cos_out, float* sin_out);

// Rotates one head in place with angles from RopeAngles.
void ApplyRope(float* head, int64_t n_rot, const float* cos_v,
               const float* sin_v);

}  // namespace sluice

#endif  // SLUICE_MODEL_BLOCKS_H_
