#include "kernels/cpu/matvec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matvec_internal.h"
#include "kernels/cpu/test_util.h"

namespace sluice::kernels {
namespace {

using internal::ActFormat;
using internal::BlockQ8_K;
using internal::Isa;
using testing_util::RandomWeights;

// Worst-case |x - x'| for one element when x is converted to `format`;
// `amax` is the largest |x| in the element's activation block.
double ActRoundingBound(ActFormat format, float x, float amax) {
  switch (format) {
    case ActFormat::kF32: return 0.0;
    case ActFormat::kF16R: return std::fabs(x) * 0x1p-11;
    case ActFormat::kBf16R: return std::fabs(x) * 0x1p-8;
    case ActFormat::kQ8_K: return amax / 254.0 * (1 + 1e-6);
    default: return amax * (1 / 254.0 + 0x1p-11) * (1 + 1e-6);  // + fp16 scale rounding
  }
}

struct Case {
  int64_t rows, cols, n_tok;
};

// Per row and token, the bound that MatMul must meet against the
// reference: sum |w| * (activation rounding) + f32 summation slack.
std::vector<double> Bounds(GgmlType t, const uint8_t* w, const float* x, const Case& c) {
  const ActFormat format = internal::ActFormatFor(t);
  // Plain types have no activation block; 32 (or the whole row) stands in.
  const int64_t block = std::min<int64_t>(c.cols, std::max(internal::ActBlock(format), 32));
  const int64_t row_bytes = *RowBytes(t, c.cols);
  std::vector<double> bounds(c.rows * c.n_tok);
  std::vector<float> wrow(c.cols);
  for (int64_t r = 0; r < c.rows; ++r) {
    EXPECT_TRUE(DequantizeRow(t, w + r * row_bytes, c.cols, wrow.data()).ok());
    for (int64_t tok = 0; tok < c.n_tok; ++tok) {
      const float* xr = x + tok * c.cols;
      double bound = 0, mag = 0;
      for (int64_t b0 = 0; b0 < c.cols; b0 += block) {
        float amax = 0;
        for (int j = 0; j < block; ++j) amax = std::max(amax, std::fabs(xr[b0 + j]));
        for (int j = 0; j < block; ++j) {
          const double wv = std::fabs(wrow[b0 + j]);
          bound += wv * ActRoundingBound(format, xr[b0 + j], amax);
          mag += wv * (std::fabs(xr[b0 + j]) + amax / 64);
        }
      }
      // f32 accumulation error is at most ~cols ulps of sum |w x|.
      bounds[tok * c.rows + r] = bound + (c.cols * 0x1p-23 + 1e-6) * mag + 1e-30;
    }
  }
  return bounds;
}

// x as MatMul sees it: converted to the partner format and decoded back.
std::vector<float> AsSeenByKernels(GgmlType t, const std::vector<float>& x, int64_t cols) {
  const ActFormat format = internal::ActFormatFor(t);
  const int64_t n_tok = static_cast<int64_t>(x.size()) / cols;
  const int64_t bytes = internal::ActRowBytes(format, cols);
  std::vector<uint8_t> buf(bytes);
  std::vector<float> out(x.size());
  for (int64_t tok = 0; tok < n_tok; ++tok) {
    internal::ConvertActivation(format, x.data() + tok * cols, cols, buf.data());
    float* dst = out.data() + tok * cols;
    switch (format) {
      case ActFormat::kQ8_0: EXPECT_TRUE(DequantizeRow(GgmlType::kQ8_0, buf.data(), cols, dst).ok()); break;
      case ActFormat::kQ8_1: EXPECT_TRUE(DequantizeRow(GgmlType::kQ8_1, buf.data(), cols, dst).ok()); break;
      case ActFormat::kQ8_K: EXPECT_TRUE(DequantizeRow(GgmlType::kQ8_K, buf.data(), cols, dst).ok()); break;
      default: std::memcpy(dst, buf.data(), cols * sizeof(float));
    }
  }
  return out;
}

// Q4_1 / Q5_1 use the Q8_1 block sum s = d * sum(q), stored in fp16:
// each block contributes m * s, off by up to |m * s| * 2^-11.
double Q8_1SumSlack(GgmlType t, const uint8_t* wrow, const float* x_seen, int64_t cols) {
  if (internal::ActFormatFor(t) != ActFormat::kQ8_1) return 0.0;
  const int block_bytes = TraitsOf(t).bytes_per_block;
  double slack = 0;
  for (int64_t b = 0; b < cols / 32; ++b) {
    uint16_t m;
    std::memcpy(&m, wrow + b * block_bytes + 2, 2);
    double sum = 0;
    for (int j = 0; j < 32; ++j) sum += x_seen[32 * b + j];
    slack += std::fabs(Fp16ToF32(m) * sum) * 0x1p-11 * 1.01;
  }
  return slack;
}

std::vector<GgmlType> MatMulTypes() {
  std::vector<GgmlType> types;
  int n = 0;
  const GgmlTypeTraits* all = AllGgmlTypes(&n);
  for (int i = 0; i < n; ++i) {
    if (IsMatMulSupported(all[i].type)) types.push_back(all[i].type);
  }
  return types;
}

constexpr Isa kIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512};

// One case computed every way: the exact reference, the reference on the
// activation as the kernels see it, MatMul with 1 and 3 threads, and each
// instruction-set level this CPU has (others copy opt1: nothing to check).
struct Results {
  std::vector<float> ref, ref_seen, opt1, opt3;
  std::vector<std::vector<float>> per_isa;
};

void ComputeAll(GgmlType t, const std::vector<uint8_t>& w, const std::vector<float>& x,
                const Case& c, ThreadPool* pool3, Results* out) {
  const size_t n = c.rows * c.n_tok;
  out->ref.resize(n);
  out->ref_seen.resize(n);
  out->opt1.resize(n);
  out->opt3.resize(n);
  ASSERT_TRUE(MatMulReference(t, w.data(), c.rows, c.cols, x.data(), c.n_tok, out->ref.data()).ok());
  const std::vector<float> x_seen = AsSeenByKernels(t, x, c.cols);
  ASSERT_TRUE(MatMulReference(t, w.data(), c.rows, c.cols, x_seen.data(), c.n_tok,
                              out->ref_seen.data())
                  .ok());
  ThreadPool pool1(1);
  ASSERT_TRUE(MatMul(t, w.data(), c.rows, c.cols, x.data(), c.n_tok, out->opt1.data(), &pool1).ok());
  ASSERT_TRUE(MatMul(t, w.data(), c.rows, c.cols, x.data(), c.n_tok, out->opt3.data(), pool3).ok());
  for (Isa isa : kIsas) {
    out->per_isa.push_back(out->opt1);
    if (!internal::IsaSupported(isa)) continue;
    ASSERT_TRUE(internal::MatMulWithIsa(isa, t, w.data(), c.rows, c.cols, x.data(), c.n_tok,
                                        out->per_isa.back().data(), pool3)
                    .ok());
  }
}

class MatMulTypedTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatMulTypedTest, OptimizedMatchesReferenceWithinActivationRounding) {
  const GgmlType t = GetParam();
  const int64_t unit = std::max<int64_t>(TraitsOf(t).block_size,
                                         internal::ActBlock(internal::ActFormatFor(t)));
  std::mt19937 rng(1234 + static_cast<int>(t));
  std::normal_distribution<float> normal(0.f, 1.f);
  const Case cases[] = {{1, unit, 1}, {7, 2 * unit, 1}, {13, 3 * unit, 3}, {33, unit, 2}};
  ThreadPool pool3(3);
  double worst_ratio = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "rows=" << c.rows << " cols=" << c.cols
                                    << " n_tok=" << c.n_tok);
    const std::vector<uint8_t> w = RandomWeights(t, c.rows, c.cols, rng);
    std::vector<float> x(c.n_tok * c.cols);
    for (float& v : x) v = normal(rng);
    Results res;
    ASSERT_NO_FATAL_FAILURE(ComputeAll(t, w, x, c, &pool3, &res));
    const std::vector<double> bounds = Bounds(t, w.data(), x.data(), c);
    const std::vector<float> x_seen = AsSeenByKernels(t, x, c.cols);
    for (size_t i = 0; i < res.ref.size(); ++i) {
      ASSERT_EQ(res.opt1[i], res.opt3[i]) << "thread count changed index " << i;
      const double err = std::fabs(static_cast<double>(res.opt1[i]) - res.ref[i]);
      ASSERT_LE(err, bounds[i]) << "index " << i << " opt " << res.opt1[i] << " ref " << res.ref[i];
      worst_ratio = std::max(worst_ratio, err / bounds[i]);
      // Against the rounded activation only float summation order (and
      // Q8_1's fp16 block sums) may differ.
      const int64_t tok = i / c.rows, r = i % c.rows;
      const double order_slack =
          1e-3 * bounds[i] + 1e-6 * std::fabs(res.ref[i]) +
          Q8_1SumSlack(t, w.data() + r * *RowBytes(t, c.cols), x_seen.data() + tok * c.cols,
                       c.cols);
      for (size_t k = 0; k < res.per_isa.size(); ++k) {
        ASSERT_NEAR(res.per_isa[k][i], res.ref_seen[i], order_slack)
            << "isa " << internal::IsaName(kIsas[k]) << " index " << i;
      }
    }
    // A batch gives exactly what one call per token gives.
    for (int64_t tok = 0; tok < c.n_tok; ++tok) {
      std::vector<float> single(c.rows);
      ASSERT_TRUE(MatMul(t, w.data(), c.rows, c.cols, x.data() + tok * c.cols, 1, single.data(),
                         &pool3)
                      .ok());
      for (int64_t r = 0; r < c.rows; ++r) ASSERT_EQ(single[r], res.opt1[tok * c.rows + r]);
    }
  }
  std::printf("%-8s isa=%s (avx2 %s, avx512 %s) worst |opt-ref| / bound = %.3f\n",
              TypeName(t).c_str(), MatMulIsa(),
              internal::IsaSupported(Isa::kAvx2) ? "checked" : "absent",
              internal::IsaSupported(Isa::kAvx512) ? "checked" : "absent", worst_ratio);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatMulTypedTest, ::testing::ValuesIn(MatMulTypes()),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return TypeName(info.param);
                         });

