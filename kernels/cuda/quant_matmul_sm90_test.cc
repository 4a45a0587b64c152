// The CUDA products of the FP32 kernel against a double-precision host
// reference built from the CPU dequantizer (kernels/cpu/dequant.h), for every
// supported weight type (the tensor-core kernel's cases are in
// quant_matmul_tensor_core_sm90_test.cc, linked into the same binary).
// The device cases skip where no CUDA device is present; the argument checks
// need none and run everywhere.
//
// Error measure: |gpu - ref| / sum_c |w_c x_c| (relative to the magnitude of
// the terms, so a sum that cancels to near zero is not a false alarm). F32
// accumulation over a lane's share of a row bounds it by about (cols/lanes +
// log2 lanes) * 2^-24; a wrong index or bit gives O(1). The 8-bit-activation
// cases compare with the CPU product (kernels/cpu/matvec.h), which rounds x
// as llama.cpp's CPU backend does and as the kernel must: the same gate then
// holds, while F32 activations would miss it by the rounding (~1e-3).
#include "kernels/cuda/quant_matmul.h"
#include "kernels/cuda/sm90_test_upload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/skip.h"
#include "format/ggml_type.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/decode_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/grouped_case_testing.h"

namespace sluice::cuda {
namespace {

constexpr double kMaxRelErr = 2e-5;

constexpr GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,
                               GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K,
                               GgmlType::kQ6_K, GgmlType::kQ1_0};

bool IsPlain(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

// One grouped product: shapes, routing and layout quirks
// (grouped_case_testing.h), and its name in the printed results.
struct Case : internal::grouped_testing::GroupedCase {
  std::string name;
};

Case Named(const internal::grouped_testing::GroupedCase& g, std::string name) {
  Case c;
  static_cast<internal::grouped_testing::GroupedCase&>(c) = g;
  c.name = std::move(name);
  return c;
}

class QuantMatMulSm90Test : public ::testing::TestWithParam<GgmlType> {
 protected:
  // These cases pin the FP32 kernel (exact to F32 accumulation), including
  // the group of 512 the dispatch would send to the tensor cores;
  // quant_matmul_tensor_core_sm90_test.cc covers those.
  void SetUp() override {
    if (absl::Status s = SetDevice(0); !s.ok()) SLUICE_SKIP("no CUDA device here: " + s.ToString());
    SetTensorCoresEnabled(false);
  }
  void TearDown() override { SetTensorCoresEnabled(true); }

  // Runs `c` on the device (with 8-bit activations when q8, from rows
  // rounded once by RoundActivationsQ8 when rounded_once) and compares
  // every output with the reference; checks that the stride gaps of y were
  // not written.
  void RunCase(const Case& c, bool q8 = false, bool rounded_once = false) {
    const GgmlType t = GetParam();
    std::mt19937 rng(1234 + static_cast<int>(t));
    const uint64_t row_bytes = RowBytes(t, c.cols);
    const uint64_t mat_bytes = c.rows * row_bytes;
    const uint64_t slot = (mat_bytes + c.weight_offset + 255) / 256 * 256;
    std::vector<uint8_t> all(slot * c.n_weights);
    std::vector<std::vector<float>> deq(c.n_weights, std::vector<float>(c.rows * c.cols));
    std::vector<std::vector<uint8_t>> mats(c.n_weights);
    for (int w = 0; w < c.n_weights; ++w) {
      std::vector<uint8_t>& m = mats[w];
      m = kernels::testing_util::RandomWeights(t, c.rows, c.cols, rng);
      std::memcpy(&all[w * slot + c.weight_offset], m.data(), mat_bytes);
      for (int64_t r = 0; r < c.rows; ++r) {
        ASSERT_TRUE(kernels::DequantizeRow(t, m.data() + r * row_bytes, c.cols,
                                           &deq[w][r * c.cols]).ok());
      }
    }
    const int64_t x_stride = c.cols + c.x_pad, y_stride = c.rows + c.y_pad;
    std::vector<float> x(c.x_offset + c.x_rows * x_stride);
    std::uniform_real_distribution<float> val(-1.f, 1.f);
    for (float& v : x) v = val(rng);
    const int64_t n_entries = c.group_begin.empty() ? c.n_groups : c.group_begin.back();

    DeviceBuffer d_all = Upload(all);
    std::vector<const void*> table(c.n_weights);
    for (int w = 0; w < c.n_weights; ++w) {
      table[w] = static_cast<const uint8_t*>(d_all.data()) + w * slot + c.weight_offset;
    }
    DeviceBuffer d_table = Upload(table), d_gw = Upload(c.group_weight);
    DeviceBuffer d_begin = Upload(c.group_begin), d_xrow = Upload(c.x_row), d_x = Upload(x);
    AllocY(n_entries * y_stride);

    GroupedMatMul a;
    a.type = t;
    a.rows = c.rows;
    a.cols = c.cols;
    a.n_groups = c.n_groups;
    a.max_entries_per_group = c.max_entries;
    a.d_weights = d_table.as<const void* const>();
    a.d_group_weight = c.group_weight.empty() ? nullptr : d_gw.as<const int32_t>();
    a.d_group_begin = c.group_begin.empty() ? nullptr : d_begin.as<const int32_t>();
    a.d_x_row = c.x_row.empty() ? nullptr : d_xrow.as<const int32_t>();
    a.d_x = d_x.as<const float>() + c.x_offset;
    a.x_stride = x_stride;
    a.d_y = y_.as<float>();
    a.y_stride = y_stride;
    a.q8_activations = q8;
    DeviceBuffer d_q8;
    if (rounded_once) {
      const int64_t row_bytes = Q8ActivationRowBytes(t, c.cols);
      ASSERT_GT(row_bytes, 0);
      d_q8 = Upload(std::vector<uint8_t>(c.x_rows * row_bytes, 0xEE));
      ASSERT_TRUE(RoundActivationsQ8(t, a.d_x, c.x_rows, c.cols, x_stride, d_q8.as<uint8_t>(),
                                     nullptr)
                      .ok());
      a.d_x_q8 = d_q8.as<const uint8_t>();
    }
    ASSERT_TRUE(LaunchGroupedMatMul(a, nullptr).ok());
    std::vector<float> y(n_entries * y_stride);
    ASSERT_TRUE(Synchronize(nullptr).ok());
    ASSERT_TRUE(CopyToHost(y.data(), y_.data(), y.size() * sizeof(float), nullptr).ok());
    last_y_ = y;

    double max_abs = 0, max_rel = 0;
    int64_t gap_writes = 0;
    for (int g = 0; g < c.n_groups; ++g) {
      const int w = c.group_weight.empty() ? g : c.group_weight[g];
      const int64_t b = c.group_begin.empty() ? g : c.group_begin[g];
      const int64_t e_end = c.group_begin.empty() ? g + 1 : c.group_begin[g + 1];
      for (int64_t e = b; e < e_end; ++e) {
        const float* xr = &x[c.x_offset + (c.x_row.empty() ? e : c.x_row[e]) * x_stride];
        if (q8) {
          CompareWithCpu(t, mats[w].data(), &deq[w][0], c.rows, c.cols, xr, &y[e * y_stride],
                         &max_abs, &max_rel);
        } else {
          Compare(&deq[w][0], c.rows, c.cols, xr, &y[e * y_stride], &max_abs, &max_rel);
        }
        for (int64_t r = c.rows; r < y_stride; ++r) gap_writes += !std::isnan(y[e * y_stride + r]);
      }
    }
    std::printf("%-5s %-38s max_abs=%.3g max_rel=%.3g\n", kernels::TypeName(t).c_str(),
                ((rounded_once ? "q8 once: " : q8 ? "q8: " : "") + c.name).c_str(), max_abs,
                max_rel);
    EXPECT_LT(max_rel, kMaxRelErr) << c.name;
    EXPECT_EQ(gap_writes, 0) << "outputs were written into the y_stride gap";
  }

  // y_ = n floats of NaN (0xFF bytes), so unwritten outputs are visible.
  void AllocY(int64_t n) {
    auto buf = DeviceBuffer::Create(n * sizeof(float));
    ASSERT_TRUE(buf.ok()) << buf.status();
    y_ = std::move(*buf);
    ASSERT_TRUE(Memset(y_.data(), 0xFF, n * sizeof(float), nullptr).ok());
  }

  // Compares one output row y[0..rows) with W * x; an output never written
  // (still NaN) counts as an infinite error.
 public:
  static void Compare(const float* w, int64_t rows, int64_t cols, const float* x, const float* y,
                      double* max_abs, double* max_rel) {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double p = static_cast<double>(w[r * cols + k]) * x[k];
        sum += p;
        mag += std::fabs(p);
      }
      const double err = std::isnan(y[r]) ? INFINITY : std::fabs(y[r] - sum);
      *max_abs = std::max(*max_abs, err);
      *max_rel = std::max(*max_rel, err / std::max(mag, 1e-30));
    }
  }

