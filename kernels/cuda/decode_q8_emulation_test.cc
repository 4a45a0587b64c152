// The 8-bit decode products (decode_q8.h) run on the CPU through
// host_emulation.h: the same source nvcc compiles, so a chunk's element
// layout, the sub-block scales and minimums, Q6_K's offset, Q1_0's signs
// and both vector formats are checked on every machine. Against a
// double-precision reference from the CPU dequantizer: exact (to float
// rounding) on vectors that 8 bits represent exactly, and within the
// quantization bound on any vector. The block quantizer the kernels run
// (shuffles over a block's lanes) gives the bytes of the per-group one.
#include "kernels/cuda/host_emulation.h"  // first: stands in for CUDA

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "format/ggml_type.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/decode_q8.h"

namespace sluice::cuda::internal {
namespace {

constexpr int64_t kCols = 1024;
constexpr int kRows = 4;

struct QuantizedVector {
  std::vector<int8_t> q;
  std::vector<float> d, s;
  int shift;
  Q8Vector view() const { return {q.data(), d.data(), s.data()}; }
  float step(int64_t i) const { return d[i >> shift]; }
};

// As Q8_K (256, shift 8: sums per 16) or Q8_0 (32, shift 5: a sum per group).
QuantizedVector Quantize(const std::vector<float>& x, int shift) {
  const int64_t n = static_cast<int64_t>(x.size());
  QuantizedVector v{std::vector<int8_t>(n), std::vector<float>(n >> shift),
                    std::vector<float>(shift == kQ8KShift ? n / 16 : n / 32), shift};
  auto at = [&](int64_t e) { return x[e]; };
  for (int g = 0; g < (n >> shift); ++g) {
    if (shift == kQ8KShift) {
      QuantizeGroupQ8K(at, g, v.q.data(), v.d.data(), v.s.data());
    } else {
      QuantizeGroupQ8Z(at, g, v.q.data(), v.d.data(), v.s.data());
    }
  }
  return v;
}

// The vector format the CPU backend (and the kernels) use for type t.
int ShiftFor(GgmlType t) {
  return t == GgmlType::kQ8_0 || t == GgmlType::kQ1_0 ? kQ8ZShift : kQ8KShift;
}

// The row's product with the vector, chunk by chunk as the kernels add it.
template <class T>
double Q8Row(const uint8_t* row, int64_t cols, const Q8Vector& xv) {
  double sum = 0;
  for (int64_t c = 0; c < cols / T::kChunk; ++c) {
    typename T::Raw raw;
    T::Load(row, c, raw);
    typename Q8Dot<T>::X x;
    Q8Dot<T>::Load(xv, c, x);
    sum += Q8Dot<T>::Dot(raw, x);
  }
  return sum;
}

double Q8RowOf(GgmlType t, const uint8_t* row, int64_t cols, const Q8Vector& xv) {
  switch (t) {
    case GgmlType::kQ4_K: return Q8Row<KWeights<false>>(row, cols, xv);
    case GgmlType::kQ5_K: return Q8Row<KWeights<true>>(row, cols, xv);
    case GgmlType::kQ6_K: return Q8Row<Q6KWeights>(row, cols, xv);
    case GgmlType::kQ8_0: return Q8Row<Q8_0Weights>(row, cols, xv);
    case GgmlType::kQ1_0: return Q8Row<Q1_0Weights>(row, cols, xv);
    default: ADD_FAILURE() << "no Q8Dot for " << kernels::TypeName(t); return 0;
  }
}

class DecodeQ8Test : public ::testing::TestWithParam<GgmlType> {
 protected:
  GgmlType type() const { return GetParam(); }
  int shift() const { return ShiftFor(type()); }
  void SetUp() override {
    std::mt19937 rng(17);
    bytes_ = kernels::testing_util::RandomWeights(type(), kRows, kCols, rng);
    row_bytes_ = *kernels::RowBytes(type(), kCols);
    w_.resize(kRows * kCols);
    for (int r = 0; r < kRows; ++r) {
      ASSERT_TRUE(kernels::DequantizeRow(type(), bytes_.data() + r * row_bytes_, kCols,
                                         w_.data() + r * kCols)
                      .ok());
    }
  }
  // sum_i w[r][i] x[i] and sum_i |w[r][i] x[i]| in double.
  void Reference(int r, const std::vector<float>& x, double* dot, double* abs) const {
    *dot = *abs = 0;
    for (int64_t i = 0; i < kCols; ++i) {
      *dot += static_cast<double>(w_[r * kCols + i]) * x[i];
      *abs += std::fabs(static_cast<double>(w_[r * kCols + i]) * x[i]);
    }
  }
  std::vector<uint8_t> bytes_;
  int64_t row_bytes_ = 0;
  std::vector<float> w_;
};

// x = d_g * k with integers |k| <= 127, one of them -127 per group, d_g a
// power of two (an fp16 value too): either format reproduces x exactly, so
// the 8-bit product must equal the float product up to rounding.
TEST_P(DecodeQ8Test, ExactOnVectorsThatEightBitsRepresent) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> k(-127, 127), e(-6, 3);
  std::vector<float> x(kCols);
  const int group = 1 << shift();
  for (int64_t g = 0; g < kCols / group; ++g) {
    const float d = std::ldexp(1.0f, e(rng));
    for (int i = 0; i < group; ++i) {
      x[group * g + i] = d * static_cast<float>(i == 7 ? -127 : k(rng));
    }
  }
  const QuantizedVector v = Quantize(x, shift());
  for (int64_t i = 0; i < kCols; ++i) {
    ASSERT_EQ(static_cast<float>(v.q[i]) * v.step(i), x[i]) << "element " << i;
  }
  for (int r = 0; r < kRows; ++r) {
    double dot, abs;
    Reference(r, x, &dot, &abs);
    const double got = Q8RowOf(type(), bytes_.data() + r * row_bytes_, kCols, v.view());
    EXPECT_NEAR(got, dot, 2e-6 * abs) << "row " << r;
  }
}

// Any vector: each element is off by at most half its group's step, so the
// product is off by at most sum_i |w_i| d_g / 2 plus, for the K-quants, the
// sub-block minimum's share (bounded here by 2 max|w| per element); a wrong
// element or scale layout misses by the product's own size.
TEST_P(DecodeQ8Test, WithinTheQuantizationBoundOnAnyVector) {
  std::mt19937 rng(9);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> x(kCols);
  for (float& v : x) v = n01(rng);
  const QuantizedVector v = Quantize(x, shift());
  // Q8_0's scale is rounded to fp16 after the values are (as the CPU
  // backend's): a value is off by half a step plus |q| times that rounding.
  auto error = [&](int64_t i) {
    const double step = std::fabs(v.step(i));
    return 0.5001 * step + (shift() == kQ8ZShift ? std::abs(v.q[i]) * step * 0x1p-11 : 0.0);
  };
  for (int64_t i = 0; i < kCols; ++i) {
    ASSERT_LE(std::fabs(static_cast<float>(v.q[i]) * v.step(i) - x[i]), error(i)) << i;
  }
  for (int r = 0; r < kRows; ++r) {
    double dot, abs, bound = 0, wmax = 0;
    Reference(r, x, &dot, &abs);
    for (int64_t i = 0; i < kCols; ++i) wmax = std::fmax(wmax, std::fabs(w_[r * kCols + i]));
    for (int64_t i = 0; i < kCols; ++i) bound += 2 * wmax * error(i);
    const double got = Q8RowOf(type(), bytes_.data() + r * row_bytes_, kCols, v.view());
    EXPECT_NEAR(got, dot, bound) << "row " << r;
    // The typical error is far below that bound (random signs).
    EXPECT_LT(std::fabs(got - dot), (shift() == kQ8KShift ? 0.04 : 0.02) * abs) << "row " << r;
  }
}

// The Q8_K groups take the minimum terms from the quantized sums, so a
// chunk must see the right sums there too.
TEST(DecodeQ8KTest, SumsAreTheScaledSumsOfTheQuantizedValues) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> x(512);
  for (float& v : x) v = n01(rng);
  const QuantizedVector v = Quantize(x, kQ8KShift);
  for (int c = 0; c < 32; ++c) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += v.q[16 * c + i];
    EXPECT_EQ(v.s[c], v.d[c / 16] * static_cast<float>(sum)) << "chunk " << c;
  }
  // The scale is minus the group's extreme over 127: the extreme maps to -127.
  for (int g = 0; g < 2; ++g) {
    int extreme = 0;
    for (int i = 0; i < 256; ++i) {
      if (std::fabs(x[256 * g + i]) > std::fabs(x[256 * g + extreme])) extreme = i;
    }
    EXPECT_EQ(v.q[256 * g + extreme], -127) << "group " << g;
  }
}