TEST(MatMulTest, ActivationQuantizationIsWhatMakesTheDifference) {
  // With an activation that Q8_0 represents exactly (integers times a
  // power of two, max 127), Q8_0 MatMul equals the reference exactly.
  std::mt19937 rng(7);
  const int64_t rows = 5, cols = 64;
  const std::vector<uint8_t> w = RandomWeights(GgmlType::kQ8_0, rows, cols, rng);
  std::vector<float> x(cols);
  for (int64_t c = 0; c < cols; ++c) x[c] = static_cast<float>((c * 37) % 255 - 127) * 0.25f;
  x[0] = x[32] = 127 * 0.25f;
  std::vector<float> ref(rows), opt(rows);
  ASSERT_TRUE(MatMulReference(GgmlType::kQ8_0, w.data(), rows, cols, x.data(), 1, ref.data()).ok());
  ASSERT_TRUE(MatMul(GgmlType::kQ8_0, w.data(), rows, cols, x.data(), 1, opt.data(), nullptr).ok());
  for (int64_t r = 0; r < rows; ++r) EXPECT_NEAR(opt[r], ref[r], 1e-6 * std::fabs(ref[r])) << r;
}

TEST(MatMulTest, Errors) {
  std::vector<uint8_t> w(4096);
  std::vector<float> x(512), y(64);
  absl::Status s = MatMul(GgmlType::kQ4_K, w.data(), 2, 100, x.data(), 1, y.data(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "q4_k: cols=100 is not a multiple of the block size 256");
  // The unit is the larger of the weight block and the activation block.
  s = MatMul(GgmlType::kQ1_0, w.data(), 2, 96, x.data(), 1, y.data(), nullptr);
  EXPECT_EQ(s.message(), "q1_0: cols=96 is not a multiple of the block size 128");
  s = MatMul(GgmlType::kQ8_K, w.data(), 1, 256, x.data(), 1, y.data(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "q8_k: matmul not supported");
  s = MatMulReference(GgmlType::kI32, w.data(), 1, 16, x.data(), 1, y.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  s = MatMul(GgmlType::kF32, w.data(), -1, 16, x.data(), 1, y.data(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "f32: negative shape rows=-1 cols=16 n_tok=1");
}

TEST(MatMulTest, EmptyShapes) {
  std::vector<float> y(4, 5.f);
  const float x = 1.f;
  EXPECT_TRUE(MatMul(GgmlType::kF32, nullptr, 0, 1, &x, 1, y.data(), nullptr).ok());
  EXPECT_EQ(y[0], 5.f);  // nothing written
  EXPECT_TRUE(MatMul(GgmlType::kQ8_0, nullptr, 4, 0, nullptr, 1, y.data(), nullptr).ok());
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[3], 0.f);
}

// The rule ggml's AVX quantize_row_q8_0 applies, written out plainly.
void PlainQ8_0(const float* x, int8_t* q, uint16_t* d_fp16) {
  float amax = 0.f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float id = amax != 0.f ? 127.f / amax : 0.f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
  *d_fp16 = F32ToFp16(amax / 127.f);
}

TEST(ActivationTest, Q8_0ConversionRoundsHalfToEvenAndMatchesThePlainRule) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 3.f);
  const int64_t cols = 128;
  std::vector<float> x(cols);
  for (float& v : x) v = normal(rng);
  // Block 1 scales by exactly 1 (amax 127): halves must go to even.
  for (int j = 0; j < 32; ++j) x[32 + j] = static_cast<float>(j) - 15.5f;
  x[63] = 127.f;
  std::fill(x.begin() + 64, x.begin() + 96, 0.f);  // all-zero block
  std::vector<uint8_t> buf(internal::ActRowBytes(ActFormat::kQ8_0, cols));
  internal::ConvertActivation(ActFormat::kQ8_0, x.data(), cols, buf.data());
  const auto* blocks = reinterpret_cast<const uint8_t*>(buf.data());
  for (int64_t b = 0; b < cols / 32; ++b) {
    int8_t q[32];
    uint16_t d;
    PlainQ8_0(x.data() + 32 * b, q, &d);
    uint16_t got_d;
    std::memcpy(&got_d, blocks + 34 * b, 2);
    EXPECT_EQ(got_d, d) << "block " << b;
    EXPECT_EQ(std::memcmp(blocks + 34 * b + 2, q, 32), 0) << "block " << b;
  }
  const auto* q1 = reinterpret_cast<const int8_t*>(blocks + 34 + 2);
  EXPECT_EQ(q1[0], -16);  // -15.5
  EXPECT_EQ(q1[1], -14);  // -14.5
  EXPECT_EQ(q1[15], 0);   // -0.5
  EXPECT_EQ(q1[16], 0);   // 0.5
  EXPECT_EQ(q1[17], 2);   // 1.5
}

// ggml's quantize_row_q8_K, written out plainly.
void PlainQ8_K(const float* x, BlockQ8_K* b) {
  float amax = 0.f, max = 0.f;
  for (int j = 0; j < 256; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  std::memset(b, 0, sizeof(*b));
  if (amax == 0.f) return;
  const float iscale = -127.f / max;
  for (int j = 0; j < 256; ++j) {
    b->qs[j] = static_cast<int8_t>(std::min(127.f, std::nearbyint(iscale * x[j])));
  }
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) sum += b->qs[16 * g + j];
    b->bsums[g] = static_cast<int16_t>(sum);
  }
  b->d = 1.f / iscale;
}

