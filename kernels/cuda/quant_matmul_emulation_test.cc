// The grouped mat-mul kernel (quant_matmul_kernel.h) run on the CPU through
// host_emulation.h, against a double-precision reference from the CPU
// dequantizer. The same source is what nvcc compiles, so this checks the
// kernel's block layouts, chunk-to-column mapping, lane groups, entry tiles,
// group routing, strides and tails on every machine; quant_matmul_sm90_test
// checks the compiled kernel on a GPU.
#include "kernels/cuda/host_emulation.h"  // first: stands in for CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "format/ggml_type.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/grouped_case_testing.h"
#include "kernels/cuda/quant_matmul_kernel.h"

namespace sluice::cuda::internal {
namespace {

constexpr double kMaxRelErr = 2e-5;  // of sum |w x|, as in the sm90 test

constexpr GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,
                               GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K,
                               GgmlType::kQ6_K, GgmlType::kQ1_0};

bool IsPlain(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

using grouped_testing::GroupedProblem;
using Case = grouped_testing::GroupedCase;
using grouped_testing::ExpertsThroughTable;
using grouped_testing::GroupOf19Misaligned;

template <class T, bool kQ8>
void Emulate(const RawGroupedMatMul& a) {
  const GroupedGeometry geo = ComputeGeometry(a);
  const dim3 grid{static_cast<unsigned>(geo.entry_tiles), static_cast<unsigned>(geo.row_blocks),
                  static_cast<unsigned>(a.n_groups)};
  if (geo.entries_per_tile == 1 && geo.rows_per_lane == 1) {
    emulation::Launch(grid, kThreads, [&] { GroupedKernel<T, 1, kQ8, 1>(a, geo.lanes_per_row); });
  } else if (geo.entries_per_tile == 1) {
    emulation::Launch(grid, kThreads, [&] { GroupedKernel<T, 1, kQ8>(a, geo.lanes_per_row); });
  } else if (geo.rows_per_lane == 1) {
    emulation::Launch(grid, kThreads,
                      [&] { GroupedKernel<T, kEntryTile, kQ8, 1>(a, geo.lanes_per_row); });
  } else {
    emulation::Launch(grid, kThreads,
                      [&] { GroupedKernel<T, kEntryTile, kQ8>(a, geo.lanes_per_row); });
  }
}

// q8: the kernel's 8-bit-activation variant (types with a Q8Dot only).
void EmulateType(const RawGroupedMatMul& a, bool q8) {
  const bool known = VisitWeights(a.type, false, [&](auto t) {
    using W = typename decltype(t)::type;
    if constexpr (kHasQ8Dot<W>) {
      if (q8) {
        Emulate<W, true>(a);
        return true;
      }
    } else if (q8) {
      return false;
    }
    Emulate<W, false>(a);
    return true;
  });
  if (!known) FAIL() << "no kernel for type " << a.type << (q8 ? " with 8-bit activations" : "");
}

// x as the 8-bit variant multiplies it: each element q * d of the format the
// CPU backend pairs with weights of type t, rounded group by group by
// decode_q8.h's reference quantizers (which the block quantizer the kernel
// runs matches bit for bit, decode_q8_emulation_test).
std::vector<double> RoundedActivations(GgmlType t, const float* x, int64_t cols) {
  const bool q8k = t != GgmlType::kQ8_0 && t != GgmlType::kQ1_0;
  const int shift = q8k ? kQ8KShift : kQ8ZShift;
  std::vector<int8_t> q(cols);
  std::vector<float> d(cols >> shift), s(cols / 16);
  auto at = [&](int64_t e) { return x[e]; };
  for (int g = 0; g < (cols >> shift); ++g) {
    if (q8k) {
      QuantizeGroupQ8K(at, g, q.data(), d.data(), s.data());
    } else {
      QuantizeGroupQ8Z(at, g, q.data(), d.data(), s.data());
    }
  }
  std::vector<double> out(cols);
  for (int64_t i = 0; i < cols; ++i) out[i] = static_cast<double>(q[i]) * d[i >> shift];
  return out;
}

// The cases both kernel variants run, for rows of `cols` elements.
Case DecodeOneEntryPerGroup(int64_t cols) {
  Case c;
  c.rows = 37;    // 3 row blocks of 16, the last partial
  c.cols = cols;  // 32 lanes per row, several chunks each (both unroll halves)
  c.n_weights = 2;
  c.n_groups = 3;
  c.group_weight = {1, 1, 0};
  c.x_rows = 4;
  c.x_row = {3, 0, 2};
  return c;
}

class QuantMatMulEmulationTest : public ::testing::TestWithParam<GgmlType> {
 protected:
  int64_t Cols(int64_t quant_cols) const {
    return IsPlain(GetParam()) ? quant_cols - 20 : quant_cols;  // plain: a tail
  }

  // Runs `c` (the 8-bit variant when q8) and returns the largest error
  // relative to sum |w x| against the exact product with x, or with x as the
  // 8-bit variant rounds it; counts writes into the y_stride gaps in
  // *gap_writes.
  double Run(const Case& c, bool q8, int64_t* gap_writes) {
    const GgmlType t = GetParam();
    GroupedProblem p(t, c, 77 + static_cast<int>(t));
    EmulateType(p.args(), q8);
    double max_rel = 0;
    p.ForEachEntry([&](int w, const float* xr, const float* y) {
      std::vector<double> x(xr, xr + c.cols);
      if (q8) x = RoundedActivations(t, xr, c.cols);
      for (int64_t r = 0; r < c.rows; ++r) {
        const float* wr = p.Reference(w, r);
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < c.cols; ++k) {
          const double prod = static_cast<double>(wr[k]) * x[k];
          sum += prod;
          mag += std::fabs(prod);
        }
        const double err = std::isnan(y[r]) ? INFINITY : std::fabs(y[r] - sum);
        max_rel = std::max(max_rel, err / std::max(mag, 1e-30));
      }
    });
    *gap_writes = p.GapWrites();
    return max_rel;
  }

  void Check(const Case& c, const char* name, bool q8 = false) {
    int64_t gap_writes = 0;
    const double max_rel = Run(c, q8, &gap_writes);
    std::printf("%-5s %-44s max_rel=%.3g\n", kernels::TypeName(GetParam()).c_str(), name, max_rel);
    EXPECT_LT(max_rel, kMaxRelErr) << name;
    EXPECT_EQ(gap_writes, 0) << name << ": outputs written into the y_stride gap";
  }
};

TEST_P(QuantMatMulEmulationTest, ExpertsThroughTableWithEmptyGroupsAndGather) {
  Check(ExpertsThroughTable(20, Cols(256)), "6 groups, table, empty groups, gather");
}

TEST_P(QuantMatMulEmulationTest, GroupOf19EntriesMisaligned) {
  Check(GroupOf19Misaligned(9, Cols(512)), "19 entries, weights +2 bytes, x +1 float");
}

TEST_P(QuantMatMulEmulationTest, DecodeOneEntryPerGroupFullWarpRows) {
  Check(DecodeOneEntryPerGroup(Cols(2304)), "decode, 3 groups of one entry, 37 rows");
}

// Whether weights of type t have products with 8-bit activations.
bool HasQ8(GgmlType t) {
  return VisitWeights(static_cast<int>(t), false,
                      [](auto w) { return kHasQ8Dot<typename decltype(w)::type>; });
}

// Two runs' outputs: how many either wrote (the y_stride gaps stay NaN in
// both) and how many of those differ in their bits.
struct BitDiff {
  int64_t written = 0, mismatches = 0;
};
BitDiff CompareBits(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  BitDiff d;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    ++d.written;
    d.mismatches += __float_as_uint(a[i]) != __float_as_uint(b[i]);
  }
  return d;
}

