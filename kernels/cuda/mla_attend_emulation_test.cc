// The latent attention's device code (mla_device.h), compiled by g++ and run
// on the CPU through host_emulation.h (every thread of a block a fiber):
// against the attention in double precision over the same half queries and
// cache rows (the kernel accumulates in f32, rescaled once a chunk), against
// model/mla.cc's AttendLatent arithmetic (one half-precision accumulator
// through every key, written here with kernels/cpu/half_acc.h) within that
// accumulator's rounding, and the split over blocks against the in-block
// merge bit for bit. Runs in every configuration (no CUDA needed).
#include "kernels/cuda/host_emulation.h"  // first: CUDA's built-ins for g++

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/half_acc.h"
#include "kernels/cuda/mla_device.h"
#include "kernels/cuda/mla_mma_device.h"

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

// The attention in double precision over the half queries and rows.
std::vector<double> Exact(const MlaShape& s, const std::vector<float>& q_abs,
                          const std::vector<float>& cache, int pos0, int n_tok) {
  const int width = s.width(), lat = s.kv_lora_rank;
  std::vector<double> o(static_cast<size_t>(s.n_head) * n_tok * lat, 0.0);
  for (int h = 0; h < s.n_head; ++h) {
    for (int t = 0; t < n_tok; ++t) {
      std::vector<float> q(q_abs.begin() + (static_cast<int64_t>(h) * n_tok + t) * width,
                           q_abs.begin() + (static_cast<int64_t>(h) * n_tok + t + 1) * width);
      kernels::RoundToHalf(q.data(), width);
      const int n_ctx = pos0 + t + 1;
      std::vector<double> sc(n_ctx);
      double m = -INFINITY, total = 0;
      for (int j = 0; j < n_ctx; ++j) {
        double dot = 0;
        for (int i = 0; i < width; ++i) dot += double{q[i]} * cache[int64_t{j} * width + i];
        sc[j] = dot * s.kq_scale;
        m = std::max(m, sc[j]);
      }
      double* out = o.data() + (static_cast<int64_t>(h) * n_tok + t) * lat;
      for (int j = 0; j < n_ctx; ++j) {
        const double w = std::exp(sc[j] - m);
        total += w;
        for (int i = 0; i < lat; ++i) out[i] += w * cache[int64_t{j} * width + i];
      }
      for (int i = 0; i < lat; ++i) out[i] /= total;
    }
  }
  return o;
}

// 11 heads (a full and a partial block of 8), a latent of 300 (two values
// a thread).
// TestShape's kv_lora_rank, and the latent values a thread owns for it as
// mla_ops.cu launches (2; MlaAttendBlock<4> takes up to 1,024).
constexpr int kLat = 300;
constexpr int kE = internal::ElemsFor(kLat);
static_assert(kE == 2);

MlaShape TestShape() {
  MlaShape s;
  s.n_head = 11;
  s.kv_lora_rank = kLat;
  s.head_k = 48;
  s.head_v = 16;
  s.rope.n_rot = 16;
  s.kq_scale = 0.07f;
  return s;
}

// The cache rows 0..pos0 + n_tok (random half values) and the absorbed
// queries of n_tok tokens (q_scale their spread), from seeds seed, seed + 1.
struct Inputs {
  std::vector<float> cache, q_abs;
};
Inputs MakeInputs(const MlaShape& s, int pos0, int n_tok, uint32_t seed, float q_scale) {
  const size_t width = s.width();
  Inputs in{Random((pos0 + n_tok) * width, seed, 1.0f),
            Random(static_cast<size_t>(s.n_head) * n_tok * width, seed + 1, q_scale)};
  kernels::RoundToHalf(in.cache.data(), static_cast<int64_t>(in.cache.size()));
  return in;
}