TEST(ActivationTest, Q8_KConversionMatchesThePlainRule) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.f, 2.f);
  const int64_t cols = 1024;
  std::vector<float> x(cols);
  for (float& v : x) v = normal(rng);
  // Block 1: the largest magnitude twice, negative first (it must win),
  // and values that land on .5 after scaling by 127 / 127.
  for (int j = 0; j < 256; ++j) x[256 + j] = static_cast<float>(j % 50) - 24.5f;
  x[256 + 3] = -127.f;
  x[256 + 9] = 127.f;
  std::fill(x.begin() + 512, x.begin() + 768, 0.f);  // all-zero block
  std::vector<uint8_t> buf(internal::ActRowBytes(ActFormat::kQ8_K, cols));
  internal::ConvertActivation(ActFormat::kQ8_K, x.data(), cols, buf.data());
  for (int64_t b = 0; b < cols / 256; ++b) {
    BlockQ8_K want;
    PlainQ8_K(x.data() + 256 * b, &want);
    EXPECT_EQ(std::memcmp(buf.data() + b * sizeof(BlockQ8_K), &want, sizeof(want)), 0)
        << "block " << b;
  }
  BlockQ8_K b1;
  std::memcpy(&b1, buf.data() + sizeof(BlockQ8_K), sizeof(b1));
  // The first extreme, -127, sets iscale = -127 / -127 = 1 (the later
  // +127 would have given -1).
  EXPECT_EQ(b1.d, 1.f);
  EXPECT_EQ(b1.qs[0], -24);  // -24.5 rounds half to even
  EXPECT_EQ(b1.qs[1], -24);  // -23.5 too
  EXPECT_EQ(b1.qs[3], -127);
  EXPECT_EQ(b1.qs[9], 127);
}