// Case c of type t run as it is, then again after change(args) (which
// checks the geometry it expects), with F32 and, where the type has them,
// 8-bit activations: `written` outputs, every one the same bits.
template <class Change>
void ExpectTheSameBitsAfter(GgmlType t, const Case& c, uint32_t seed, int64_t written,
                            Change&& change) {
  for (const bool q8 : {false, true}) {
    if (q8 && !HasQ8(t)) continue;
    SCOPED_TRACE(q8 ? "q8" : "f32");
    GroupedProblem p(t, c, seed);
    EmulateType(p.args(), q8);
    const std::vector<float> before = p.outputs();
    p.ClearOutputs();
    change(p.mutable_args());
    EmulateType(p.args(), q8);
    const BitDiff d = CompareBits(before, p.outputs());
    EXPECT_EQ(d.written, written);
    EXPECT_EQ(d.mismatches, 0);
  }
}

// One group of entries named by single_group_entries (a batch pass's dense
// pair through its table, GroupedMatMul::one_group_entries) gives the bits
// of the same group through group_begin.
TEST_P(QuantMatMulEmulationTest, OneGroupOfEntriesWithoutBoundsGivesTheSameBits) {
  const GgmlType t = GetParam();
  const Case c = GroupOf19Misaligned(9, Cols(512));
  ExpectTheSameBitsAfter(t, c, 5 + static_cast<int>(t), 19 * c.rows, [](RawGroupedMatMul& a) {
    a.group_begin = nullptr;
    a.single_group_entries = 19;
  });
}

