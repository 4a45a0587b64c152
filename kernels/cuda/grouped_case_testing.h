// Test-only: the grouped mat-mul problems both emulation tests run (the
// FP32 kernel's and the tensor-core kernel's): a case's shape and routing,
// random weights behind a table with their dequantized reference, random
// activations, outputs filled with NaN (so unwritten ones and writes into
// the y_stride gaps show), and the RawGroupedMatMul that points into them.
#ifndef SLUICE_KERNELS_CUDA_GROUPED_CASE_TESTING_H_
#define SLUICE_KERNELS_CUDA_GROUPED_CASE_TESTING_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "format/ggml_type.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/quant_matmul_impl.h"

namespace sluice::cuda::internal::grouped_testing {

struct GroupedCase {
  int64_t rows = 0, cols = 0;
  int n_weights = 1, n_groups = 1;
  std::vector<int32_t> group_weight, group_begin, x_row;
  int max_entries = 1;
  int64_t x_rows = 1, x_pad = 0, y_pad = 0;
  int weight_offset = 0, x_offset = 0;
};

// The routed experts of a layer: 6 groups through a table of 4 matrices,
// empty groups, gathered activation rows with repeats, padded strides.
inline GroupedCase ExpertsThroughTable(int64_t rows, int64_t cols) {
  GroupedCase c;
  c.rows = rows;
  c.cols = cols;
  c.n_weights = 4;
  c.n_groups = 6;
  c.group_weight = {2, 0, 3, 3, 1, 0};
  c.group_begin = {0, 3, 3, 4, 9, 9, 11};  // sizes 3, 0, 1, 5, 0, 2
  c.max_entries = 5;
  c.x_rows = 7;
  c.x_row = {6, 0, 3, 3, 5, 1, 2, 6, 4, 0, 1};
  c.x_pad = 4;
  c.y_pad = 3;
  return c;
}

// One group of 19 entries (tiles of 8, 8 and 3 for the FP32 kernel), weights
// 2 bytes and activations 1 float off their alignment, padded strides.
inline GroupedCase GroupOf19Misaligned(int64_t rows, int64_t cols) {
  GroupedCase c;
  c.rows = rows;
  c.cols = cols;
  c.group_begin = {0, 19};
  c.max_entries = 19;
  c.x_rows = 19;
  c.x_pad = 1;
  c.y_pad = 2;
  c.weight_offset = 2;  // the 2-byte alignment every layout guarantees
  c.x_offset = 1;
  return c;
}

class GroupedProblem {
 public:
  // Weights of type `t` (each in a 256-byte slot at weight_offset), x and y
  // as the case says; the generator is seeded with `seed`.
  GroupedProblem(GgmlType t, const GroupedCase& c, uint32_t seed) : c_(c) {
    std::mt19937 rng(seed);
    const uint64_t row_bytes = *kernels::RowBytes(t, c.cols);
    const uint64_t slot = (c.rows * row_bytes + c.weight_offset + 255) / 256 * 256;
    all_.resize(slot * c.n_weights);
    table_.resize(c.n_weights);
    deq_.assign(c.n_weights, std::vector<float>(c.rows * c.cols));
    for (int w = 0; w < c.n_weights; ++w) {
      const std::vector<uint8_t> m =
          kernels::testing_util::RandomWeights(t, c.rows, c.cols, rng);
      std::copy(m.begin(), m.end(), all_.begin() + w * slot + c.weight_offset);
      table_[w] = &all_[w * slot + c.weight_offset];
      for (int64_t r = 0; r < c.rows; ++r) {
        EXPECT_TRUE(kernels::DequantizeRow(t, &m[r * row_bytes], c.cols,
                                           &deq_[w][r * c.cols])
                        .ok());
      }
    }
    x_stride_ = c.cols + c.x_pad;
    y_stride_ = c.rows + c.y_pad;
    x_.resize(c.x_offset + c.x_rows * x_stride_);
    std::uniform_real_distribution<float> val(-1.f, 1.f);
    for (float& v : x_) v = val(rng);
    const int64_t n_entries =
        c.group_begin.empty() ? c.n_groups : c.group_begin.back();
    y_.assign(n_entries * y_stride_, NAN);

    args_.type = static_cast<int>(t);
    args_.rows = c.rows;
    args_.cols = c.cols;
    args_.row_bytes = row_bytes;
    args_.n_groups = c.n_groups;
    args_.max_entries_per_group = c.group_begin.empty() ? 1 : c.max_entries;
    args_.weights = table_.data();
    args_.group_weight = c.group_weight.empty() ? nullptr : c.group_weight.data();
    args_.group_begin = c.group_begin.empty() ? nullptr : c.group_begin.data();
    args_.x_row = c.x_row.empty() ? nullptr : c.x_row.data();
    args_.x = x_.data() + c.x_offset;
    args_.x_stride = x_stride_;
    args_.y = y_.data();
    args_.y_stride = y_stride_;
  }
  GroupedProblem(const GroupedProblem&) = delete;
  GroupedProblem& operator=(const GroupedProblem&) = delete;

  const RawGroupedMatMul& args() const { return args_; }
  // To change an argument between runs (x_q8).
  RawGroupedMatMul& mutable_args() { return args_; }
  int64_t x_rows() const { return c_.x_rows; }
  // y as the runs left it (NaN where nothing was written), and NaN again.
  const std::vector<float>& outputs() const { return y_; }
  void ClearOutputs() { std::fill(y_.begin(), y_.end(), NAN); }

  // fn(w, x, y_row): for every entry, its weight index, activation row and
  // output row (rows() floats, then the y_stride gap).
  template <class Fn>
  void ForEachEntry(Fn fn) const {
    for (int g = 0; g < c_.n_groups; ++g) {
      const int w = c_.group_weight.empty() ? g : c_.group_weight[g];
      const int64_t begin = c_.group_begin.empty() ? g : c_.group_begin[g];
      const int64_t end = c_.group_begin.empty() ? g + 1 : c_.group_begin[g + 1];
      for (int64_t e = begin; e < end; ++e) {
        const int64_t xr = c_.x_row.empty() ? e : c_.x_row[e];
        fn(w, &x_[c_.x_offset + xr * x_stride_], &y_[e * y_stride_]);
      }
    }
  }

  // Weight w's dequantized row r.
  const float* Reference(int w, int64_t r) const { return &deq_[w][r * c_.cols]; }

  // Outputs written into the y_stride gaps (must be 0).
  int64_t GapWrites() const {
    int64_t n = 0;
    ForEachEntry([&](int, const float*, const float* y) {
      for (int64_t r = c_.rows; r < y_stride_; ++r) n += !std::isnan(y[r]);
    });
    return n;
  }

 private:
  GroupedCase c_;
  std::vector<uint8_t> all_;
  std::vector<const void*> table_;
  std::vector<std::vector<float>> deq_;
  std::vector<float> x_, y_;
  int64_t x_stride_ = 0, y_stride_ = 0;
  RawGroupedMatMul args_;
};

}  // namespace sluice::cuda::internal::grouped_testing

#endif  // SLUICE_KERNELS_CUDA_GROUPED_CASE_TESTING_H_
