// The tensor-core kernel (quant_matmul_mma_kernel.h) run on the CPU through
// host_emulation.h: every thread of a block is a fiber, __syncthreads a
// barrier, and mma.sync is computed from the 32 lanes' registers with the
// fragment layout of the PTX ISA. What this checks without a GPU: the
// fragment loads and accumulator mapping, the staging of every ggml layout
// into BF16 tiles in the chunk reader's k order (weights and activations
// alike), row blocks and entry tiles with partial ends, skipped n8 tiles,
// group routing, gathered activations, strides and odd chunk counts.
// What it cannot check: that the hardware agrees with our reading of the
// layout (quant_matmul_sm90_test does that on the H200).
#include "kernels/cuda/host_emulation.h"  // first: stands in for CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "format/ggml_type.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/grouped_case_testing.h"
#include "kernels/cuda/quant_matmul_mma_kernel.h"

namespace sluice::cuda::internal {
namespace {

using emulation::Bf16Bits;
using emulation::Bf16Value;

float RoundBf16(float f) { return Bf16Value(Bf16Bits(f)); }

// ---- the MMA fragment layout, pinned to the PTX ISA's tables -------------

// Lane 9 (g = 2, t = 1) of m16n8k16 holds A[2][2..3], A[10][2..3],
// A[2][10..11], A[10][10..11]; B[2..3][2], B[10..11][2]; and D[2][2],
// D[2][3], D[10][2], D[10][3]: the numbers are the ISA's, not the formulas'.
TEST(MmaFragmentTest, LaneNineHoldsTheElementsTheIsaNames) {
  EXPECT_EQ(AccRow(9, 0), 2);
  EXPECT_EQ(AccRow(9, 1), 2);
  EXPECT_EQ(AccRow(9, 2), 10);
  EXPECT_EQ(AccRow(9, 3), 10);
  EXPECT_EQ(AccCol(9, 0), 2);
  EXPECT_EQ(AccCol(9, 1), 3);
  EXPECT_EQ(AccCol(9, 2), 2);
  EXPECT_EQ(AccCol(9, 3), 3);
  // A staged as word (row, k/2) = row * 100 + k/2: the words lane 9 loads.
  std::vector<uint32_t> tile(16 * kMmaStrideWords);
  for (int r = 0; r < 16; ++r) {
    for (int w = 0; w < kMmaStrideWords; ++w) tile[r * kMmaStrideWords + w] = r * 100 + w;
  }
  uint32_t a[4];
  LoadAFragment(tile.data(), 0, 9, a);
  EXPECT_EQ(a[0], 2u * 100 + 1);   // A[2][2..3]
  EXPECT_EQ(a[1], 10u * 100 + 1);  // A[10][2..3]
  EXPECT_EQ(a[2], 2u * 100 + 5);   // A[2][10..11]
  EXPECT_EQ(a[3], 10u * 100 + 5);  // A[10][10..11]
  LoadAFragment(tile.data(), 1, 9, a);  // the second k16 step: k + 16
  EXPECT_EQ(a[0], 2u * 100 + 9);
  uint32_t b[2];
  LoadBFragment(tile.data(), 0, 9, b);  // entry 2, k 2..3 and 10..11
  EXPECT_EQ(b[0], 2u * 100 + 1);
  EXPECT_EQ(b[1], 2u * 100 + 5);
}

TEST(MmaFragmentTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(Bf16Bits(1.0f), 0x3F80u);
  EXPECT_EQ(Bf16Bits(1.0f + 0x1p-8f), 0x3F80u);               // tie: even stays
  EXPECT_EQ(Bf16Bits(1.0f + 0x1p-7f + 0x1p-8f), 0x3F82u);     // tie: odd rounds up
  EXPECT_EQ(Bf16Bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81u);    // above the tie
  EXPECT_EQ(Bf16Bits(-2.5f), 0xC020u);
  EXPECT_EQ(Bf16Bits(3.0e38f), 0x7F62u);
}

// One warp: a 16x32 A and a 32x8 B staged like the kernel's tiles, two k16
// MMAs through the kernel's fragment loads, D read back through AccRow and
// AccCol, against the plain product of the BF16-rounded values.
TEST(MmaFragmentTest, TwoKStepsThroughTheKernelsLoadsEqualThePlainProduct) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> val(-2.f, 2.f);
  float A[16][32], B[32][8];
  std::vector<uint32_t> sa(16 * kMmaStrideWords), sb(8 * kMmaStrideWords);
  for (int r = 0; r < 16; ++r) {
    for (int k = 0; k < 32; ++k) A[r][k] = RoundBf16(val(rng));
    for (int k = 0; k < 32; k += 2) {
      sa[r * kMmaStrideWords + k / 2] = Bf16Bits(A[r][k]) | (Bf16Bits(A[r][k + 1]) << 16);
    }
  }
  for (int n = 0; n < 8; ++n) {
    for (int k = 0; k < 32; ++k) B[k][n] = RoundBf16(val(rng));
    for (int k = 0; k < 32; k += 2) {
      sb[n * kMmaStrideWords + k / 2] = Bf16Bits(B[k][n]) | (Bf16Bits(B[k + 1][n]) << 16);
    }
  }
  float D[16][8];
  std::fill(&D[0][0], &D[0][0] + 16 * 8, NAN);
  emulation::Launch(dim3{1, 1, 1}, 32, [&] {
    const int lane = threadIdx.x;
    float acc[4] = {0, 0, 0, 0};
    for (int ks = 0; ks < 2; ++ks) {
      uint32_t a[4], b[2];
      LoadAFragment(sa.data(), ks, lane, a);
      LoadBFragment(sb.data(), ks, lane, b);
      MmaBf16(acc, a, b);
    }
    for (int i = 0; i < 4; ++i) D[AccRow(lane, i)][AccCol(lane, i)] = acc[i];
  });
  double max_err = 0;
  for (int r = 0; r < 16; ++r) {
    for (int n = 0; n < 8; ++n) {
      double want = 0;
      for (int k = 0; k < 32; ++k) want += static_cast<double>(A[r][k]) * B[k][n];
      max_err = std::max(max_err, std::isnan(D[r][n]) ? INFINITY : std::fabs(D[r][n] - want));
    }
  }
  std::printf("16x8x32 through the fragments: max_abs_err=%.3g\n", max_err);
  EXPECT_LT(max_err, 1e-5);  // two F32 roundings of sums below 40
}

// ---- the whole kernel, every type ----------------------------------------

constexpr GgmlType kTypes[] = {GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                               GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                               GgmlType::kQ1_0};

// Of sum |w x|: against the BF16-rounded operands only F32 accumulation
// differs (plus a rare one-ulp BF16 difference where the kernel's fused
// decode and the CPU dequantizer round a weight differently); against the
// exact operands each product may be off by (1 + 2^-8)^2 - 1 < 2^-7.
constexpr double kMaxRelErrBf16 = 1e-5;
constexpr double kMaxRelErrExact = 0x1p-7 + 1e-5;

using grouped_testing::GroupedProblem;
using Case = grouped_testing::GroupedCase;

template <class T>
void EmulateMma(const RawGroupedMatMul& a) {
  const GroupedGeometry geo = ComputeMmaGeometry(a);
  const dim3 grid{static_cast<unsigned>(geo.entry_tiles), static_cast<unsigned>(geo.row_blocks),
                  static_cast<unsigned>(a.n_groups)};
  emulation::Launch(grid, kMmaThreads, [&] { GroupedMmaKernel<T>(a); });
}

void EmulateMmaType(const RawGroupedMatMul& a) {
  const bool known = VisitWeights(a.type, false, [&](auto t) {
    using W = typename decltype(t)::type;
    if constexpr (std::is_same_v<W, F32Weights>) {
      return false;
    } else {
      EmulateMma<W>(a);
      return true;
    }
  });
  if (!known) FAIL() << "no tensor-core kernel for type " << a.type;
}

class MmaEmulationTest : public ::testing::TestWithParam<GgmlType> {
 protected:
  // A row of about `chunks` 32-element chunks, rounded up to the type's
  // blocks: Q8_0/F16/BF16 keep an odd count (a half-empty last k step).
  int64_t Cols(int64_t chunks) const {
    const int64_t block = std::max<int64_t>(32, TraitsOf(GetParam()).block_size);
    return (32 * chunks + block - 1) / block * block;
  }