  // As Compare, against the CPU's product of the raw matrix w_raw (type t)
  // with x rounded to 8 bits; deq (w_raw dequantized) gives the magnitude.
  static void CompareWithCpu(GgmlType t, const uint8_t* w_raw, const float* deq, int64_t rows,
                             int64_t cols, const float* x, const float* y, double* max_abs,
                             double* max_rel) {
    std::vector<float> want(rows);
    ASSERT_TRUE(kernels::MatMul(t, w_raw, rows, cols, x, 1, want.data(), nullptr).ok());
    for (int64_t r = 0; r < rows; ++r) {
      double mag = 0;
      for (int64_t k = 0; k < cols; ++k) mag += std::fabs(static_cast<double>(deq[r * cols + k]) * x[k]);
      const double err = std::isnan(y[r]) ? INFINITY : std::fabs(static_cast<double>(y[r]) - want[r]);
      *max_abs = std::max(*max_abs, err);
      *max_rel = std::max(*max_rel, err / std::max(mag, 1e-30));
    }
  }

 protected:
  // Row lengths: quantized rows are whole blocks; plain rows get a length
  // that is not a whole chunk, so the scalar tail runs.
  int64_t Cols(int64_t quant_cols) const {
    return IsPlain(GetParam()) ? quant_cols - 20 : quant_cols;
  }

  DeviceBuffer y_;
  std::vector<float> last_y_;  // RunCase's outputs
};

Case OneEntryDecode(int64_t cols) {
  Case c;
  c.name = "one group, one entry, 37 rows";
  c.rows = 37;     // not a whole row block: the last block is partial
  c.cols = cols;   // 32 lanes per row, several chunks each (both unroll halves)
  return c;
}

Case ExpertsThroughTable() {
  // Short rows: 8 or 16 lanes per row.
  return Named(internal::grouped_testing::ExpertsThroughTable(48, 256), "6 experts, table, empty groups");
}