class PreparedTest : public ::testing::TestWithParam<GgmlType> {};

// Prepared activations (and gathered rows of them) give MatMul's bits, and
// every row does, whether a four-row kernel or the one-row kernel ran it.
TEST_P(PreparedTest, MatchesMatMulBitForBit) {
  const GgmlType t = GetParam();
  const int64_t unit = std::max<int64_t>(TraitsOf(t).block_size,
                                         internal::ActBlock(internal::ActFormatFor(t)));
  const int64_t rows = 11, cols = 2 * unit, n_tok = 3;
  std::mt19937 rng(99 + static_cast<int>(t));
  std::normal_distribution<float> normal(0.f, 1.f);
  const std::vector<uint8_t> w = RandomWeights(t, rows, cols, rng);
  std::vector<float> x(n_tok * cols);
  for (float& v : x) v = normal(rng);
  ThreadPool pool2(2);
  std::vector<float> want(rows * n_tok), got(rows * n_tok);
  ASSERT_TRUE(MatMul(t, w.data(), rows, cols, x.data(), n_tok, want.data(), nullptr).ok());
  PreparedActivations act;
  ASSERT_TRUE(act.Prepare(t, x.data(), cols, n_tok).ok());
  ASSERT_TRUE(act.CompatibleWith(t, cols));
  ASSERT_TRUE(MatMulPrepared(t, w.data(), rows, cols, act, got.data(), &pool2).ok());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "index " << i;
  // One row at a time never takes a four-row kernel.
  for (int64_t r = 0; r < rows; ++r) {
    float one[n_tok];
    ASSERT_TRUE(MatMul(t, w.data() + r * *RowBytes(t, cols), 1, cols, x.data(), n_tok, one,
                       nullptr)
                    .ok());
    for (int64_t tok = 0; tok < n_tok; ++tok) ASSERT_EQ(one[tok], want[tok * rows + r]);
  }
  PreparedActivations picked;
  const int64_t order[] = {2, 0};
  picked.Gather(act, order);
  EXPECT_EQ(picked.n_tok(), 2);
  std::vector<float> two(2 * rows);
  ASSERT_TRUE(MatMulPrepared(t, w.data(), rows, cols, picked, two.data(), nullptr).ok());
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(two[r], want[2 * rows + r]);
    EXPECT_EQ(two[rows + r], want[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, PreparedTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0,
                                           GgmlType::kQ1_0, GgmlType::kQ4_K, GgmlType::kQ5_K,
                                           GgmlType::kQ6_K, GgmlType::kQ4_1, GgmlType::kQ2_K),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return TypeName(info.param);
                         });