// 3 query tokens at positions 36..38 (two chunks of keys).
TEST(MlaAttendEmulationTest, IsTheAttentionInF32) {
  constexpr int E = kE;
  const MlaShape s = TestShape();
  const int width = s.width(), lat = s.kv_lora_rank, n_tok = 3, pos0 = 36;
  auto [cache, q_abs] = MakeInputs(s, pos0, n_tok, 1, 1.0f);
  std::vector<float> o(static_cast<size_t>(s.n_head) * n_tok * lat, -1.0f);
  const int32_t pos = pos0;
  const internal::OneSeq loc{&pos, cache.data()};
  dim3 grid;
  grid.x = n_tok;
  grid.y = (s.n_head + internal::kHeadsPerBlock - 1) / internal::kHeadsPerBlock;
  emulation::Launch(grid, internal::kThreads, [&] {
    internal::MlaAttendBlock<E>(s, q_abs.data(), loc, n_tok, o.data(),
                             reinterpret_cast<float*>(emulation::DynamicShared()));
  });
  const std::vector<double> exact = Exact(s, q_abs, cache, pos0, n_tok);
  double exact_diff = 0, cpu_diff = 0, max_ref = 0;
  for (int h = 0; h < s.n_head; ++h) {
    for (int t = 0; t < n_tok; ++t) {
      std::vector<float> q(q_abs.begin() + (static_cast<int64_t>(h) * n_tok + t) * width,
                           q_abs.begin() + (static_cast<int64_t>(h) * n_tok + t + 1) * width);
      kernels::RoundToHalf(q.data(), width);
      const std::vector<float> cpu =
          Reference(q.data(), cache.data(), width, lat, pos0 + t + 1, s.kq_scale);
      const int64_t at = (static_cast<int64_t>(h) * n_tok + t) * lat;
      for (int i = 0; i < lat; ++i) {
        exact_diff = std::max(exact_diff, std::fabs(o[at + i] - exact[at + i]));
        cpu_diff = std::max(cpu_diff, std::fabs(static_cast<double>(o[at + i]) - cpu[i]));
        max_ref = std::max(max_ref, std::fabs(exact[at + i]));
      }
    }
  }
  std::printf("MlaAttend (emulated), max |diff| / max |ref|: against exact %.3g, against the "
              "CPU's half accumulator %.3g\n",
              exact_diff / max_ref, cpu_diff / max_ref);
  EXPECT_GT(max_ref, 0.01);
  EXPECT_LT(exact_diff / max_ref, 2e-6);
  EXPECT_LT(cpu_diff / max_ref, 2e-3);
}

// MlaCombineBlock over every (token, head): the partials of `splits`
// ranges merged into o.
void Combine(const MlaShape& s, const std::vector<float>& part, int splits, int n_tok,
             std::vector<float>& o) {
  dim3 merge;
  merge.x = n_tok;
  merge.y = s.n_head;
  emulation::Launch(merge, internal::kThreads,
                    [&] { internal::MlaCombineBlock(s, part.data(), splits, n_tok, o.data()); });
}

// The split of MlaAttend (mla_ops.h): each row's keys in ranges of
// split_len, each range's block writing a partial, MlaCombineBlock merging
// them. n_tok rows at positions pos0.. over a cache of `capacity`; returns
// o ([n_head][n_tok][lat]).
template <int E = kE>
std::vector<float> RunSplit(const MlaShape& s, const std::vector<float>& q_abs,
                            const std::vector<float>& cache, int pos0, int n_tok, int capacity) {
  const int lat = s.kv_lora_rank;
  const int split_len = MlaSplitKeys(capacity);
  const int splits = (capacity + split_len - 1) / split_len;
  std::vector<float> part(MlaAttendScratchFloats(s.n_head, lat, n_tok), std::nanf(""));
  std::vector<float> o(static_cast<size_t>(s.n_head) * n_tok * lat, -1.0f);
  const int32_t pos = pos0;
  const internal::OneSeq loc{&pos, const_cast<float*>(cache.data())};
  dim3 grid;
  grid.x = n_tok;
  grid.y = (s.n_head + internal::kHeadsPerBlock - 1) / internal::kHeadsPerBlock;
  grid.z = splits;
  emulation::Launch(grid, internal::kThreads, [&] {
    internal::MlaAttendBlock<E, internal::OneSeq>(
        s, q_abs.data(), loc, n_tok, o.data(),
        reinterpret_cast<float*>(emulation::DynamicShared()), part.data(), split_len);
  });
  Combine(s, part, splits, n_tok, o);
  return o;
}