  void Check(const Case& c, const char* name) {
    const GgmlType t = GetParam();
    GroupedProblem p(t, c, 31 + static_cast<int>(t));
    ASSERT_TRUE(MmaSupportsShape(p.args().type, p.args().cols));
    EmulateMmaType(p.args());

    double rel_bf16 = 0, rel_exact = 0;
    p.ForEachEntry([&](int w, const float* xr, const float* y) {
      for (int64_t r = 0; r < c.rows; ++r) {
        const float* wr = p.Reference(w, r);
        double exact = 0, rounded = 0, mag = 0;
        for (int64_t k = 0; k < c.cols; ++k) {
          exact += static_cast<double>(wr[k]) * xr[k];
          rounded += static_cast<double>(RoundBf16(wr[k])) * RoundBf16(xr[k]);
          mag += std::fabs(static_cast<double>(wr[k]) * xr[k]);
        }
        const double m = std::max(mag, 1e-30);
        rel_bf16 = std::max(rel_bf16, std::isnan(y[r]) ? INFINITY : std::fabs(y[r] - rounded) / m);
        rel_exact = std::max(rel_exact, std::isnan(y[r]) ? INFINITY : std::fabs(y[r] - exact) / m);
      }
    });
    const int64_t gap_writes = p.GapWrites();
    std::printf("%-5s %-44s rel_err_vs_bf16=%.3g rel_err_vs_exact=%.3g\n",
                kernels::TypeName(t).c_str(), name, rel_bf16, rel_exact);
    EXPECT_LT(rel_bf16, kMaxRelErrBf16) << name;
    EXPECT_LT(rel_exact, kMaxRelErrExact) << name;
    EXPECT_EQ(gap_writes, 0) << name << ": outputs written into the y_stride gap";
  }
};

// Groups of 17, 0, 1, 33 (two entry tiles, the second of one entry) and 5
// entries through a weight table, gathered activations with repeats, 40 rows
// (warps 2 and 3 of the block have no rows), padded strides.
TEST_P(MmaEmulationTest, ExpertsThroughTableWithEmptyAndUnevenGroups) {
  Case c;
  c.rows = 40;
  c.cols = Cols(8);
  c.n_weights = 3;
  c.n_groups = 5;
  c.group_weight = {2, 0, 1, 2, 0};
  c.group_begin = {0, 17, 17, 18, 51, 56};
  c.max_entries = 33;
  c.x_rows = 23;
  for (int e = 0; e < 56; ++e) c.x_row.push_back((e * 7 + 3) % 23);
  c.x_pad = 4;
  c.y_pad = 3;
  Check(c, "5 groups (17,0,1,33,5), table, gather, 40 rows");
}

// 130 rows (a second row block of 2), misaligned weights and activations, an
// odd number of chunks where the type allows it (a half-empty last k step),
// else rows of two or three blocks.
TEST_P(MmaEmulationTest, TwoRowBlocksMisalignedOddChunks) {
  Check(grouped_testing::GroupOf19Misaligned(130, Cols(9)),
        "130 rows, 19 entries, +2 bytes / +1 float");
}

INSTANTIATE_TEST_SUITE_P(TensorCoreTypes, MmaEmulationTest, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return kernels::TypeName(info.param);
                         });

