// The grouped mat-mul kernel (quant_matmul_kernel.h) run on the CPU through
// host_emulation.h, against a double-precision reference from the CPU
// dequantizer. The same source is what nvcc compiles, so this checks the
// kernel's block layouts, chunk-to-column mapping, lane groups, entry tiles,
// group routing, strides and tails on every machine; quant_matmul_sm90_test
// checks the compiled kernel on a GPU.
#include "kernels/cuda/host_emulation.h"  // first: stands in for CUDA

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/quant_matmul_kernel.h"
#include "loader/ggml_type.h"

namespace sluice::cuda::internal {
namespace {

constexpr double kMaxRelErr = 2e-5;  // of sum |w x|, as in the sm90 test

constexpr GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,
                               GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K,
                               GgmlType::kQ6_K, GgmlType::kQ1_0};

bool IsPlain(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

struct Case {
  int64_t rows = 0, cols = 0;
  int n_weights = 1, n_groups = 1;
  std::vector<int32_t> group_weight, group_begin, x_row;
  int max_entries = 1;
  int64_t x_rows = 1, x_pad = 0, y_pad = 0;
  int weight_offset = 0, x_offset = 0;
};

template <class T>
void Emulate(const RawGroupedMatMul& a) {
  const GroupedGeometry geo = ComputeGeometry(a);
  const dim3 grid{static_cast<unsigned>(geo.entry_tiles), static_cast<unsigned>(geo.row_blocks),
                  static_cast<unsigned>(a.n_groups)};
  if (a.max_entries_per_group == 1) {
    emulation::Launch(grid, kThreads, [&] { GroupedKernel<T, 1>(a, geo.lanes_per_row); });
  } else {
    emulation::Launch(grid, kThreads, [&] { GroupedKernel<T, kEntryTile>(a, geo.lanes_per_row); });
  }
}

void EmulateType(const RawGroupedMatMul& a) {
  switch (static_cast<GgmlType>(a.type)) {
    case GgmlType::kF32: return Emulate<F32Weights>(a);
    case GgmlType::kF16: return Emulate<HalfWeights<false>>(a);
    case GgmlType::kBF16: return Emulate<HalfWeights<true>>(a);
    case GgmlType::kQ8_0: return Emulate<Q8_0Weights>(a);
    case GgmlType::kQ1_0: return Emulate<Q1_0Weights>(a);
    case GgmlType::kQ4_K: return Emulate<KWeights<false>>(a);
    case GgmlType::kQ5_K: return Emulate<KWeights<true>>(a);
    case GgmlType::kQ6_K: return Emulate<Q6KWeights>(a);
    default: FAIL() << "no kernel for type " << a.type;
  }
}

class QuantMatMulEmulationTest : public ::testing::TestWithParam<GgmlType> {
 protected:
  int64_t Cols(int64_t quant_cols) const {
    return IsPlain(GetParam()) ? quant_cols - 20 : quant_cols;  // plain: a tail
  }

  // Runs `c` and returns the largest error relative to sum |w x|; counts
  // writes into the y_stride gaps in *gap_writes.
  double Run(const Case& c, int64_t* gap_writes) {
    const GgmlType t = GetParam();
    std::mt19937 rng(77 + static_cast<int>(t));
    const uint64_t row_bytes = *kernels::RowBytes(t, c.cols);
    const uint64_t slot = (c.rows * row_bytes + c.weight_offset + 255) / 256 * 256;
    std::vector<uint8_t> all(slot * c.n_weights);
    std::vector<const void*> table(c.n_weights);
    std::vector<std::vector<float>> deq(c.n_weights, std::vector<float>(c.rows * c.cols));
    for (int w = 0; w < c.n_weights; ++w) {
      const std::vector<uint8_t> m = kernels::testing_util::RandomWeights(t, c.rows, c.cols, rng);
      std::copy(m.begin(), m.end(), all.begin() + w * slot + c.weight_offset);
      table[w] = &all[w * slot + c.weight_offset];
      for (int64_t r = 0; r < c.rows; ++r) {
        EXPECT_TRUE(kernels::DequantizeRow(t, &m[r * row_bytes], c.cols, &deq[w][r * c.cols]).ok());
      }
    }
    const int64_t x_stride = c.cols + c.x_pad, y_stride = c.rows + c.y_pad;
    std::vector<float> x(c.x_offset + c.x_rows * x_stride);
    std::uniform_real_distribution<float> val(-1.f, 1.f);
    for (float& v : x) v = val(rng);
    const int64_t n_entries = c.group_begin.empty() ? c.n_groups : c.group_begin.back();
    std::vector<float> y(n_entries * y_stride, NAN);

    RawGroupedMatMul a;
    a.type = static_cast<int>(t);
    a.rows = c.rows;
    a.cols = c.cols;
    a.row_bytes = row_bytes;
    a.n_groups = c.n_groups;
    a.max_entries_per_group = c.group_begin.empty() ? 1 : c.max_entries;
    a.weights = table.data();
    a.group_weight = c.group_weight.empty() ? nullptr : c.group_weight.data();
    a.group_begin = c.group_begin.empty() ? nullptr : c.group_begin.data();
    a.x_row = c.x_row.empty() ? nullptr : c.x_row.data();
    a.x = x.data() + c.x_offset;
    a.x_stride = x_stride;
    a.y = y.data();
    a.y_stride = y_stride;
    EmulateType(a);

    double max_rel = 0;
    *gap_writes = 0;
    for (int g = 0; g < c.n_groups; ++g) {
      const int w = c.group_weight.empty() ? g : c.group_weight[g];
      const int64_t begin = c.group_begin.empty() ? g : c.group_begin[g];
      const int64_t end = c.group_begin.empty() ? g + 1 : c.group_begin[g + 1];
      for (int64_t e = begin; e < end; ++e) {
        const float* xr = &x[c.x_offset + (c.x_row.empty() ? e : c.x_row[e]) * x_stride];
        for (int64_t r = 0; r < c.rows; ++r) {
          double sum = 0, mag = 0;
          for (int64_t k = 0; k < c.cols; ++k) {
            const double p = static_cast<double>(deq[w][r * c.cols + k]) * xr[k];
            sum += p;
            mag += std::fabs(p);
          }
          const float got = y[e * y_stride + r];
          const double err = std::isnan(got) ? INFINITY : std::fabs(got - sum);
          max_rel = std::max(max_rel, err / std::max(mag, 1e-30));
        }
        for (int64_t r = c.rows; r < y_stride; ++r) *gap_writes += !std::isnan(y[e * y_stride + r]);
      }
    }
    return max_rel;
  }

  void Check(const Case& c, const char* name) {
    int64_t gap_writes = 0;
    const double max_rel = Run(c, &gap_writes);
    std::printf("%-5s %-40s max_rel=%.3g\n", kernels::TypeName(GetParam()).c_str(), name, max_rel);
    EXPECT_LT(max_rel, kMaxRelErr) << name;
    EXPECT_EQ(gap_writes, 0) << name << ": outputs written into the y_stride gap";
  }
};

TEST_P(QuantMatMulEmulationTest, ExpertsThroughTableWithEmptyGroupsAndGather) {
  Case c;
  c.rows = 20;
  c.cols = Cols(256);  // short rows: 8 or 16 lanes per row
  c.n_weights = 4;
  c.n_groups = 6;
  c.group_weight = {2, 0, 3, 3, 1, 0};
  c.group_begin = {0, 3, 3, 4, 9, 9, 11};  // sizes 3, 0, 1, 5, 0, 2
  c.max_entries = 5;
  c.x_rows = 7;
  c.x_row = {6, 0, 3, 3, 5, 1, 2, 6, 4, 0, 1};
  c.x_pad = 4;
  c.y_pad = 3;
  Check(c, "6 groups, table, empty groups, gather");
}

TEST_P(QuantMatMulEmulationTest, GroupOf19EntriesMisaligned) {
  Case c;
  c.rows = 9;
  c.cols = Cols(512);
  c.group_begin = {0, 19};  // entry tiles of 8, 8 and 3
  c.max_entries = 19;
  c.x_rows = 19;
  c.x_pad = 1;
  c.y_pad = 2;
  c.weight_offset = 2;  // the 2-byte alignment every layout guarantees
  c.x_offset = 1;
  Check(c, "19 entries, weights +2 bytes, x +1 float");
}

TEST_P(QuantMatMulEmulationTest, DecodeOneEntryPerGroupFullWarpRows) {
  Case c;
  c.rows = 37;          // 3 row blocks of 16, the last partial
  c.cols = Cols(2304);  // 32 lanes per row, several chunks each (both unroll halves)
  c.n_weights = 2;
  c.n_groups = 3;
  c.group_weight = {1, 1, 0};
  c.x_rows = 4;
  c.x_row = {3, 0, 2};
  Check(c, "decode, 3 groups of one entry, 37 rows");
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

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantMatMulEmulationTest, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return kernels::TypeName(info.param);
                         });

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

}  // namespace
}  // namespace sluice::cuda::internal