Case MisalignedWeightsAndActivations(int64_t cols) {
  Case c;
  c.name = "weights +2 bytes, x +1 float, odd stride";
  c.rows = 20;
  c.cols = cols;
  c.n_groups = 1;
  c.group_begin = {0, 3};
  c.max_entries = 3;
  c.x_rows = 3;
  c.x_pad = 1;
  c.weight_offset = 2;  // only the 2-byte alignment every layout needs
  c.x_offset = 1;
  return c;
}

TEST_P(QuantMatMulSm90Test, OneGroupOneEntryDecode) { RunCase(OneEntryDecode(Cols(2304))); }

TEST_P(QuantMatMulSm90Test, ExpertsThroughWeightTableWithEmptyGroups) {
  RunCase(ExpertsThroughTable());
}

TEST_P(QuantMatMulSm90Test, OneEntryPerGroupWithoutBeginArray) {
  Case c;
  c.name = "3 groups, no begin array";
  c.rows = 24;
  c.cols = Cols(512);
  c.n_weights = 2;
  c.n_groups = 3;
  c.group_weight = {1, 1, 0};
  c.x_rows = 6;
  c.x_row = {5, 0, 2};
  c.max_entries = 4;  // ignored without a begin array: each group is one entry
  RunCase(c);
}

TEST_P(QuantMatMulSm90Test, GroupOf512EntriesAndAnUnevenOne) {
  Case c;
  c.name = "groups of 512 and 37 entries";
  c.rows = 40;
  c.cols = 256;
  c.n_weights = 2;
  c.n_groups = 2;
  c.group_begin = {0, 512, 549};
  c.max_entries = 512;
  c.x_rows = 549;
  RunCase(c);
}

TEST_P(QuantMatMulSm90Test, MisalignedWeightsAndActivations) {
  RunCase(MisalignedWeightsAndActivations(Cols(512)));
}

TEST_P(QuantMatMulSm90Test, DenseMatMulOfElevenTokens) {
  const GgmlType t = GetParam();
  std::mt19937 rng(99);
  const int64_t rows = 33, cols = Cols(512), n_tok = 11;  // one full tile of 8, one of 3
  std::vector<uint8_t> w = kernels::testing_util::RandomWeights(t, rows, cols, rng);
  std::vector<float> deq(rows * cols), x(n_tok * cols);
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_TRUE(kernels::DequantizeRow(t, w.data() + r * RowBytes(t, cols), cols,
                                       &deq[r * cols]).ok());
  }
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  for (float& v : x) v = val(rng);
  DeviceBuffer d_w = Upload(w), d_x = Upload(x);
  AllocY(n_tok * rows);
  ASSERT_TRUE(MatMul(t, d_w.data(), rows, cols, d_x.as<const float>(), n_tok, y_.as<float>(),
                     nullptr).ok());
  std::vector<float> y(n_tok * rows);
  ASSERT_TRUE(Synchronize(nullptr).ok());
  ASSERT_TRUE(CopyToHost(y.data(), y_.data(), y.size() * sizeof(float), nullptr).ok());
  double max_abs = 0, max_rel = 0;
  for (int64_t k = 0; k < n_tok; ++k) {
    Compare(deq.data(), rows, cols, &x[k * cols], &y[k * rows], &max_abs, &max_rel);
  }
  std::printf("%-5s %-34s max_abs=%.3g max_rel=%.3g\n", kernels::TypeName(t).c_str(),
              "MatMul 11 tokens", max_abs, max_rel);
  EXPECT_LT(max_rel, kMaxRelErr);
}

TEST_P(QuantMatMulSm90Test, DequantRowsIsBitExactWithTheCpu) {
  const GgmlType t = GetParam();
  std::mt19937 rng(7);
  const int64_t rows = 9, cols = Cols(512);
  std::vector<uint8_t> w = kernels::testing_util::RandomWeights(t, rows, cols, rng);
  const std::vector<int32_t> ids = {8, 0, 3, 3, 7};
  DeviceBuffer d_w = Upload(w), d_ids = Upload(ids);
  AllocY(ids.size() * cols);
  ASSERT_TRUE(DequantRows(t, d_w.data(), cols, d_ids.as<const int32_t>(), ids.size(),
                          y_.as<float>(), nullptr).ok());
  std::vector<float> got(ids.size() * cols), want(cols);
  ASSERT_TRUE(Synchronize(nullptr).ok());
  ASSERT_TRUE(CopyToHost(got.data(), y_.data(), got.size() * sizeof(float), nullptr).ok());
  int64_t mismatches = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(kernels::DequantizeRow(t, w.data() + ids[i] * RowBytes(t, cols), cols,
                                       want.data()).ok());
    for (int64_t k = 0; k < cols; ++k) {
      uint32_t a, b;
      std::memcpy(&a, &got[i * cols + k], 4);
      std::memcpy(&b, &want[k], 4);
      mismatches += a != b;
    }
  }
  std::printf("%-5s %-34s mismatched_bits=%lld of %lld\n", kernels::TypeName(t).c_str(),
              "DequantRows", static_cast<long long>(mismatches),
              static_cast<long long>(ids.size() * cols));
  EXPECT_EQ(mismatches, 0);
}

