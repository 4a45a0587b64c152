// The tensor-core kernel (quant_matmul_mma_kernel.h) on the GPU, part of
// //kernels/cuda:quant_matmul_sm90_test: every type it takes (F16, BF16,
// Q8_0, Q4_K, Q5_K, Q6_K, Q1_0) on the bench35 shapes (expert 2048->512 and
// 512->2048, a dense 1024->4096) with groups of 0, 1, 17, 33 and 512
// entries, weight tables, gathered activations, padded strides and
// misaligned addresses, against double-precision host references. Each
// case also runs on the FP32 kernel and prints how far the two differ (the
// A/B the parity runs will see). The device cases skip (SLUICE_SKIP) where
// no CUDA device is present; the dispatch rules need none.
//
// Errors, relative to sum_c |w_c x_c|:
//  * against the BF16-rounded operands (w and x each rounded to nearest
//    even, products summed exactly): what remains is F32 accumulation in the
//    tensor cores, at most cols/16 roundings of <= 2^-22 each (the MMA may
//    truncate), i.e. 6e-5 at 4096 columns and ~1e-6 in practice, plus the
//    rare weight whose fused decode lands on the neighbouring BF16 value.
//    Bound 1e-4; a wrong fragment index or k order gives 1e-2 or more.
//  * against the exact operands: each product is off by at most
//    (1 + 2^-8)^2 - 1 < 2^-7 of |w x| (BF16 keeps 8 significant bits), so
//    the bound is 2^-7 + 1e-4; random data shows about 1e-3.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/testing/skip.h"
#include "format/ggml_type.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/quant_matmul.h"
#include "kernels/cuda/sm90_test_upload.h"

namespace sluice::cuda {
namespace {

constexpr double kMaxRelErrBf16 = 1e-4;
constexpr double kMaxRelErrExact = 0x1p-7 + 1e-4;

constexpr GgmlType kTensorCoreTypes[] = {GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                                         GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                                         GgmlType::kQ1_0};

// f rounded to BF16 (nearest even), as cvt.rn.bf16x2.f32 does for finite f.
float RoundBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = ((u + 0x7FFFu + ((u >> 16) & 1)) >> 16) << 16;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Case {
  std::string name;
  int64_t rows = 0, cols = 0;
  int n_weights = 1;
  std::vector<int32_t> group_weight;  // empty: group g uses weight g
  std::vector<int32_t> group_begin;   // n_groups + 1 offsets
  std::vector<int32_t> x_row;         // empty: entry e reads row e
  int64_t x_rows = 0, x_pad = 0, y_pad = 0;
  int weight_offset = 0, x_offset = 0;
  bool dense = false;  // through MatMul (one group, no table) instead
};

struct Errors {
  double vs_bf16 = 0, vs_exact = 0, vs_fp32_kernel = 0;
  int64_t gap_writes = 0;
};

class TensorCoreSm90Test : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    if (absl::Status s = SetDevice(0); !s.ok()) SLUICE_SKIP("no CUDA device here: " + s.ToString());
  }
  void TearDown() override { SetTensorCoresEnabled(true); }

  // Random weights and activations for `c`, uploaded; the host copies stay
  // for the references.
  void Prepare(const Case& c) {
    const GgmlType t = GetParam();
    std::mt19937 rng(4321 + static_cast<int>(t));
    const uint64_t row_bytes = RowBytes(t, c.cols);
    const uint64_t mat_bytes = c.rows * row_bytes;
    slot_ = (mat_bytes + c.weight_offset + 255) / 256 * 256;
    std::vector<uint8_t> all(slot_ * c.n_weights);
    deq_.assign(c.n_weights, std::vector<float>(c.rows * c.cols));
    deq_bf16_.assign(c.n_weights, std::vector<float>(c.rows * c.cols));
    for (int w = 0; w < c.n_weights; ++w) {
      std::vector<uint8_t> m = kernels::testing_util::RandomWeights(t, c.rows, c.cols, rng);
      std::memcpy(&all[w * slot_ + c.weight_offset], m.data(), mat_bytes);
      for (int64_t r = 0; r < c.rows; ++r) {
        ASSERT_TRUE(kernels::DequantizeRow(t, m.data() + r * row_bytes, c.cols,
                                           &deq_[w][r * c.cols]).ok());
      }
      std::transform(deq_[w].begin(), deq_[w].end(), deq_bf16_[w].begin(), RoundBf16);
    }
    x_stride_ = c.cols + c.x_pad;
    y_stride_ = c.rows + c.y_pad;
    x_.assign(c.x_offset + c.x_rows * x_stride_, 0.0f);
    std::uniform_real_distribution<float> val(-1.f, 1.f);
    for (float& v : x_) v = val(rng);
    x_bf16_.resize(x_.size());
    std::transform(x_.begin(), x_.end(), x_bf16_.begin(), RoundBf16);
    d_all_ = Upload(all);
    std::vector<const void*> table(c.n_weights);
    for (int w = 0; w < c.n_weights; ++w) {
      table[w] = d_all_.as<uint8_t>() + w * slot_ + c.weight_offset;
    }
    d_table_ = Upload(table);
    d_gw_ = Upload(c.group_weight);
    d_begin_ = Upload(c.group_begin);
    d_xrow_ = Upload(c.x_row);
    d_x_ = Upload(x_);
  }