// Q8_0's scale is max|x| / 127 rounded to fp16 and its sums are the
// group's sums of q, as the CPU backend's block_q8_0 and Q1_0's product use.
TEST(DecodeQ8ZTest, ScaleIsHalfRoundedAndSumsAreOfTheQuantizedValues) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = 0.01f * static_cast<float>(i % 17) - 0.07f;
  x[5] = 0.3f;  // group 0's extreme
  const QuantizedVector v = Quantize(x, kQ8ZShift);
  EXPECT_EQ(v.d[0], kernels::Fp16ToF32(kernels::F32ToFp16(0.3f / 127.0f)));
  EXPECT_NE(v.d[0], 0.3f / 127.0f);  // the rounding is visible at this value
  EXPECT_EQ(v.q[5], 127);
  for (int g = 0; g < 2; ++g) {
    int sum = 0;
    for (int i = 0; i < 32; ++i) sum += v.q[32 * g + i];
    EXPECT_EQ(v.s[g], static_cast<float>(sum)) << "group " << g;
  }
}

// The block quantizer (a 128-thread block, chunks of 16 over the lanes,
// shuffles within a group) writes the bytes of the per-group reference in
// both formats, for several rows, including ties for a group's extreme
// (the first one wins, sign included) and an all-zero group.
TEST(DecodeQ8BlockTest, MatchesThePerGroupQuantizers) {
  constexpr int kVecRows = 3;
  constexpr int64_t n = 512;
  std::mt19937 rng(11);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> x(kVecRows * n);
  for (float& v : x) v = n01(rng);
  x[10] = 5.0f;
  x[200] = -5.0f;  // a tie with x[10]: x[10] is first, so iscale = -127/5
  for (int i = 256; i < 512; ++i) x[i] = 0.0f;  // row 0, group 1: all zero
  x[n + 300] = -7.0f;
  x[n + 301] = 7.0f;  // the first of the tie is negative
  std::vector<uint8_t> kq(kVecRows * Q8KBytes(n), 0xEE), zq(kVecRows * Q8ZBytes(n), 0xEE);
  emulation::Launch(dim3{1, 1, 1}, 128, [&] {
    QuantizeBlockQ8([&](int r, int64_t e) { return x[r * n + e]; }, kVecRows, n, kq.data(),
                    zq.data());
  });
  for (int r = 0; r < kVecRows; ++r) {
    const std::vector<float> row(x.begin() + r * n, x.begin() + (r + 1) * n);
    const QuantizedVector k = Quantize(row, kQ8KShift), z = Quantize(row, kQ8ZShift);
    const Q8Vector kv = Q8KAt(kq.data() + r * Q8KBytes(n), n);
    const Q8Vector zv = Q8ZAt(zq.data() + r * Q8ZBytes(n), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(kv.q[i], k.q[i]) << "row " << r << " Q8_K element " << i;
      ASSERT_EQ(zv.q[i], z.q[i]) << "row " << r << " Q8_0 element " << i;
    }
    for (int g = 0; g < n / 256; ++g) EXPECT_EQ(kv.d[g], k.d[g]) << "row " << r << " group " << g;
    for (int c = 0; c < n / 16; ++c) EXPECT_EQ(kv.s[c], k.s[c]) << "row " << r << " chunk " << c;
    for (int g = 0; g < n / 32; ++g) {
      EXPECT_EQ(zv.d[g], z.d[g]) << "row " << r << " group " << g;
      EXPECT_EQ(zv.s[g], z.s[g]) << "row " << r << " group " << g;
    }
  }
  EXPECT_EQ(Q8KAt(kq.data(), n).q[10], -127);
  EXPECT_EQ(Q8KAt(kq.data(), n).q[200], 127);
  EXPECT_EQ(Q8KAt(kq.data(), n).d[1], 0.0f);
  EXPECT_EQ(Q8KAt(kq.data() + Q8KBytes(n), n).q[300], -127);
}