std::string TypeParamName(const ::testing::TestParamInfo<GgmlType>& info) {
  return kernels::TypeName(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantMatMulSm90Test, ::testing::ValuesIn(kTypes),
                         TypeParamName);

// 8-bit activations (GroupedMatMul::q8_activations) for the types that have
// them: decode's one entry, the routed experts' table with empty groups and
// gathered rows, and misaligned inputs.
class QuantMatMulQ8Sm90Test : public QuantMatMulSm90Test {};

TEST_P(QuantMatMulQ8Sm90Test, OneGroupOneEntryDecode) { RunCase(OneEntryDecode(2304), true); }

TEST_P(QuantMatMulQ8Sm90Test, ExpertsThroughWeightTableWithEmptyGroups) {
  RunCase(ExpertsThroughTable(), true);
}

TEST_P(QuantMatMulQ8Sm90Test, MisalignedWeightsAndActivations) {
  RunCase(MisalignedWeightsAndActivations(512), true);
}

// The same with the rows rounded once beforehand (GroupedMatMul::d_x_q8, as
// the batch pass rounds an input once for all its products).
TEST_P(QuantMatMulQ8Sm90Test, RowsRoundedOnceDecode) {
  RunCase(OneEntryDecode(2304), true, true);
}

TEST_P(QuantMatMulQ8Sm90Test, RowsRoundedOnceExpertsThroughWeightTable) {
  RunCase(ExpertsThroughTable(), true, true);
}

TEST_P(QuantMatMulQ8Sm90Test, RowsRoundedOnceMisalignedActivations) {
  RunCase(MisalignedWeightsAndActivations(512), true, true);
}

// A token's routed experts as the batch pass multiplies them: one row a
// group through the weight table, each group's own input row (the down
// products' case), rows rounded once; 700 rows make 88 tiles a group (the
// last of 4 rows), more tiles than resident blocks, so blocks stream
// several through their stages. Rows of 4,096 are a multiple of 16 bytes
// in every type here and give a lane at least 4 chunks (2,048 fewer).
Case OneRowPerGroup(int64_t cols = 4096) {
  Case c;
  c.name = absl::StrCat("one row a group, table, 700 rows of ", cols);
  c.rows = 700;
  c.cols = cols;
  c.n_weights = 4;
  c.n_groups = 6;
  c.group_weight = {2, 0, 3, 3, 1, 0};
  c.x_rows = 3;
  c.x_row = {0, 2, 1, 1, 0, 2};
  c.y_pad = 3;
  return c;
}

// Streamed through shared memory (SLUICE_CUDA_STREAM_GROUPED, decode_ops.h
// StreamGroupedQ8) the products pass the same gate as the grouped kernel's
// and are its bits.
TEST_P(QuantMatMulQ8Sm90Test, StreamedOneRowGroupsAreTheGroupedKernelsBits) {
  PrepareDecodeKernels();
  const bool was = StreamGroupedEnabled();
  std::vector<float> y[2];
  for (const bool on : {false, true}) {
    SetStreamGroupedEnabled(on);
    const uint64_t before = StreamedOneRowLaunches();
    RunCase(OneRowPerGroup(), true, true);
    EXPECT_EQ(StreamedOneRowLaunches() - before, on ? 1u : 0u);
    y[on] = last_y_;
  }
  // Short rows (fewer than 4 chunks a lane) keep the grouped kernel.
  SetStreamGroupedEnabled(true);
  const uint64_t before = StreamedOneRowLaunches();
  RunCase(OneRowPerGroup(2048), true, true);
  EXPECT_EQ(StreamedOneRowLaunches(), before);
  SetStreamGroupedEnabled(was);
  ASSERT_EQ(y[0].size(), y[1].size());
  int differ = 0;
  for (size_t i = 0; i < y[0].size(); ++i) {
    differ += std::memcmp(&y[0][i], &y[1][i], sizeof(float)) != 0;
  }
  EXPECT_EQ(differ, 0);
}

// Whether StreamGroupedQ8 can stage rows of `cols` of the test's type:
// its tiles (4 warps of 32 / L lane groups of 2 rows, L lanes a row) and
// the last one whole multiples of 16 bytes.
bool TilesOf16Bytes(GgmlType t, int64_t rows, int64_t cols) {
  const int64_t chunks = cols / 32, lanes = chunks >= 32 ? 32 : (chunks >= 16 ? 16 : 8);
  const int64_t tile = 4 * (32 / lanes) * 2, rb = static_cast<int64_t>(RowBytes(t, cols));
  return tile * rb % 16 == 0 && rows % tile * rb % 16 == 0;
}

// n random activation rows of cols on the device and the same rows
// rounded to 8 bits for products with weights of type t.
struct RoundedRows {
  DeviceBuffer x, q8;
};
RoundedRows RandomRoundedRows(GgmlType t, int64_t n, int64_t cols, std::mt19937& rng) {
  std::vector<float> x(n * cols);
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  for (float& v : x) v = val(rng);
  RoundedRows r{Upload(x), Upload(std::vector<uint8_t>(n * Q8ActivationRowBytes(t, cols)))};
  EXPECT_TRUE(
      RoundActivationsQ8(t, r.x.as<float>(), n, cols, cols, r.q8.as<uint8_t>(), nullptr).ok());
  return r;
}

// Groups of several entries rounded once (a decode batch's products:
// experts through the table with empty groups and repeated rows; groups
// of up to 17 entries, in rounds of 8 a tile, some rounds empty; one
// dense group of 19 misaligned rows; rows of 512 where a lane sums one
// chunk, their row counts whole tiles or not) streamed
// (SLUICE_CUDA_STREAM_ENTRIES, StreamGroupedQ8) pass the grouped kernel's
// gate and are its bits; tiles that are no multiple of 16 bytes keep the
// grouped kernel.
TEST_P(QuantMatMulQ8Sm90Test, StreamedEntriesAreTheGroupedKernelsBits) {
  PrepareDecodeKernels();
  const bool was = StreamEntriesEnabled();
  // The streamed kernel itself: the integer tensor cores (on by default)
  // would take these products first.
  const bool int8_was = Int8MmaEnabled();
  SetInt8MmaEnabled(false);
  using internal::grouped_testing::ExpertsThroughTable;
  using internal::grouped_testing::GroupOf19Misaligned;
  Case rounds = Named(ExpertsThroughTable(200, 4096), "experts, groups of up to 17 entries");
  rounds.group_begin = {0, 11, 11, 14, 31, 32, 32};  // sizes 11, 0, 3, 17, 1, 0
  rounds.max_entries = 17;
  rounds.x_row.clear();
  for (int e = 0; e < 32; ++e) rounds.x_row.push_back((e * 5) % 7);
  // Rows of 256 (8 lanes a row, GroupSumScattered leaving each lane two
  // sums) in the same groups.
  Case rounds256 = rounds;
  rounds256.cols = 256;
  rounds256.name = "groups of up to 17 entries, rows of 256";
  const Case cases[] = {Named(ExpertsThroughTable(700, 4096), "experts, 700 rows of 4096"),
                        rounds, rounds256,
                        Named(ExpertsThroughTable(300, 512), "experts, 300 rows of 512"),
                        Named(ExpertsThroughTable(301, 512), "experts, 301 rows of 512"),
                        Named(GroupOf19Misaligned(300, 4096), "19 misaligned rows of 4096")};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const bool streams = TilesOf16Bytes(GetParam(), c.rows, c.cols);
    std::vector<float> y[2];
    for (const bool on : {false, true}) {
      SetStreamEntriesEnabled(on);
      const uint64_t before = StreamedEntryLaunches();
      RunCase(c, true, true);
      EXPECT_EQ(StreamedEntryLaunches() - before, on && streams ? 1u : 0u);
      y[on] = last_y_;
    }
    ASSERT_EQ(y[0].size(), y[1].size());
    int differ = 0;
    for (size_t i = 0; i < y[0].size(); ++i) {
      differ += std::memcmp(&y[0][i], &y[1][i], sizeof(float)) != 0;
    }
    EXPECT_EQ(differ, 0);
  }
  // A dense product of 19 rows (MatMul: one group of single_group_entries,
  // its runs of entries on tiles of their own) gives the same bits, with
  // runs of 8 (SLUICE_CUDA_ENTRY_TILES_PER_SM=0) and of 1 (a target no
  // launch reaches: 19 rounds a row block, StreamEntriesPerRound).
  const GgmlType t = GetParam();
  constexpr int64_t kRows = 300, kCols = 4096, kTok = 19;
  std::mt19937 rng(77);
  DeviceBuffer d_w = Upload(kernels::testing_util::RandomWeights(t, kRows, kCols, rng));
  const RoundedRows in = RandomRoundedRows(t, kTok, kCols, rng);
  const DeviceBuffer &d_x = in.x, &d_q8 = in.q8;
  std::vector<float> dense[3];
  for (const int arm : {0, 1, 2}) {
    const bool on = arm != 0;
    SetStreamEntriesEnabled(on);
    if (arm == 1) setenv("SLUICE_CUDA_ENTRY_TILES_PER_SM", "0", 1);
    if (arm == 2) setenv("SLUICE_CUDA_ENTRY_TILES_PER_SM", "1000000", 1);
    const uint64_t before = StreamedEntryLaunches();
    DeviceBuffer d_y = Upload(std::vector<float>(kTok * kRows, 0.0f));
    ASSERT_TRUE(MatMul(t, d_w.data(), kRows, kCols, d_x.as<float>(), kTok, d_y.as<float>(),
                       nullptr, /*tensor_cores=*/false, /*q8_activations=*/true,
                       d_q8.as<uint8_t>())
                    .ok());
    unsetenv("SLUICE_CUDA_ENTRY_TILES_PER_SM");
    dense[arm].resize(kTok * kRows);
    ASSERT_TRUE(Synchronize(nullptr).ok());
    ASSERT_TRUE(CopyToHost(dense[arm].data(), d_y.data(), dense[arm].size() * sizeof(float),
                           nullptr).ok());
    EXPECT_EQ(StreamedEntryLaunches() - before,
              on && TilesOf16Bytes(t, kRows, kCols) ? 1u : 0u);
  }
  for (const int arm : {1, 2}) {
    SCOPED_TRACE(arm == 1 ? "runs of 8" : "runs of 1");
    EXPECT_EQ(std::memcmp(dense[0].data(), dense[arm].data(), dense[0].size() * sizeof(float)), 0);
  }
  SetStreamEntriesEnabled(was);
  SetInt8MmaEnabled(int8_was);
}

