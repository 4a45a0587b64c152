// The latent attention's device code (mla_device.h), compiled by g++ and run
// on the CPU through host_emulation.h (every thread of a block a fiber),
// against the arithmetic of model/mla.cc's AttendLatent written here with
// kernels/cpu/half_acc.h: half queries and cache rows, one pass with a
// running maximum, the value accumulator rounded to half after every
// update; the scores summed in the warp's order, so every value must be
// the reference's bit for bit (on the GPU, where the CPU's scores are
// summed in another order, a half rounding flips here and there; the sm90
// test measures that against RunMla). Runs in every configuration (no CUDA
// needed).
#include "kernels/cuda/host_emulation.h"  // first: CUDA's built-ins for g++

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/half_acc.h"
#include "kernels/cuda/mla_device.h"

namespace sluice::cuda {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// q . row summed as the kernel's warp sums it (lane l takes elements l,
// l + 32, ...; then the xor butterfly), so that the scores, hence every
// value, are the kernel's bit for bit under emulation (g++ does not fuse).
float WarpOrderDot(const float* q, const float* row, int width) {
  float lane[32];
  for (int l = 0; l < 32; ++l) {
    float acc = 0.0f;
    for (int i = l; i < width; i += 32) acc += q[i] * row[i];
    lane[l] = acc;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float next[32];
    for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ o];
    std::copy_n(next, 32, lane);
  }
  return lane[0];
}

// AttendLatent's arithmetic for one query (half values already) over
// n_ctx rows, with the scores summed in the kernel's order.
std::vector<float> Reference(const float* q, const float* cache, int width, int lat, int n_ctx,
                             float scale) {
  std::vector<float> acc(lat, 0.0f), o(lat);
  float sum = 0.0f, max_s = -INFINITY;
  for (int j = 0; j < n_ctx; ++j) {
    const float* row = cache + static_cast<int64_t>(j) * width;
    const float s = WarpOrderDot(q, row, width) * scale;
    float ms = 1.0f, vs = 1.0f;
    if (s > max_s) {
      ms = std::exp(max_s - s);
      max_s = s;
      EXPECT_TRUE(kernels::ScaleHalfAcc(acc.data(), lat, ms));
    } else {
      vs = std::exp(s - max_s);
    }
    EXPECT_TRUE(kernels::MadHalfAcc(acc.data(), row, lat, vs));
    sum = sum * ms + vs;
  }
  for (int i = 0; i < lat; ++i) o[i] = acc[i] * (1.0f / sum);
  return o;
}

// 11 heads (a full and a partial block of 8), a latent of 300 (two values
// a thread), 3 query tokens at positions 36..38 (two chunks of keys).
TEST(MlaAttendEmulationTest, MatchesTheCpuHalfAccumulator) {
  MlaShape s;
  s.n_head = 11;
  s.kv_lora_rank = 300;
  s.head_k = 48;
  s.head_v = 16;
  s.rope.n_rot = 16;
  s.kq_scale = 0.07f;
  const int width = s.width(), lat = s.kv_lora_rank, n_tok = 3, pos0 = 36;
  const int n_rows = pos0 + n_tok;
  std::vector<float> cache = Random(static_cast<size_t>(n_rows) * width, 1, 1.0f);
  kernels::RoundToHalf(cache.data(), static_cast<int64_t>(cache.size()));
  const std::vector<float> q_abs = Random(static_cast<size_t>(s.n_head) * n_tok * width, 2, 1.0f);
  std::vector<float> o(static_cast<size_t>(s.n_head) * n_tok * lat, -1.0f);
  const int32_t pos = pos0;
  const internal::OneSeq loc{&pos, cache.data()};
  dim3 grid;
  grid.x = n_tok;
  grid.y = (s.n_head + internal::kHeadsPerBlock - 1) / internal::kHeadsPerBlock;
  emulation::Launch(grid, internal::kThreads, [&] {
    internal::MlaAttendBlock(s, q_abs.data(), loc, n_tok, o.data(),
                             reinterpret_cast<float*>(emulation::DynamicShared()));
  });
  double max_diff = 0, max_ref = 0;
  int differ = 0;
  for (int h = 0; h < s.n_head; ++h) {
    for (int t = 0; t < n_tok; ++t) {
      std::vector<float> q(q_abs.begin() + (static_cast<int64_t>(h) * n_tok + t) * width,
                           q_abs.begin() + (static_cast<int64_t>(h) * n_tok + t + 1) * width);
      kernels::RoundToHalf(q.data(), width);
      const std::vector<float> want =
          Reference(q.data(), cache.data(), width, lat, pos0 + t + 1, s.kq_scale);
      const float* got = o.data() + (static_cast<int64_t>(h) * n_tok + t) * lat;
      for (int i = 0; i < lat; ++i) {
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
        max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
        differ += got[i] != want[i];
      }
    }
  }
  std::printf("MlaAttend (emulated) vs the CPU's half accumulator: %d of %d values differ, "
              "max |diff| / max |ref| = %.3g\n",
              differ, s.n_head * n_tok * lat, max_diff / max_ref);
  EXPECT_EQ(differ, 0);
}

}  // namespace
}  // namespace sluice::cuda