// The same comparison at other shapes: one row (no row index computed), a
// row of chunks that is not a power of two (768 / 16 = 48: a division), and
// more rows than a block has threads' worth of one pass.
TEST(DecodeQ8BlockTest, MatchesThePerGroupQuantizersAtOtherShapes) {
  struct Shape {
    int rows;
    int64_t n;
  };
  for (const Shape& sh : {Shape{1, 512}, Shape{1, 7168}, Shape{3, 768}, Shape{5, 1280}}) {
    std::mt19937 rng(static_cast<uint32_t>(sh.rows * 100000 + sh.n));
    std::normal_distribution<float> n01(0.0f, 1.0f);
    std::vector<float> x(sh.rows * sh.n);
    for (float& v : x) v = n01(rng);
    std::vector<uint8_t> kq(sh.rows * Q8KBytes(sh.n), 0xEE), zq(sh.rows * Q8ZBytes(sh.n), 0xEE);
    emulation::Launch(dim3{1, 1, 1}, 128, [&] {
      QuantizeBlockQ8([&](int r, int64_t e) { return x[r * sh.n + e]; }, sh.rows, sh.n,
                      kq.data(), zq.data());
    });
    for (int r = 0; r < sh.rows; ++r) {
      const std::vector<float> row(x.begin() + r * sh.n, x.begin() + (r + 1) * sh.n);
      const QuantizedVector k = Quantize(row, kQ8KShift), z = Quantize(row, kQ8ZShift);
      const Q8Vector kv = Q8KAt(kq.data() + r * Q8KBytes(sh.n), sh.n);
      const Q8Vector zv = Q8ZAt(zq.data() + r * Q8ZBytes(sh.n), sh.n);
      for (int64_t i = 0; i < sh.n; ++i) {
        ASSERT_EQ(kv.q[i], k.q[i]) << sh.rows << "x" << sh.n << " row " << r << " Q8_K " << i;
        ASSERT_EQ(zv.q[i], z.q[i]) << sh.rows << "x" << sh.n << " row " << r << " Q8_0 " << i;
      }
      for (int g = 0; g < sh.n / 256; ++g) ASSERT_EQ(kv.d[g], k.d[g]) << "row " << r;
      for (int c = 0; c < sh.n / 16; ++c) ASSERT_EQ(kv.s[c], k.s[c]) << "row " << r;
      for (int g = 0; g < sh.n / 32; ++g) {
        ASSERT_EQ(zv.d[g], z.d[g]) << "row " << r;
        ASSERT_EQ(zv.s[g], z.s[g]) << "row " << r;
      }
    }
  }
}