// Products of several entries a group on the integer tensor cores
// (SLUICE_CUDA_INT8_MMA, kquant_mma_device.h: Q4_K, Q5_K, Q6_K and Q1_0, summing each
// super-block in integers as the CPU backend does) pass the same gate
// against the CPU: experts through the table with empty groups and groups
// of up to 17 entries (two n8 tiles a warp from 16; rows of 16, 2 and 1
// super-blocks: each block's warps split 4, 2 and 1 ways), and one dense
// group of 19 rows with weights 2 bytes off their alignment. Other types keep their kernels (no such launch).
TEST_P(QuantMatMulQ8Sm90Test, Int8MmaProductsPassTheGate) {
  PrepareDecodeKernels();
  const bool was = Int8MmaEnabled();
  SetInt8MmaEnabled(true);
  const GgmlType t = GetParam();
  const bool takes = t != GgmlType::kQ8_0;  // Q4_K, Q5_K, Q6_K and Q1_0
  using internal::grouped_testing::ExpertsThroughTable;
  using internal::grouped_testing::GroupOf19Misaligned;
  Case rounds = Named(ExpertsThroughTable(200, 4096), "int8 mma: groups of up to 17 entries");
  rounds.group_begin = {0, 11, 11, 14, 31, 32, 32};
  rounds.max_entries = 17;
  rounds.x_row.clear();
  for (int e = 0; e < 32; ++e) rounds.x_row.push_back((e * 5) % 7);
  const Case cases[] = {Named(ExpertsThroughTable(700, 4096), "int8 mma: experts"), rounds,
                        Named(ExpertsThroughTable(301, 512), "int8 mma: rows of 2 blocks"),
                        Named(ExpertsThroughTable(77, 256), "int8 mma: rows of 1 block"),
                        Named(GroupOf19Misaligned(300, 2048), "int8 mma: 19 misaligned rows")};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const uint64_t before = Int8MmaLaunches();
    RunCase(c, true, true);
    EXPECT_EQ(Int8MmaLaunches() - before, takes ? 1u : 0u);
  }
  SetInt8MmaEnabled(was);
}