// A one-entry launch of few blocks spread one row per lane group gives the
// bits of kRows rows per lane group (each row's chunks go to the same lanes
// in the same order).
TEST_P(QuantMatMulEmulationTest, SpreadRowsGiveTheSameBits) {
  const GgmlType t = GetParam();
  const Case c = DecodeOneEntryPerGroup(Cols(2304));
  ExpectTheSameBitsAfter(t, c, 11 + static_cast<int>(t), 3 * c.rows, [](RawGroupedMatMul& a) {
    a.spread_rows = true;
    EXPECT_EQ(ComputeGeometry(a).rows_per_lane, 1);
    EXPECT_EQ(ComputeGeometry(a).row_blocks, 10);  // 37 rows, 4 a block
  });
}

// A launch of several entries short of blocks (a decode batch's router)
// spread one row per lane group and one entry a block (spread_entries)
// gives the bits of kRows rows per lane group and tiles of 8 entries.
TEST_P(QuantMatMulEmulationTest, SpreadEntriesGiveTheSameBits) {
  const GgmlType t = GetParam();
  const Case c = GroupOf19Misaligned(37, Cols(2304));
  ExpectTheSameBitsAfter(t, c, 13 + static_cast<int>(t), 19 * c.rows, [](RawGroupedMatMul& a) {
    a.spread_rows = true;
    a.spread_entries = true;
    const GroupedGeometry geo = ComputeGeometry(a);
    EXPECT_EQ(geo.rows_per_lane, 1);
    EXPECT_EQ(geo.entries_per_tile, 1);
    EXPECT_EQ(geo.entry_tiles, 19);
  });
}