  // Runs `c` on whichever kernel the dispatch picks and returns y (NaN where
  // nothing was written).
  std::vector<float> Run(const Case& c) {
    const int64_t n_entries = c.group_begin.back();
    auto y = DeviceBuffer::Create(n_entries * y_stride_ * sizeof(float));
    EXPECT_TRUE(y.ok()) << y.status();
    EXPECT_TRUE(Memset(y->data(), 0xFF, n_entries * y_stride_ * sizeof(float), nullptr).ok());
    if (c.dense) {  // packed rows: MatMul has no strides or offsets
      EXPECT_TRUE(c.x_pad == 0 && c.y_pad == 0 && c.x_offset == 0 && c.x_row.empty());
      EXPECT_TRUE(MatMul(GetParam(), d_all_.as<uint8_t>() + c.weight_offset, c.rows, c.cols,
                         d_x_.as<const float>(), n_entries, y->as<float>(), nullptr).ok());
    } else {
      GroupedMatMul a;
      a.type = GetParam();
      a.rows = c.rows;
      a.cols = c.cols;
      a.n_groups = static_cast<int>(c.group_begin.size()) - 1;
      a.max_entries_per_group = MaxEntries(c);
      a.d_weights = d_table_.as<const void* const>();
      a.d_group_weight = c.group_weight.empty() ? nullptr : d_gw_.as<const int32_t>();
      a.d_group_begin = d_begin_.as<const int32_t>();
      a.d_x_row = c.x_row.empty() ? nullptr : d_xrow_.as<const int32_t>();
      a.d_x = d_x_.as<const float>() + c.x_offset;
      a.x_stride = x_stride_;
      a.d_y = y->as<float>();
      a.y_stride = y_stride_;
      EXPECT_TRUE(LaunchGroupedMatMul(a, nullptr).ok());
    }
    std::vector<float> host(n_entries * y_stride_);
    EXPECT_TRUE(Synchronize(nullptr).ok());
    EXPECT_TRUE(CopyToHost(host.data(), y->data(), host.size() * sizeof(float), nullptr).ok());
    return host;
  }

  static int MaxEntries(const Case& c) {
    int m = 0;
    for (size_t g = 0; g + 1 < c.group_begin.size(); ++g) {
      m = std::max(m, c.group_begin[g + 1] - c.group_begin[g]);
    }
    return m;
  }

  // Errors of y (tensor cores) and its distance from y_fp32 (the FP32
  // kernel), all relative to the row's sum |w x|.
  Errors Measure(const Case& c, const std::vector<float>& y,
                 const std::vector<float>& y_fp32) const {
    Errors err;
    for (size_t g = 0; g + 1 < c.group_begin.size(); ++g) {
      const int w = c.group_weight.empty() ? static_cast<int>(g) : c.group_weight[g];
      for (int64_t e = c.group_begin[g]; e < c.group_begin[g + 1]; ++e) {
        const int64_t xo = c.x_offset + (c.x_row.empty() ? e : c.x_row[e]) * x_stride_;
        const float* xr = &x_[xo];
        const float* xb = &x_bf16_[xo];
        for (int64_t r = 0; r < c.rows; ++r) {
          const float* wr = &deq_[w][r * c.cols];
          const float* wb = &deq_bf16_[w][r * c.cols];
          double exact = 0, rounded = 0, mag = 0;
          for (int64_t k = 0; k < c.cols; ++k) {
            const double p = static_cast<double>(wr[k]) * xr[k];
            exact += p;
            mag += std::fabs(p);
            rounded += static_cast<double>(wb[k]) * xb[k];
          }
          const float got = y[e * y_stride_ + r];
          const double m = std::max(mag, 1e-30);
          err.vs_bf16 = std::max(err.vs_bf16, std::isnan(got) ? INFINITY : std::fabs(got - rounded) / m);
          err.vs_exact = std::max(err.vs_exact, std::isnan(got) ? INFINITY : std::fabs(got - exact) / m);
          err.vs_fp32_kernel =
              std::max(err.vs_fp32_kernel, std::fabs(static_cast<double>(got) - y_fp32[e * y_stride_ + r]) / m);
        }
        for (int64_t r = c.rows; r < y_stride_; ++r) err.gap_writes += !std::isnan(y[e * y_stride_ + r]);
      }
    }
    return err;
  }