// A pair (GroupedMatMul::pair_offset: the experts' gate and up through one
// table, a dense pair over one group of rows) gives each matrix's outputs
// the bits of its own launch, in one streamed launch where its tiles
// stream (PairedEntryLaunches) and in two where pairs are off; with the
// integer tensor cores on (SLUICE_CUDA_INT8_MMA), in one of theirs where
// they take the type.
TEST_P(QuantMatMulQ8Sm90Test, PairedEntriesAreEachMatrixsOwnBits) {
  PrepareDecodeKernels();
  const GgmlType t = GetParam();
  // Rows of 2,048: both matrices' tiles of every type fit the stages.
  constexpr int64_t kRows = 300, kCols = 2048, kXRows = 19;
  constexpr int kExperts = 5;
  std::mt19937 rng(91);
  // Table: the first matrices (gate) 0..4, the second (up) 5..9.
  std::vector<DeviceBuffer> mats;
  std::vector<const void*> table;
  for (int i = 0; i < 2 * kExperts; ++i) {
    mats.push_back(Upload(kernels::testing_util::RandomWeights(t, kRows, kCols, rng)));
    table.push_back(mats.back().data());
  }
  DeviceBuffer d_table = Upload(table);
  const RoundedRows in = RandomRoundedRows(t, kXRows, kCols, rng);
  const DeviceBuffer &d_x = in.x, &d_q8 = in.q8;
  // Groups of 3, 0, 11 and 2 entries (some rows repeated).
  DeviceBuffer d_gw = Upload(std::vector<int32_t>{4, 1, 0, 2});
  DeviceBuffer d_begin = Upload(std::vector<int32_t>{0, 3, 3, 14, 16});
  std::vector<int32_t> x_row;
  for (int e = 0; e < 16; ++e) x_row.push_back((e * 7) % kXRows);
  DeviceBuffer d_x_row = Upload(x_row);
  const bool streams = TilesOf16Bytes(t, kRows, kCols);
  const bool int8_takes = t != GgmlType::kQ8_0;  // Q4_K, Q5_K, Q6_K and Q1_0
  const bool was = PairedEntriesEnabled(), int8_was = Int8MmaEnabled();
  for (const bool int8 : {false, true}) {
    SetInt8MmaEnabled(int8);
    for (const bool dense : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << (dense ? "a dense pair over 19 rows" : "experts through the table")
                   << (int8 ? ", int8 mma on" : ""));
      const int64_t entries = dense ? kXRows : 16;
      GroupedMatMul a;
      a.type = t;
      a.rows = kRows;
      a.cols = kCols;
      a.d_weights = d_table.as<const void* const>();
      a.d_x = d_x.as<float>();
      a.x_stride = kCols;
      a.y_stride = kRows;
      a.tensor_cores = false;
      a.q8_activations = true;
      a.d_x_q8 = d_q8.as<uint8_t>();
      if (dense) {
        a.n_groups = 1;
        a.max_entries_per_group = kXRows;
        a.one_group_entries = kXRows;
      } else {
        a.n_groups = 4;
        a.max_entries_per_group = 11;
        a.d_group_weight = d_gw.as<const int32_t>();
        a.d_group_begin = d_begin.as<const int32_t>();
        a.d_x_row = d_x_row.as<const int32_t>();
      }
      auto run = [&](const GroupedMatMul& g, float* y0, float* y1) {
        DeviceBuffer d_y = Upload(std::vector<float>(2 * entries * kRows, 0.0f));
        GroupedMatMul b = g;
        b.d_y = d_y.as<float>();
        if (b.pair_offset != 0) b.d_y_up = d_y.as<float>() + entries * kRows;
        ASSERT_TRUE(LaunchGroupedMatMul(b, nullptr).ok());
        ASSERT_TRUE(Synchronize(nullptr).ok());
        ASSERT_TRUE(CopyToHost(y0, d_y.data(), entries * kRows * sizeof(float), nullptr).ok());
        if (y1 != nullptr) {
          ASSERT_TRUE(CopyToHost(y1, d_y.as<float>() + entries * kRows,
                                 entries * kRows * sizeof(float), nullptr).ok());
        }
      };
      // Each matrix alone: the first through the table, the second through
      // the table from its half.
      std::vector<float> alone[2] = {std::vector<float>(entries * kRows),
                                     std::vector<float>(entries * kRows)};
      run(a, alone[0].data(), nullptr);
      GroupedMatMul second = a;
      second.d_weights = d_table.as<const void* const>() + (dense ? 1 : kExperts);
      run(second, alone[1].data(), nullptr);
      for (const bool on : {false, true}) {
        SCOPED_TRACE(on ? "one launch" : "two launches");
        SetPairedEntriesEnabled(on);
        GroupedMatMul pair = a;
        pair.pair_offset = dense ? 1 : kExperts;
        std::vector<float> y[2] = {std::vector<float>(entries * kRows),
                                   std::vector<float>(entries * kRows)};
        const uint64_t before = PairedEntryLaunches(), int8_before = Int8MmaLaunches();
        run(pair, y[0].data(), y[1].data());
        const bool int8_pair = int8 && int8_takes;
        EXPECT_EQ(PairedEntryLaunches() - before, on && (int8_pair || streams) ? 1u : 0u);
        EXPECT_EQ(Int8MmaLaunches() - int8_before, int8_pair ? (on ? 1u : 2u) : 0u);
        for (int m = 0; m < 2; ++m) {
          EXPECT_EQ(std::memcmp(y[m].data(), alone[m].data(), y[m].size() * sizeof(float)), 0)
              << "matrix " << m;
        }
      }
    }
  }
  SetPairedEntriesEnabled(was);
  SetInt8MmaEnabled(int8_was);
}