TEST_P(QuantMatMulEmulationTest, DequantElementIsBitExact) {
  const GgmlType t = GetParam();
  std::mt19937 rng(8);
  const int64_t rows = 3, cols = Cols(512);
  const std::vector<uint8_t> w = kernels::testing_util::RandomWeights(t, rows, cols, rng);
  const uint64_t row_bytes = *kernels::RowBytes(t, cols);
  std::vector<float> want(cols);
  int64_t mismatches = 0;
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_TRUE(kernels::DequantizeRow(t, &w[r * row_bytes], cols, want.data()).ok());
    for (int64_t k = 0; k < cols; ++k) {
      const float got = DequantElement(static_cast<int>(t), &w[r * row_bytes], k);
      mismatches += __float_as_uint(got) != __float_as_uint(want[k]);
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << rows * cols;
}

std::string TypeParamName(const ::testing::TestParamInfo<GgmlType>& info) {
  return kernels::TypeName(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantMatMulEmulationTest, ::testing::ValuesIn(kTypes),
                         TypeParamName);

// The 8-bit-activation variant on the same cases: exact (to float rounding)
// against x rounded as the CPU backend rounds it, which F32 activations
// miss by the rounding itself (~1e-3 of sum |w x|, 50 times the gate).
class QuantMatMulQ8EmulationTest : public QuantMatMulEmulationTest {};

TEST_P(QuantMatMulQ8EmulationTest, ExpertsThroughTableWithEmptyGroupsAndGather) {
  Check(ExpertsThroughTable(20, 256), "q8: 6 groups, table, empty groups, gather", true);
}

TEST_P(QuantMatMulQ8EmulationTest, GroupOf19EntriesMisaligned) {
  Check(GroupOf19Misaligned(9, 512), "q8: 19 entries, weights +2 bytes, x +1 float", true);
}

TEST_P(QuantMatMulQ8EmulationTest, DecodeOneEntryPerGroupFullWarpRows) {
  Check(DecodeOneEntryPerGroup(2304), "q8: decode, 3 groups of one entry, 37 rows", true);
}

// x's n_rows rows rounded for weights of type t by RoundRowsQ8Kernel.
std::vector<uint8_t> RoundRows(GgmlType t, const float* x, int64_t n_rows, int64_t cols,
                               int64_t x_stride, int threads = kThreads) {
  std::vector<uint8_t> out;
  VisitWeights(static_cast<int>(t), false, [&](auto w) {
    using W = typename decltype(w)::type;
    if constexpr (kHasQ8Dot<W>) {
      out.assign(n_rows * Q8RowBytes<W>(cols), 0xEE);
      const dim3 grid{static_cast<unsigned>((n_rows + kRoundRows - 1) / kRoundRows), 1, 1};
      emulation::Launch(grid, threads,
                        [&] { RoundRowsQ8Kernel<W>(x, n_rows, cols, x_stride, out.data()); });
    }
    return true;
  });
  return out;
}

// x's rows rounded once (RoundRowsQ8Kernel, as the batch pass does for all
// the products of one input) and read in place give the bits each block
// gets by rounding its own tile, through tables, gathers, an odd number of
// rows (the last rounding block half full), misaligned x and decode tiles.
TEST_P(QuantMatMulQ8EmulationTest, RowsRoundedOnceGiveTheBitsOfTileRounding) {
  const GgmlType t = GetParam();
  const std::pair<Case, const char*> cases[] = {
      {ExpertsThroughTable(20, 256), "6 groups, table, gather"},
      {GroupOf19Misaligned(9, 512), "19 entries, x +1 float"},
      {DecodeOneEntryPerGroup(2304), "decode, 3 groups of one"}};
  for (const auto& [c, name] : cases) {
    GroupedProblem p(t, c, 5 + static_cast<int>(t));
    EmulateType(p.args(), true);
    const std::vector<float> own = p.outputs();
    const std::vector<uint8_t> rows =
        RoundRows(t, p.args().x, p.x_rows(), c.cols, p.args().x_stride);
    ASSERT_FALSE(rows.empty()) << name;
    // A block of a thread per chunk (the launch's choice for wide rows)
    // writes the same bytes as one of kThreads.
    for (const int threads : {96, 448, kRoundMaxThreads}) {
      EXPECT_EQ(RoundRows(t, p.args().x, p.x_rows(), c.cols, p.args().x_stride, threads), rows)
          << name << ", " << threads << " threads";
    }
    p.ClearOutputs();
    p.mutable_args().x_q8 = rows.data();
    EmulateType(p.args(), true);
    ASSERT_EQ(own.size(), p.outputs().size());
    int64_t written = 0;
    for (float v : own) written += !std::isnan(v);
    EXPECT_GT(written, 0) << name;
    EXPECT_EQ(std::memcmp(own.data(), p.outputs().data(), own.size() * sizeof(float)), 0)
        << name << ": rows rounded once differ from each block's own rounding";
  }
}

// ops.cu's norm kernel on its own (the two-launch way's first launch).
template <int kPer>
void NormOnly(float* x, const float* add, int64_t n, const float* w, float eps, float* xn) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  AddRmsNormRow<kPer>(x + r * n, add != nullptr ? add + r * n : nullptr, n, w, eps, xn + r * n,
                      scratch);
}

// The norm and the rounding of its output in one launch (NormRoundQ8Kernel)
// give the residual, the normed floats and the rounded bytes of the two
// launches apart (the norm, then RoundRowsQ8Kernel), with and without the
// residual add, for both 8-bit formats and each of the norm's paths (4, 8,
// 32 elements a thread held in registers, and the loop).
TEST(NormRoundQ8EmulationTest, OneLaunchGivesTheBitsOfTwo) {
  for (const GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    for (const int64_t n : {1024, 2048, 7168, 9216}) {
      for (const bool with_add : {true, false}) {
        const int rows = 2;
        std::mt19937 rng(static_cast<unsigned>(n) + (with_add ? 1 : 0));
        std::uniform_real_distribution<float> val(-2.0f, 2.0f);
        std::vector<float> x(rows * n), add(rows * n), w(n);
        for (float& v : x) v = val(rng);
        for (float& v : add) v = val(rng);
        for (float& v : w) v = val(rng);
        std::vector<float> x1 = x, x2 = x, xn1(rows * n, NAN), xn2(rows * n, NAN);
        const float* a = with_add ? add.data() : nullptr;
        const float eps = 1e-6f;
        std::vector<uint8_t> fused;
        VisitWeights(static_cast<int>(t), false, [&](auto tag) {
          using W = typename decltype(tag)::type;
          if constexpr (kHasQ8Dot<W>) {
            fused.assign(rows * Q8RowBytes<W>(n), 0xEE);
            const auto both = [&](auto k) {
              constexpr int kPer = decltype(k)::value;
              emulation::Launch(dim3{rows, 1, 1}, kNormThreads, [&] {
                NormRoundQ8Kernel<W, kPer>(x1.data(), a, n, w.data(), eps, xn1.data(),
                                           fused.data());
              });
              emulation::Launch(dim3{rows, 1, 1}, kNormThreads, [&] {
                NormOnly<kPer>(x2.data(), a, n, w.data(), eps, xn2.data());
              });
            };
            WithNormElems(n, kNormThreads, both);
          }
          return true;
        });
        const std::string name = kernels::TypeName(t) + " n=" + std::to_string(n) +
                                 (with_add ? " with add" : "");
        ASSERT_FALSE(fused.empty()) << name;
        EXPECT_EQ(std::memcmp(x1.data(), x2.data(), x1.size() * sizeof(float)), 0) << name;
        EXPECT_EQ(std::memcmp(xn1.data(), xn2.data(), xn1.size() * sizeof(float)), 0) << name;
        EXPECT_EQ(fused, RoundRows(t, xn2.data(), rows, n, n)) << name;
      }
    }
  }
}

// SwiGLU and the rounding of its output in one launch
// (SwiGluRoundQ8Kernel, a thread per chunk as its launch takes) give the
// floats of SiLU(g) * u and the bytes RoundRowsQ8Kernel gives them: 3 rows
// (the last rounding block half full), both 8-bit formats.
TEST(SwiGluRoundQ8EmulationTest, OneLaunchGivesTheBitsOfTwo) {
  for (const GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    const int64_t rows = 3, cols = 2048;
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> val(-4.0f, 4.0f);
    std::vector<float> g(rows * cols), u(rows * cols);
    for (float& v : g) v = val(rng);
    for (float& v : u) v = val(rng);
    std::vector<float> want(rows * cols);
    for (size_t i = 0; i < want.size(); ++i) want[i] = SiluF(g[i]) * u[i];
    std::vector<uint8_t> fused;
    VisitWeights(static_cast<int>(t), false, [&](auto tag) {
      using W = typename decltype(tag)::type;
      if constexpr (kHasQ8Dot<W>) {
        fused.assign(rows * Q8RowBytes<W>(cols), 0xEE);
        const dim3 grid{static_cast<unsigned>((rows + kRoundRows - 1) / kRoundRows), 1, 1};
        emulation::Launch(grid, 256, [&] {
          SwiGluRoundQ8Kernel<W>(g.data(), u.data(), rows, cols, fused.data());
        });
      }
      return true;
    });
    const std::string name = kernels::TypeName(t);
    ASSERT_FALSE(fused.empty()) << name;
    EXPECT_EQ(std::memcmp(g.data(), want.data(), g.size() * sizeof(float)), 0) << name;
    EXPECT_EQ(fused, RoundRows(t, want.data(), rows, cols, cols)) << name;
  }
}

constexpr GgmlType kQ8Types[] = {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K,
                                 GgmlType::kQ6_K, GgmlType::kQ1_0};
INSTANTIATE_TEST_SUITE_P(QuantizedTypes, QuantMatMulQ8EmulationTest,
                         ::testing::ValuesIn(kQ8Types), TypeParamName);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block, one
// at a time from the 12 scale bytes held as the words s0, s1, s2 (the
// layout of KScaleMin in kernels/cpu/blocks.h): the reference for
// KScaleMinPair.
void KScaleMinOneAtATime(uint32_t s0, uint32_t s1, uint32_t s2, int j, float* scale, float* min) {
  auto byte = [&](int i) { return ByteOf(i < 4 ? s0 : (i < 8 ? s1 : s2), i & 3); };
  uint32_t sc, m;
  if (j < 4) {
    sc = byte(j) & 63;
    m = byte(j + 4) & 63;
  } else {
    sc = (byte(j + 4) & 0x0F) | ((byte(j - 4) >> 6) << 4);
    m = (byte(j + 4) >> 4) | ((byte(j) >> 6) << 4);
  }
  *scale = static_cast<float>(sc);
  *min = static_cast<float>(m);
}

// KScaleMinPair (the K-quant readers' scales, two sub-blocks at once,
// branch-free) gives the one-at-a-time values for every sub-block pair of
// random scale bytes, as bits.
TEST(QuantBlocksDeviceTest, KScaleMinPairAsOneAtATime) {
  std::mt19937 rng(3);
  int mismatches = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const uint32_t s0 = rng(), s1 = rng(), s2 = rng();
    for (int p = 0; p < 4; ++p) {
      float sc[2], m[2];
      KScaleMinPair(s0, s1, s2, p, sc, m);
      for (int h = 0; h < 2; ++h) {
        float want_sc, want_m;
        KScaleMinOneAtATime(s0, s1, s2, 2 * p + h, &want_sc, &want_m);
        mismatches += __float_as_uint(sc[h]) != __float_as_uint(want_sc);
        mismatches += __float_as_uint(m[h]) != __float_as_uint(want_m);
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(QuantMatMulGeometryTest, LanesPerRowFollowTheRowLength) {
  RawGroupedMatMul a;
  a.type = static_cast<int>(GgmlType::kQ4_K);
  a.rows = 512;
  a.max_entries_per_group = 1;
  a.cols = 2048;  // 64 chunks of 32
  EXPECT_EQ(ComputeGeometry(a).lanes_per_row, 32);
  EXPECT_EQ(ComputeGeometry(a).row_blocks, 32);  // 16 rows per block
  a.cols = 512;   // 16 chunks
  EXPECT_EQ(ComputeGeometry(a).lanes_per_row, 16);
  EXPECT_EQ(ComputeGeometry(a).rows_per_block, 32);
  a.cols = 256;
  EXPECT_EQ(ComputeGeometry(a).lanes_per_row, 8);
  a.max_entries_per_group = 512;
  EXPECT_EQ(ComputeGeometry(a).entry_tiles, 64);
  a.max_entries_per_group = 1;
  EXPECT_EQ(ComputeGeometry(a).entry_tiles, 1);
}

// One group of `entries` over rows x cols of type t, spread_rows on.
RawGroupedMatMul SpreadOneGroup(GgmlType t, int64_t rows, int64_t cols, int64_t entries) {
  RawGroupedMatMul a;
  a.type = static_cast<int>(t);
  a.cols = cols;
  a.rows = rows;
  a.n_groups = 1;
  a.max_entries_per_group = entries;
  a.spread_rows = true;
  return a;
}

// spread_rows: one row per lane group only for launches of one tile of
// entries (a decode batch's router) over long rows whose grid would hold
// fewer than kFewBlocks blocks.
TEST(QuantMatMulGeometryTest, RowsSpreadOnlyWhereTheGridIsSmall) {
  RawGroupedMatMul a = SpreadOneGroup(GgmlType::kQ4_K, 576, 7168, 1);  // 36 blocks of 16 rows
  EXPECT_EQ(ComputeGeometry(a).rows_per_lane, 1);
  EXPECT_EQ(ComputeGeometry(a).row_blocks, 144);
  a.n_groups = 8;  // 288 blocks of 16 rows: enough
  EXPECT_EQ(ComputeGeometry(a).rows_per_lane, kRows);
  EXPECT_EQ(ComputeGeometry(a).row_blocks, 36);
  a.n_groups = 1;
  a.max_entries_per_group = kEntryTile;  // one tile of entries: spread too
  EXPECT_EQ(ComputeGeometry(a).rows_per_lane, 1);
  EXPECT_EQ(ComputeGeometry(a).entry_tiles, 1);
  a.max_entries_per_group = kEntryTile + 1;  // several tiles: never spread
  EXPECT_EQ(ComputeGeometry(a).rows_per_lane, kRows);
  a.max_entries_per_group = 1;
  a.cols = 256;  // 8 lanes a row: never spread
  EXPECT_EQ(ComputeGeometry(a).rows_per_lane, kRows);
  a.cols = 7168;
  a.spread_rows = false;
  EXPECT_EQ(ComputeGeometry(a).rows_per_lane, kRows);
}

// spread_entries: several tiles of entries spread rows where the grid is
// small, and a spread grid still short of kFewBlocks takes one entry a
// block. A decode batch's F32 router (256 rows of 2,048) at 8 and 32 rows.
TEST(QuantMatMulGeometryTest, EntriesSpreadWhereTheSpreadGridIsStillSmall) {
  RawGroupedMatMul a = SpreadOneGroup(GgmlType::kF32, 256, 2048, 8);  // 16 blocks of 16 rows
  EXPECT_EQ(ComputeGeometry(a).row_blocks, 64);  // spread: 64 blocks of 4 rows
  EXPECT_EQ(ComputeGeometry(a).entries_per_tile, kEntryTile);
  a.spread_entries = true;
  EXPECT_EQ(ComputeGeometry(a).row_blocks, 64);
  EXPECT_EQ(ComputeGeometry(a).entries_per_tile, 1);
  EXPECT_EQ(ComputeGeometry(a).entry_tiles, 8);  // 512 blocks
  a.max_entries_per_group = 32;  // 16 x 4 blocks: spread to 64 x 4, enough
  EXPECT_EQ(ComputeGeometry(a).rows_per_lane, 1);
  EXPECT_EQ(ComputeGeometry(a).entries_per_tile, kEntryTile);
  EXPECT_EQ(ComputeGeometry(a).entry_tiles, 4);
  a.spread_entries = false;  // several tiles: not spread
  EXPECT_EQ(ComputeGeometry(a).rows_per_lane, kRows);
  a.spread_entries = true;
  a.rows = 4096;  // 256 x 4 blocks: enough as they are
  EXPECT_EQ(ComputeGeometry(a).rows_per_lane, kRows);
  EXPECT_EQ(ComputeGeometry(a).entries_per_tile, kEntryTile);
  a.max_entries_per_group = 1;  // one entry: a tile of one, as always
  a.rows = 256;
  EXPECT_EQ(ComputeGeometry(a).entries_per_tile, 1);
  EXPECT_EQ(ComputeGeometry(a).entry_tiles, 1);
}

// StreamEntriesPerRound: dense groups halve their runs until their tiles
// reach the target (or runs are single entries); experts keep 8.
TEST(QuantMatMulGeometryTest, DenseRoundsTakeFewerEntriesWhereTilesAreFew) {
  RawGroupedMatMul a;
  a.n_groups = 1;
  a.max_entries_per_group = 8;
  a.single_group_entries = 8;
  EXPECT_EQ(StreamEntriesPerRound(a, 64, 0), kStreamTileEntries);
  EXPECT_EQ(StreamEntriesPerRound(a, 64, 64), 8);    // 64 tiles of one round
  EXPECT_EQ(StreamEntriesPerRound(a, 64, 65), 4);    // 128
  EXPECT_EQ(StreamEntriesPerRound(a, 64, 256), 2);   // 256
  EXPECT_EQ(StreamEntriesPerRound(a, 64, 264), 1);   // 512
  EXPECT_EQ(StreamEntriesPerRound(a, 4, 264), 1);    // 32: as few as runs of 1 give
  a.max_entries_per_group = a.single_group_entries = 32;
  EXPECT_EQ(StreamEntriesPerRound(a, 64, 264), 4);   // 512 tiles, 8 rounds
  EXPECT_EQ(StreamEntriesPerRound(a, 256, 264), 8);  // 1,024 tiles already
  const int32_t begin[3] = {0, 3, 5};
  a.group_begin = begin;  // experts: one round of 8 a tile
  a.n_groups = 2;
  a.single_group_entries = 0;
  EXPECT_EQ(StreamEntriesPerRound(a, 4, 264), 8);
}

}  // namespace
}  // namespace sluice::cuda::internal