  // Runs `c` on the tensor cores (checked against both references) and on
  // the FP32 kernel (the difference between the two is printed).
  void Check(const Case& c) {
    const GgmlType t = GetParam();
    ASSERT_TRUE(UsesTensorCores(t, c.cols, MaxEntries(c))) << c.name;
    Prepare(c);
    if (HasFatalFailure()) return;
    const std::vector<float> y_tc = Run(c);
    SetTensorCoresEnabled(false);
    const std::vector<float> y_fp32 = Run(c);
    SetTensorCoresEnabled(true);
    const Errors err = Measure(c, y_tc, y_fp32);
    std::printf("%-5s %-44s rel_err_vs_bf16=%.3g rel_err_vs_exact=%.3g rel_diff_vs_fp32_kernel=%.3g\n",
                kernels::TypeName(t).c_str(), c.name.c_str(), err.vs_bf16, err.vs_exact,
                err.vs_fp32_kernel);
    EXPECT_LT(err.vs_bf16, kMaxRelErrBf16) << c.name;
    EXPECT_LT(err.vs_exact, kMaxRelErrExact) << c.name;
    EXPECT_LT(err.vs_fp32_kernel, kMaxRelErrExact) << c.name;
    EXPECT_EQ(err.gap_writes, 0) << c.name << ": outputs were written into the y_stride gap";
  }

  uint64_t slot_ = 0;
  int64_t x_stride_ = 0, y_stride_ = 0;
  std::vector<std::vector<float>> deq_, deq_bf16_;  // dequantized weights, and rounded
  std::vector<float> x_, x_bf16_;
  DeviceBuffer d_all_, d_table_, d_gw_, d_begin_, d_xrow_, d_x_;
};

// bench35's gate/up shape: groups of 0, 1, 17 and 512 entries (the last 16
// whole entry tiles) through a table, every activation gathered.
TEST_P(TensorCoreSm90Test, Experts2048To512Groups0And1And17And512) {
  Case c;
  c.name = "2048->512, groups 0/1/17/512, table, gather";
  c.rows = 512;
  c.cols = 2048;
  c.n_weights = 3;
  c.group_weight = {1, 0, 2, 1};
  c.group_begin = {0, 0, 1, 18, 530};
  c.x_rows = 541;
  for (int e = 0; e < 530; ++e) c.x_row.push_back((e * 37 + 11) % 541);
  c.x_pad = 8;
  c.y_pad = 5;
  Check(c);
}

// bench35's down shape: short rows (16 chunks), 2048 rows, groups of 17, 0
// and 33 entries, misaligned weights (+2 bytes) and activations (+1 float).
TEST_P(TensorCoreSm90Test, Experts512To2048MisalignedWithStrides) {
  Case c;
  c.name = "512->2048, groups 17/0/33, +2 B, +1 float";
  c.rows = 2048;
  c.cols = 512;
  c.n_weights = 2;
  c.group_weight = {1, 1, 0};
  c.group_begin = {0, 17, 17, 50};
  c.x_rows = 50;
  c.x_pad = 3;
  c.y_pad = 1;
  c.weight_offset = 2;
  c.x_offset = 1;
  Check(c);
}

// A dense projection through MatMul: 40 tokens (one full entry tile and one
// of 8), 4096 rows, 1024 columns.
TEST_P(TensorCoreSm90Test, DenseMatMul1024To4096Of40Tokens) {
  Case c;
  c.name = "MatMul 1024->4096, 40 tokens";
  c.rows = 4096;
  c.cols = 1024;
  c.group_begin = {0, 40};
  c.x_rows = 40;
  c.dense = true;
  Check(c);
}

INSTANTIATE_TEST_SUITE_P(TensorCoreTypes, TensorCoreSm90Test, ::testing::ValuesIn(kTensorCoreTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return kernels::TypeName(info.param);
                         });

// ---- the dispatch rule: no device needed ---------------------------------

TEST(TensorCoreDispatchTest, FromSixteenEntriesForEveryTypeButF32) {
  SetTensorCoresEnabled(true);
  EXPECT_EQ(kTensorCoreMinEntries, 16);
  for (GgmlType t : kTensorCoreTypes) {
    EXPECT_FALSE(UsesTensorCores(t, 2048, 1)) << kernels::TypeName(t) << ": decode";
    EXPECT_FALSE(UsesTensorCores(t, 2048, 15)) << kernels::TypeName(t);
    EXPECT_TRUE(UsesTensorCores(t, 2048, 16)) << kernels::TypeName(t);
    EXPECT_TRUE(UsesTensorCores(t, 2048, 512)) << kernels::TypeName(t);
  }
  EXPECT_FALSE(UsesTensorCores(GgmlType::kF32, 2048, 512));  // the F32 parity gate
  EXPECT_FALSE(UsesTensorCores(GgmlType::kF16, 500, 512));   // a tail of 20 columns
  EXPECT_FALSE(UsesTensorCores(GgmlType::kQ2_K, 2048, 512));  // no kernel at all
}

TEST(TensorCoreDispatchTest, SwitchedOffTheFp32KernelTakesEverything) {
  SetTensorCoresEnabled(false);
  EXPECT_FALSE(TensorCoresEnabled());
  EXPECT_FALSE(UsesTensorCores(GgmlType::kQ4_K, 2048, 512));
  SetTensorCoresEnabled(true);
  EXPECT_TRUE(TensorCoresEnabled());
  EXPECT_TRUE(UsesTensorCores(GgmlType::kQ4_K, 2048, 512));
}

}  // namespace
}  // namespace sluice::cuda