// Without scratch: each block merges its rows' ranges of split_len itself
// (0: one pass over every key).
template <int E = kE>
std::vector<float> RunWhole(const MlaShape& s, const std::vector<float>& q_abs,
                            const std::vector<float>& cache, int pos0, int n_tok,
                            int split_len = 0) {
  std::vector<float> o(static_cast<size_t>(s.n_head) * n_tok * s.kv_lora_rank, -1.0f);
  const int32_t pos = pos0;
  const internal::OneSeq loc{&pos, const_cast<float*>(cache.data())};
  dim3 grid;
  grid.x = n_tok;
  grid.y = (s.n_head + internal::kHeadsPerBlock - 1) / internal::kHeadsPerBlock;
  emulation::Launch(grid, internal::kThreads, [&] {
    internal::MlaAttendBlock<E, internal::OneSeq>(
        s, q_abs.data(), loc, n_tok, o.data(),
        reinterpret_cast<float*>(emulation::DynamicShared()), nullptr, split_len);
  });
  return o;
}

TEST(MlaSplitTest, RangesFollowTheCapacity) {
  EXPECT_EQ(MlaSplitKeys(0), kMlaMinSplitKeys);
  EXPECT_EQ(MlaSplitKeys(1000), 64);      // 16 ranges; 64 of 16 would be shorter than 64
  EXPECT_EQ(MlaSplitKeys(4096), 64);
  EXPECT_EQ(MlaSplitKeys(20000), 320);    // 313 a range, rounded up to chunks of 32
  EXPECT_EQ(MlaSplitKeys(131072), 2048);  // 64 ranges
  EXPECT_EQ(MlaAttendScratchFloats(64, 512, 1), int64_t{kMlaMaxSplits} * 64 * 514);
  EXPECT_EQ(MlaAttendScratchFloats(64, 512, 100), int64_t{kMlaMaxSplits} * 64 * 8 * 514);
}

// Rows of 37..39 keys, a cache of 20,000 (ranges of 320): the first range
// holds every key, the 62 others are empty, and the merge gives the
// one pass's values bit for bit.
TEST(MlaSplitTest, AContextWithinOneRangeIsTheUnsplitValues) {
  const MlaShape s = TestShape();
  const int n_tok = 3, pos0 = 36;
  const auto [cache, q_abs] = MakeInputs(s, pos0, n_tok, 3, 1.0f);
  const std::vector<float> split = RunSplit(s, q_abs, cache, pos0, n_tok, 20000);
  const std::vector<float> whole = RunWhole(s, q_abs, cache, pos0, n_tok);
  int differ = 0;
  for (size_t i = 0; i < whole.size(); ++i) differ += split[i] != whole[i];
  EXPECT_EQ(differ, 0);
}

// Rows of 701..703 keys in ranges of 320 (three non-empty, 60 empty): the
// split over blocks and the blocks merging their own ranges give the same
// bits (a row's values do not depend on whether its batch was split), and
// both the attention as one pass does, to f32's rounding.
TEST(MlaSplitTest, ASplitContextIsTheInBlockMergeAndExact) {
  const MlaShape s = TestShape();
  const int n_tok = 3, pos0 = 700;
  const auto [cache, q_abs] = MakeInputs(s, pos0, n_tok, 5, 0.3f);
  const std::vector<float> split = RunSplit(s, q_abs, cache, pos0, n_tok, 20000);
  const std::vector<float> ranges =
      RunWhole(s, q_abs, cache, pos0, n_tok, MlaSplitKeys(20000));
  const std::vector<float> whole = RunWhole(s, q_abs, cache, pos0, n_tok);
  const std::vector<double> exact = Exact(s, q_abs, cache, pos0, n_tok);
  int differ = 0;
  double split_err = 0, whole_err = 0, max_ref = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    ASSERT_TRUE(std::isfinite(split[i])) << i;
    differ += split[i] != ranges[i];
    split_err = std::max(split_err, std::fabs(split[i] - exact[i]));
    whole_err = std::max(whole_err, std::fabs(whole[i] - exact[i]));
    max_ref = std::max(max_ref, std::fabs(exact[i]));
  }
  std::printf("MlaAttend vs exact, max |diff| / max |ref|: split in 3 of 63 ranges %.3g, one "
              "pass %.3g\n",
              split_err / max_ref, whole_err / max_ref);
  EXPECT_EQ(differ, 0);
  EXPECT_GT(max_ref, 0.01);
  EXPECT_LT(split_err / max_ref, 2e-6);
  EXPECT_LT(whole_err / max_ref, 2e-6);
}