TEST(PreparedActivationsTest, RejectsAnotherFormatOrWidth) {
  std::vector<float> x(512, 0.5f), y(8);
  std::vector<uint8_t> w(4096);
  PreparedActivations act;
  EXPECT_FALSE(act.CompatibleWith(GgmlType::kQ8_0, 256));  // nothing prepared
  ASSERT_TRUE(act.Prepare(GgmlType::kQ8_0, x.data(), 256, 1).ok());
  EXPECT_TRUE(act.CompatibleWith(GgmlType::kQ4_0, 256));   // same partner format
  EXPECT_FALSE(act.CompatibleWith(GgmlType::kQ4_K, 256));  // Q8_K partner
  EXPECT_FALSE(act.CompatibleWith(GgmlType::kQ8_0, 512));
  absl::Status s = MatMulPrepared(GgmlType::kQ4_K, w.data(), 1, 256, act, y.data(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "q4_k: activations prepared for another format or width");
  s = act.Prepare(GgmlType::kQ4_K, x.data(), 100, 1);
  EXPECT_EQ(s.message(), "q4_k: cols=100 is not a multiple of the block size 256");
}

TEST(DotF32GgmlOrderTest, SumsInGgmlsAvx2Order) {
  if (!internal::IsaSupported(Isa::kAvx2)) SLUICE_SKIP("no AVX2: portable order");
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int64_t n : {256, 77}) {
    std::vector<float> a(n), b(n);
    for (float& v : a) v = normal(rng);
    for (float& v : b) v = normal(rng);
    // Four 8-lane FMA accumulators over 32-element steps, 8-element
    // leftovers into the first, (acc0 + acc1) + (acc2 + acc3), the 8 lanes
    // folded 4 + 2 + 1, then the scalar tail.
    float acc[4][8] = {};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      for (int c = 0; c < 4; ++c) {
        for (int l = 0; l < 8; ++l) {
          acc[c][l] = std::fma(a[i + 8 * c + l], b[i + 8 * c + l], acc[c][l]);
        }
      }
    }
    for (; i + 8 <= n; i += 8) {
      for (int l = 0; l < 8; ++l) acc[0][l] = std::fma(a[i + l], b[i + l], acc[0][l]);
    }
    float v[8];
    for (int l = 0; l < 8; ++l) v[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
    float s4[4];
    for (int l = 0; l < 4; ++l) s4[l] = v[l] + v[l + 4];
    float want = (s4[0] + s4[2]) + (s4[1] + s4[3]);
    for (; i < n; ++i) want += a[i] * b[i];
    EXPECT_EQ(DotF32GgmlOrder(a.data(), b.data(), n), want) << "n=" << n;
  }
}

}  // namespace
}  // namespace sluice::kernels