TEST(MmaGeometryTest, BlocksOf128RowsAnd32Entries) {
  RawGroupedMatMul a;
  a.rows = 4096;
  a.max_entries_per_group = 512;
  GroupedGeometry geo = ComputeMmaGeometry(a);
  EXPECT_EQ(geo.row_blocks, 32);
  EXPECT_EQ(geo.entry_tiles, 16);
  a.rows = 130;
  a.max_entries_per_group = 17;
  geo = ComputeMmaGeometry(a);
  EXPECT_EQ(geo.row_blocks, 2);
  EXPECT_EQ(geo.entry_tiles, 1);
}

TEST(MmaGeometryTest, EveryKernelTypeButF32WithWholeChunks) {
  EXPECT_TRUE(MmaSupportsShape(kQ4_K, 2048));
  EXPECT_TRUE(MmaSupportsShape(kQ8_0, 96));
  EXPECT_TRUE(MmaSupportsShape(kBF16, 512));
  EXPECT_FALSE(MmaSupportsShape(kF32, 2048));  // the F32 parity gate needs F32 products
  EXPECT_FALSE(MmaSupportsShape(kF16, 500));   // a tail: the FP32 kernel handles it
  EXPECT_FALSE(MmaSupportsShape(8 + 1, 256));  // not a kernel type
}

}  // namespace
}  // namespace sluice::cuda::internal