// Four latent values a thread (the kernel for ranks past 512) and two give
// the same bits: a value's accumulator adds its keys in the same order
// whichever thread slot holds it. 701..703 keys, split and whole.
TEST(MlaSplitTest, ValuesAThreadDoNotChangeTheBits) {
  const MlaShape s = TestShape();
  const int n_tok = 3, pos0 = 700;
  const auto [cache, q_abs] = MakeInputs(s, pos0, n_tok, 7, 0.3f);
  const auto two = RunSplit<2>(s, q_abs, cache, pos0, n_tok, 20000);
  const auto four = RunSplit<internal::kElemsPerThread>(s, q_abs, cache, pos0, n_tok, 20000);
  const auto two_whole = RunWhole<2>(s, q_abs, cache, pos0, n_tok);
  const auto four_whole = RunWhole<internal::kElemsPerThread>(s, q_abs, cache, pos0, n_tok);
  int differ = 0;
  for (size_t i = 0; i < two.size(); ++i) {
    differ += two[i] != four[i];
    differ += two_whole[i] != four_whole[i];
  }
  EXPECT_EQ(differ, 0);
  EXPECT_NE(two, two_whole);  // the split's merge rounds differently: the pair is not trivial
}

// A shape of the tensor-core attention (mla_mma_device.h): 20 heads (a
// whole m16 tile and a partial one), a latent of 256 (two n8 tiles a warp),
// a width of 288 (18 k16 steps).
MlaShape MmaShape() {
  MlaShape s;
  s.n_head = 20;
  s.kv_lora_rank = 256;
  s.head_k = 64;
  s.head_v = 16;
  s.rope.n_rot = 32;
  s.kq_scale = 0.07f;
  return s;
}

// The tensor-core attention of n_tok rows at positions pos0..: with
// splits > 0, a block a range of split_len keys and MlaCombineBlock merging
// them (as mla_ops.cu launches it with scratch); else each block merging
// its rows' ranges of split_len itself (0: one pass).
std::vector<float> RunMma(const MlaShape& s, const std::vector<float>& q_abs,
                          const std::vector<float>& cache, int pos0, int n_tok, int split_len,
                          int splits, int heads_per_block = internal::kMlaMmaHeads) {
  EXPECT_TRUE(internal::MlaMmaShapeOk(s));
  EXPECT_LE(internal::MlaMmaSharedBytes(s.width()), 256 << 10);  // the emulation's
  std::vector<float> part(splits > 0 ? MlaAttendScratchFloats(s.n_head, s.kv_lora_rank, n_tok) : 0,
                          std::nanf(""));
  std::vector<float> o(static_cast<size_t>(s.n_head) * n_tok * s.kv_lora_rank, -1.0f);
  const int32_t pos = pos0;
  const internal::OneSeq loc{&pos, const_cast<float*>(cache.data())};
  dim3 grid;
  grid.x = n_tok;
  grid.y = (s.n_head + heads_per_block - 1) / heads_per_block;
  grid.z = splits > 0 ? splits : 1;
  emulation::Launch(grid, internal::kMlaMmaThreads, [&] {
    internal::MlaMmaAttendBlock(s, q_abs.data(), loc, n_tok, o.data(),
                                reinterpret_cast<uint32_t*>(emulation::DynamicShared()),
                                splits > 0 ? part.data() : nullptr, split_len, heads_per_block);
  });
  if (splits > 0) Combine(s, part, splits, n_tok, o);
  return o;
}

// max |a - exact| / max |exact|.
double RelToExact(const std::vector<float>& a, const std::vector<double>& exact) {
  double diff = 0, max_ref = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - exact[i]));
    max_ref = std::max(max_ref, std::fabs(exact[i]));
  }
  EXPECT_GT(max_ref, 0.01);
  return diff / max_ref;
}