constexpr GgmlType kQ8Types[] = {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K,
                                 GgmlType::kQ6_K, GgmlType::kQ1_0};
INSTANTIATE_TEST_SUITE_P(QuantizedTypes, QuantMatMulQ8Sm90Test, ::testing::ValuesIn(kQ8Types),
                         TypeParamName);

// Decode is replayed from a CUDA graph; the expert slot cache changes the
// pointer table between replays. A captured launch must read the table (and
// group_weight) when it runs, not when it was captured.
TEST(QuantMatMulGraphSm90Test, ReplayFollowsThePointerTableAndRouting) {
  if (absl::Status s = SetDevice(0); !s.ok()) SLUICE_SKIP("no CUDA device here: " + s.ToString());
  constexpr GgmlType kType = GgmlType::kQ4_K;
  constexpr int64_t kRows = 32, kCols = 512;
  std::mt19937 rng(21);
  std::vector<std::vector<uint8_t>> w(3);
  std::vector<std::vector<float>> deq(3, std::vector<float>(kRows * kCols));
  std::vector<DeviceBuffer> d_w;
  for (int i = 0; i < 3; ++i) {
    w[i] = kernels::testing_util::RandomWeights(kType, kRows, kCols, rng);
    for (int64_t r = 0; r < kRows; ++r) {
      ASSERT_TRUE(kernels::DequantizeRow(kType, &w[i][r * RowBytes(kType, kCols)], kCols,
                                         &deq[i][r * kCols]).ok());
    }
    d_w.push_back(Upload(w[i]));
  }
  std::vector<float> x(kCols);
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  for (float& v : x) v = val(rng);
  std::vector<const void*> table = {d_w[0].data(), d_w[1].data()};
  DeviceBuffer d_table = Upload(table), d_gw = Upload(std::vector<int32_t>{0});
  DeviceBuffer d_x = Upload(x);
  auto d_y = DeviceBuffer::Create(kRows * sizeof(float));
  ASSERT_TRUE(d_y.ok());
  auto stream = CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();

  GroupedMatMul a;
  a.type = kType;
  a.rows = kRows;
  a.cols = kCols;
  a.n_groups = 1;
  a.max_entries_per_group = 1;
  a.d_weights = d_table.as<const void* const>();
  a.d_group_weight = d_gw.as<const int32_t>();
  a.d_x = d_x.as<const float>();
  a.x_stride = kCols;
  a.d_y = d_y->as<float>();
  a.y_stride = kRows;
  ASSERT_TRUE(Graph::BeginCapture(*stream).ok());
  ASSERT_TRUE(LaunchGroupedMatMul(a, *stream).ok());
  auto graph = Graph::EndCapture(*stream);
  ASSERT_TRUE(graph.ok()) << graph.status();

  // Replays: table {W0, W1} routing to 0; then routing to 1; then the table
  // entry 1 swapped for W2.
  const int expected[3] = {0, 1, 2};
  for (int step = 0; step < 3; ++step) {
    if (step == 1) {
      ASSERT_TRUE(CopyToDevice(d_gw.data(), std::vector<int32_t>{1}.data(), 4, *stream).ok());
    }
    if (step == 2) {
      const void* w2 = d_w[2].data();
      ASSERT_TRUE(CopyToDevice(d_table.as<const void*>() + 1, &w2, sizeof(w2), *stream).ok());
    }
    ASSERT_TRUE(graph->Launch(*stream).ok());
    std::vector<float> y(kRows);
    ASSERT_TRUE(CopyToHost(y.data(), d_y->data(), kRows * sizeof(float), *stream).ok());
    ASSERT_TRUE(Synchronize(*stream).ok());
    double max_abs = 0, max_rel = 0;
    QuantMatMulSm90Test::Compare(deq[expected[step]].data(), kRows, kCols, x.data(), y.data(),
                                 &max_abs, &max_rel);
    EXPECT_LT(max_rel, kMaxRelErr) << "replay " << step << " did not use W" << expected[step];
  }
  DestroyStream(*stream);
}

// ---- argument checks: no device needed (nothing is launched) -------------