// Each warp of a block quantizing a row of its own (QuantizeQ8 over its 32
// lanes, as the down launch's warps do) writes the block quantizer's bytes:
// rows of 512 (one pass), 2,048 (four) and 256 (half the lanes idle).
TEST(DecodeQ8BlockTest, AWarpAloneWritesTheBlocksBytes) {
  for (const int64_t n : {int64_t{512}, int64_t{2048}, int64_t{256}}) {
    constexpr int kRows = 3;
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::normal_distribution<float> n01(0.0f, 1.0f);
    std::vector<float> x(kRows * n);
    for (float& v : x) v = n01(rng);
    std::vector<uint8_t> kb(kRows * Q8KBytes(n), 0xEE), zb(kRows * Q8ZBytes(n), 0xEE);
    std::vector<uint8_t> kw(kb.size(), 0xEE), zw(zb.size(), 0xEE);
    emulation::Launch(dim3{1, 1, 1}, 128, [&] {
      QuantizeBlockQ8([&](int r, int64_t e) { return x[r * n + e]; }, kRows, n, kb.data(),
                      zb.data());
    });
    emulation::Launch(dim3{1, 1, 1}, 32 * (kRows + 1), [&] {
      const int w = static_cast<int>(threadIdx.x) / 32;  // the last warp has no row
      if (w < kRows) {
        QuantizeQ8([&](int, int64_t e) { return x[w * n + e]; }, 1, n, kw.data() + w * Q8KBytes(n),
                   zw.data() + w * Q8ZBytes(n), static_cast<int>(threadIdx.x) % 32, 32);
      }
    });
    EXPECT_EQ(kw, kb) << n;
    EXPECT_EQ(zw, zb) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, DecodeQ8Test,
                         ::testing::Values(GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                                           GgmlType::kQ8_0, GgmlType::kQ1_0),
                         [](const auto& info) { return kernels::TypeName(info.param); });

}  // namespace
}  // namespace sluice::cuda::internal