// Rows of 151 and 152 keys (three chunks of 64, the last short) in one
// pass: the attention to f32's rounding, as the f32 kernel is, with
// scores spread enough that most weights are far below the largest (the
// weights' second half matters).
TEST(MlaMmaEmulationTest, IsTheAttentionToF32) {
  const MlaShape s = MmaShape();
  const int n_tok = 2, pos0 = 150;
  const auto [cache, q_abs] = MakeInputs(s, pos0, n_tok, 11, 0.5f);
  const auto mma = RunMma(s, q_abs, cache, pos0, n_tok, 0, 0);
  const auto f32 = RunWhole(s, q_abs, cache, pos0, n_tok);
  const std::vector<double> exact = Exact(s, q_abs, cache, pos0, n_tok);
  const double mma_err = RelToExact(mma, exact), f32_err = RelToExact(f32, exact);
  std::printf("MlaMmaAttendBlock (emulated) vs exact %.3g, the f32 kernel %.3g\n", mma_err,
              f32_err);
  EXPECT_LT(mma_err, 2e-6);
  EXPECT_LT(f32_err, 2e-6);
}

// Rows of 151 and 152 keys in ranges of 64 (a cache of 4,096): split over
// blocks and merged by MlaCombineBlock, or merged in each block (through
// o_lat), the same bits; both the attention to f32's rounding.
TEST(MlaMmaEmulationTest, ASplitContextIsTheInBlockMerge) {
  const MlaShape s = MmaShape();
  const int n_tok = 2, pos0 = 150, split_len = MlaSplitKeys(4096);
  ASSERT_EQ(split_len, 64);
  const auto [cache, q_abs] = MakeInputs(s, pos0, n_tok, 13, 0.3f);
  const auto split = RunMma(s, q_abs, cache, pos0, n_tok, split_len, 4096 / split_len);
  const auto ranges = RunMma(s, q_abs, cache, pos0, n_tok, split_len, 0);
  int differ = 0;
  for (size_t i = 0; i < split.size(); ++i) differ += split[i] != ranges[i];
  EXPECT_EQ(differ, 0);
  const double err = RelToExact(split, Exact(s, q_abs, cache, pos0, n_tok));
  std::printf("MlaMmaAttendBlock (emulated), 3 of 64 ranges, vs exact %.3g\n", err);
  EXPECT_LT(err, 2e-6);
}

// 16 or 32 heads a block (a short context's launch) give every head the
// bits of 64 a block, split over ranges and merged in the block; 20 heads
// leave the second block of 16 a partial m tile, the only one of 32 or 64
// too.
TEST(MlaMmaEmulationTest, FewerHeadsABlockAreTheBitsOfSixtyFour) {
  const MlaShape s = MmaShape();
  const int n_tok = 2, pos0 = 150, split_len = MlaSplitKeys(4096);
  const auto [cache, q_abs] = MakeInputs(s, pos0, n_tok, 17, 0.3f);
  for (const int splits : {4096 / split_len, 0}) {
    const auto wide = RunMma(s, q_abs, cache, pos0, n_tok, split_len, splits, 64);
    for (const int heads : {16, 32}) {
      const auto narrow = RunMma(s, q_abs, cache, pos0, n_tok, split_len, splits, heads);
      ASSERT_EQ(wide.size(), narrow.size());
      int differ = 0;
      for (size_t i = 0; i < wide.size(); ++i) {
        differ += std::memcmp(&wide[i], &narrow[i], sizeof(float)) != 0;
      }
      EXPECT_EQ(differ, 0) << "splits " << splits << ", " << heads << " heads";
      EXPECT_LT(RelToExact(narrow, Exact(s, q_abs, cache, pos0, n_tok)), 2e-6);
    }
  }
}

// With the switch on, the launch takes the fewest of 16, 32 and 64 heads a
// block whose blocks fit in one wave of kMlaMmaOneWave (132).
TEST(MlaMmaHeadsTest, FewHeadsOnlyWhileOneWaveHoldsTheBlocks) {
  MlaShape s;
  s.n_head = 64;
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 1, 11, true), 16);   // 656 keys: 44 blocks
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 1, 33, true), 16);   // 132 blocks
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 1, 34, true), 32);   // 136 at 16: 68 at 32
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 1, 45, true), 32);   // 4,240 keys: 90 blocks
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 1, 58, true), 32);   // 16,528 keys: 116
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 1, 66, true), 32);   // 132 blocks
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 1, 67, true), 64);   // 134 at 32
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 2, 45, true), 64);   // two rows
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 1, 11, false), 64);  // switched off
  s.n_head = 128;  // two groups of 64
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 1, 16, true), 16);
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 1, 17, true), 32);
  EXPECT_EQ(internal::MlaMmaHeadsPerBlock(s, 1, 34, true), 64);
}

}  // namespace
}  // namespace sluice::cuda