TEST(QuantMatMulArgsTest, SupportsExactlyTheKernelTypes) {
  for (GgmlType t : kTypes) EXPECT_TRUE(MatMulSupported(t)) << kernels::TypeName(t);
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kIQ2_XXS,
                     GgmlType::kI32, GgmlType::kQ8_K}) {
    EXPECT_FALSE(MatMulSupported(t)) << kernels::TypeName(t);
  }
}

TEST(QuantMatMulArgsTest, RowBytesFollowTheBlockTable) {
  EXPECT_EQ(RowBytes(GgmlType::kQ4_K, 2048), 1152u);
  EXPECT_EQ(RowBytes(GgmlType::kQ5_K, 2048), 1408u);
  EXPECT_EQ(RowBytes(GgmlType::kQ6_K, 2048), 1680u);
  EXPECT_EQ(RowBytes(GgmlType::kQ1_0, 2048), 288u);
  EXPECT_EQ(RowBytes(GgmlType::kQ8_0, 64), 68u);
  EXPECT_EQ(RowBytes(GgmlType::kF32, 100), 400u);
  EXPECT_EQ(RowBytes(GgmlType::kBF16, 6), 12u);
}

GroupedMatMul ValidArgs() {
  static const void* const kFakeTable[1] = {nullptr};
  static float fake_y[1];
  GroupedMatMul a;
  a.type = GgmlType::kQ4_K;
  a.rows = 16;
  a.cols = 256;
  a.n_groups = 1;
  a.max_entries_per_group = 1;
  a.d_weights = kFakeTable;
  a.d_x = fake_y;
  a.x_stride = 256;
  a.d_y = fake_y;
  a.y_stride = 16;
  return a;
}

// Each bad field is rejected before any launch, with a message naming it.
TEST(QuantMatMulArgsTest, RejectsBadArgumentsNamingTheField) {
  struct Bad {
    void (*mutate)(GroupedMatMul&);
    const char* message;
  } cases[] = {
      {[](GroupedMatMul& a) { a.type = GgmlType::kQ2_K; }, "q2_k is not supported"},
      {[](GroupedMatMul& a) { a.cols = 300; a.x_stride = 300; }, "cols=300"},
      {[](GroupedMatMul& a) { a.rows = 0; }, "rows=0"},
      {[](GroupedMatMul& a) { a.n_groups = -1; }, "n_groups=-1"},
      {[](GroupedMatMul& a) { a.max_entries_per_group = 0; }, "max_entries_per_group=0"},
      {[](GroupedMatMul& a) { a.x_stride = 255; }, "x_stride=255"},
      {[](GroupedMatMul& a) { a.y_stride = 15; }, "y_stride=15"},
      {[](GroupedMatMul& a) { a.d_y = nullptr; }, "not null"},
      {[](GroupedMatMul& a) { a.rows = 70000LL * 64; a.y_stride = a.rows; }, "row blocks"},
      {[](GroupedMatMul& a) { a.n_groups = 70000; }, "n_groups=70000"},
      {[](GroupedMatMul& a) { a.pair_offset = 1; }, "pair_offset=1 needs to be positive and d_y_up"},
      {[](GroupedMatMul& a) { a.pair_offset = -2; a.d_y_up = a.d_y; }, "pair_offset=-2"},
      {[](GroupedMatMul& a) { a.n_groups = 2; a.one_group_entries = 4; },
       "one_group_entries=4 needs n_groups=1"},
  };
  for (const Bad& b : cases) {
    GroupedMatMul a = ValidArgs();
    b.mutate(a);
    absl::Status s = LaunchGroupedMatMul(a, nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.message;
    EXPECT_NE(std::string(s.message()).find(b.message), std::string::npos) << s;
  }
}

TEST(QuantMatMulArgsTest, MatMulAndDequantRowsCheckTheirArguments) {
  float f[1] = {0.0f};
  int32_t id[1] = {0};
  absl::Status s = MatMul(GgmlType::kIQ2_XXS, f, 4, 256, f, 1, f, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("iq2_xxs"), std::string::npos) << s;
  s = MatMul(GgmlType::kQ8_0, f, 4, 256, f, 0, f, nullptr);
  EXPECT_NE(std::string(s.message()).find("n_tok=0"), std::string::npos) << s;
  s = DequantRows(GgmlType::kQ1_0, f, 64, id, 1, f, nullptr);
  EXPECT_NE(std::string(s.message()).find("cols=64"), std::string::npos) << s;
  s = DequantRows(GgmlType::kQ6_K, nullptr, 256, id, 1, f, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  uint8_t q[1];
  s = RoundActivationsQ8(GgmlType::kF16, f, 1, 256, 256, q, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("f16"), std::string::npos) << s;
  s = RoundActivationsQ8(GgmlType::kQ4_K, f, 1, 96, 96, q, nullptr);  // not whole groups
  EXPECT_NE(std::string(s.message()).find("96 columns"), std::string::npos) << s;
  EXPECT_EQ(Q8ActivationFormat(GgmlType::kQ6_K, 512), Q8Format::kQ8K);
  EXPECT_EQ(Q8ActivationFormat(GgmlType::kQ1_0, 512), Q8Format::kQ8Z);
  EXPECT_EQ(Q8ActivationRowBytes(GgmlType::kQ8_0, 64), 64 + 4 * 8);  // 2 groups, padded to 4
  EXPECT_EQ(Q8ActivationRowBytes(GgmlType::kQ4_K, 256), 256 + 4 * 4 + 16 * 4);
}

}  // namespace
}  // namespace sluice::cuda
