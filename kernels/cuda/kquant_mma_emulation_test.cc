// The integer tensor-core products (kquant_mma_device.h: Q4_K, Q5_K, Q6_K
// and Q1_0) run on the CPU through host_emulation.h: every sum has the bits
// of a plain reference that decodes the blocks byte by byte and sums each
// block in integers (Q1_0: each 32-element chunk) in the same float order,
// and lies within 2e-5 of sum |w x| of the double-precision product of the
// dequantized weights and the rounded rows; through a table of experts with
// empty groups, repeated rows, a last tile of rows and of entries that is
// short, rows of one to ten blocks (split 1, 2 and 4 ways over a block's
// warps, 64, 32 and 16 rows a block) and weights only 2-byte aligned; with
// one n8 tile of entries a warp and with two, the same bits; a pair's
// second matrices through the table's second half into y_up.
#include "kernels/cuda/host_emulation.h"  // first: stands in for CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "format/ggml_type.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/kquant_mma_device.h"

namespace sluice::cuda::internal {
namespace {

// Rows of n values rounded as the kernel reads them for type t (Q8_K;
// Q1_0: Q8Z's groups of 32; decode_q8.h), by the one-group references.
int64_t RoundedBytes(GgmlType t, int64_t n) {
  return t == GgmlType::kQ1_0 ? Q8ZBytes(n) : Q8KBytes(n);
}
std::vector<uint8_t> RoundRows(GgmlType t, const std::vector<float>& x, int64_t rows, int64_t n) {
  const int64_t bytes = RoundedBytes(t, n);
  std::vector<uint8_t> out(rows * bytes, 0);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* base = out.data() + r * bytes;
    auto at = [&](int64_t i) { return x[r * n + i]; };
    if (t == GgmlType::kQ1_0) {
      for (int64_t g = 0; g < n / 32; ++g) {
        QuantizeGroupQ8Z(at, static_cast<int>(g), reinterpret_cast<int8_t*>(base),
                         reinterpret_cast<float*>(base + n), Q8ZSums(base, n));
      }
      continue;
    }
    for (int64_t g = 0; g < n / 256; ++g) {
      QuantizeGroupQ8K(at, static_cast<int>(g), reinterpret_cast<int8_t*>(base),
                       reinterpret_cast<float*>(base + n), Q8KSums(base, n));
    }
  }
  return out;
}

float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return kernels::Fp16ToF32(h);
}

int BlockBytes(GgmlType t) {
  switch (t) {
    case GgmlType::kQ1_0: return 18;
    case GgmlType::kQ6_K: return 210;
    case GgmlType::kQ5_K: return 176;
    default: return 144;
  }
}
int BlockCols(GgmlType t) { return t == GgmlType::kQ1_0 ? 128 : 256; }

// Block b's integer sum over its sub-blocks, sum_j sc_j sum (q_w q_x), and
// for Q4_K / Q5_K its mins' sum_j m_j sum q_x, from the bytes as the
// formats lay them out.
void BlockSums(GgmlType t, const uint8_t* blk, const int8_t* q, int32_t& si, int32_t& mi) {
  si = mi = 0;
  if (t == GgmlType::kQ6_K) {
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
    for (int e = 0; e < 256; ++e) {
      const int half = e / 128, s = (e % 128) / 32, l = e % 32;
      const int lo = (blk[64 * half + 32 * (s % 2) + l] >> (4 * (s / 2))) & 0x0F;
      const int hi = (blk[128 + 32 * half + l] >> (2 * s)) & 3;
      si += sc[e / 16] * ((lo | (hi << 4)) - 32) * q[e];
    }
    return;
  }
  const bool q5 = t == GgmlType::kQ5_K;
  const int qs_off = q5 ? 48 : 16;
  const uint8_t* s = blk + 4;
  for (int j = 0; j < 8; ++j) {
    const int sc = j < 4 ? (s[j] & 63) : ((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    const int m = j < 4 ? (s[j + 4] & 63) : ((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    int32_t dot = 0, sum = 0;
    for (int l = 0; l < 32; ++l) {
      int v = (blk[qs_off + 32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0F;
      if (q5) v |= ((blk[16 + l] >> j) & 1) << 4;
      const int xq = q[32 * j + l];
      dot += v * xq;
      sum += xq;
    }
    si += sc * dot;
    mi += m * sum;
  }
}

// The sum the kernel computes for one weight row and one rounded row,
// written from the block layout: per super-block its integer sums, then
// (d dx) SI - (dmin dx) MI (Q6_K: (d dx) SI) added in block order by each
// of the split's warps (4 for rows of 4 super-blocks or more, 2 for 2 or
// 3, else 1; warp k: blocks k, k + split, ...), and the warps' sums added
// in warp order.
float Reference(GgmlType t, const uint8_t* w, const uint8_t* x, int64_t n) {
  const int64_t blocks = n / BlockCols(t);
  const int split = blocks >= 4 ? 4 : (blocks >= 2 ? 2 : 1);
  float part[4] = {};
  const int8_t* q = reinterpret_cast<const int8_t*>(x);
  const float* xd = reinterpret_cast<const float*>(x + n);
  for (int64_t b = 0; b < blocks; ++b) {
    float& acc = part[b % split];
    const uint8_t* blk = w + b * BlockBytes(t);
    if (t == GgmlType::kQ1_0) {
      // Chunk by chunk: (d dx_c) times the chunk's integer sum of signs times q.
      for (int c = 0; c < 4; ++c) {
        int32_t dot = 0;
        for (int j = 0; j < 32; ++j) {
          const bool set = (blk[2 + 4 * c + j / 8] >> (j % 8)) & 1;
          dot += (set ? 1 : -1) * q[128 * b + 32 * c + j];
        }
        acc += (Half(blk) * xd[4 * b + c]) * static_cast<float>(dot);
      }
      continue;
    }
    int32_t si, mi;
    BlockSums(t, blk, q + 256 * b, si, mi);
    const float dx = xd[b];
    if (t == GgmlType::kQ6_K) {
      acc += (Half(blk + 208) * dx) * static_cast<float>(si);
    } else {
      acc += (Half(blk) * dx) * static_cast<float>(si) -
             (Half(blk + 2) * dx) * static_cast<float>(mi);
    }
  }
  float sum = part[0];
  for (int k = 1; k < split; ++k) sum += part[k];
  return sum;
}

struct Problem {
  GgmlType type;
  int64_t rows, cols;
  int n_weights;
  std::vector<int32_t> group_weight, group_begin, x_row;
  int64_t x_rows;
  int weight_offset = 0;
  // A pair: table entries n_weights.. are the second matrices (up_offset
  // n_weights), their sums in y_up.
  bool pair = false;
};

// tiles 3: a two-tile launch whose blocks of 8 entries or fewer take one
// (KQuantMmaShrinkingBlock). kAhead: the next block's weight words loaded
// first (Q4_K / Q5_K).
template <int kType, bool kAhead>
void RunBlockAs(const RawGroupedMatMul& a, int tiles, float* part) {
  if (tiles == 3) {
    KQuantMmaShrinkingBlock<kType, kAhead>(a, part);
  } else if (tiles == 2) {
    KQuantMmaBlock<kType, 2, 2, kAhead>(a, part);
  } else {
    KQuantMmaBlock<kType, 1, 1, kAhead>(a, part);
  }
}
template <int kType>
void RunBlock(const RawGroupedMatMul& a, int tiles, bool ahead, float* part) {
  if (ahead) {
    RunBlockAs<kType, true>(a, tiles, part);
  } else {
    RunBlockAs<kType, false>(a, tiles, part);
  }
}

void ExpectMatches(const Problem& p, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << TraitsOf(p.type).name << " " << p.rows << " x " << p.cols
                                    << (p.pair ? " pair" : ""));
  std::mt19937 rng(seed);
  std::vector<std::vector<uint8_t>> w, held;
  std::vector<const void*> table;
  const int n_matrices = p.n_weights * (p.pair ? 2 : 1);
  for (int i = 0; i < n_matrices; ++i) {
    w.push_back(kernels::testing_util::RandomWeights(p.type, p.rows, p.cols, rng));
  }
  // Each matrix `weight_offset` bytes past a 16-byte boundary.
  for (const auto& m : w) {
    held.emplace_back(m.size() + 32);
    uint8_t* at = held.back().data();
    at += (16 - reinterpret_cast<uintptr_t>(at) % 16) % 16 + p.weight_offset;
    std::memcpy(at, m.data(), m.size());
    table.push_back(at);
  }
  std::vector<float> x(p.x_rows * p.cols);
  std::normal_distribution<float> val(0.f, 1.f);
  for (float& v : x) v = val(rng);
  const std::vector<uint8_t> xq = RoundRows(p.type, x, p.x_rows, p.cols);
  const int n_groups = static_cast<int>(p.group_begin.size()) - 1;
  const int64_t entries = p.group_begin.back(), y_stride = p.rows + 3;
  std::vector<float> y(entries * y_stride, -7.0f), y_up(entries * y_stride, -7.0f);

  RawGroupedMatMul a;
  a.type = static_cast<int>(p.type);
  a.rows = p.rows;
  a.cols = p.cols;
  a.row_bytes = p.cols / BlockCols(p.type) * BlockBytes(p.type);
  a.n_groups = n_groups;
  a.weights = table.data();
  a.group_weight = p.group_weight.data();
  a.group_begin = p.group_begin.data();
  a.x_row = p.x_row.data();
  a.x_q8 = xq.data();
  a.y = y.data();
  a.y_stride = y_stride;
  if (p.pair) {
    a.up_offset = p.n_weights;
    a.y_up = y_up.data();
  }
  int64_t max_entries = 0;
  for (int gi = 0; gi < n_groups; ++gi) {
    max_entries = std::max<int64_t>(max_entries, p.group_begin[gi + 1] - p.group_begin[gi]);
  }
  // One n8 tile a warp (blocks of 8 entries), two (blocks of 16), and two
  // whose blocks of 8 entries or fewer take one, each with and without the
  // next block's weights loaded first: the same sums, so y is written six
  // times with the same bits.
  std::vector<float> y_one, y_up_one;
  for (const int arm : {1, 2, 3, 4, 5, 6}) {
    const int tiles = (arm - 1) % 3 + 1;
    const bool ahead = arm > 3;  // each shape again with kAhead
    const int64_t block_entries = kKQuantMmaEntries * (tiles == 1 ? 1 : 2);
    const dim3 grid(static_cast<unsigned>(KQuantMmaRowBlocks(a)),
                    static_cast<unsigned>((max_entries + block_entries - 1) / block_entries),
                    static_cast<unsigned>(n_groups));
    std::vector<float> part(kKQuantMmaWarps * 32 * 4 * 2);
    std::fill(y.begin(), y.end(), -7.0f);
    std::fill(y_up.begin(), y_up.end(), -7.0f);
    emulation::Launch(grid, 32 * kKQuantMmaWarps, [&] {
      if (p.type == GgmlType::kQ1_0) {
        RunBlock<kKQuantMmaQ1_0>(a, tiles, ahead, part.data());
      } else if (p.type == GgmlType::kQ6_K) {
        RunBlock<kKQuantMmaQ6K>(a, tiles, ahead, part.data());
      } else if (p.type == GgmlType::kQ5_K) {
        RunBlock<kKQuantMmaQ5K>(a, tiles, ahead, part.data());
      } else {
        RunBlock<kKQuantMmaQ4K>(a, tiles, ahead, part.data());
      }
    });
    if (arm == 1) {
      y_one = y;
      y_up_one = y_up;
    } else {
      ASSERT_EQ(std::memcmp(y.data(), y_one.data(), y.size() * sizeof(float)), 0)
          << "arm " << arm << ": other bits than one n8 tile a warp";
      ASSERT_EQ(std::memcmp(y_up.data(), y_up_one.data(), y.size() * sizeof(float)), 0)
          << "arm " << arm << ": other bits than one n8 tile a warp (second matrices)";
    }
  }

  std::vector<float> deq(p.cols);
  int checked = 0;
  for (int m = 0; m < (p.pair ? 2 : 1); ++m) {
    const std::vector<float>& out = m == 0 ? y : y_up;
    for (int gi = 0; gi < n_groups; ++gi) {
      const uint8_t* mat = w[p.group_weight[gi] + m * p.n_weights].data();
      for (int64_t e = p.group_begin[gi]; e < p.group_begin[gi + 1]; ++e) {
        const uint8_t* xr = xq.data() + p.x_row[e] * RoundedBytes(p.type, p.cols);
        const int8_t* q = reinterpret_cast<const int8_t*>(xr);
        const float* xd = reinterpret_cast<const float*>(xr + p.cols);
        for (int64_t r = 0; r < p.rows; ++r) {
          const uint8_t* wr = mat + r * a.row_bytes;
          const float got = out[e * y_stride + r];
          const float want = Reference(p.type, wr, xr, p.cols);
          ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
              << "matrix " << m << " entry " << e << " row " << r << ": " << got << " against "
              << want;
          ASSERT_TRUE(kernels::DequantizeRow(p.type, wr, p.cols, deq.data()).ok());
          double exact = 0.0, mag = 0.0;
          for (int64_t c = 0; c < p.cols; ++c) {
            const int64_t group = p.type == GgmlType::kQ1_0 ? c / 32 : c / 256;
            const double xv = static_cast<double>(xd[group]) * q[c];
            exact += deq[c] * xv;
            mag += std::fabs(deq[c] * xv);
          }
          ASSERT_LE(std::fabs(got - exact), 2e-5 * mag + 1e-30)
              << "matrix " << m << " entry " << e << " row " << r;
          ++checked;
        }
        for (int64_t r = p.rows; r < y_stride; ++r) {
          ASSERT_EQ(out[e * y_stride + r], -7.0f) << "padding of entry " << e;  // untouched
        }
      }
    }
  }
  if (!p.pair) {
    for (const float v : y_up) ASSERT_EQ(v, -7.0f) << "no pair, yet y_up written";
  }
  EXPECT_EQ(checked, entries * p.rows * (p.pair ? 2 : 1));
}

TEST(KQuantMmaEmulationTest, SumsAreTheReferencesBits) {
  // Experts through a table: groups of 3, 0, 11, 1, 0, 9 and 19 entries
  // (tiles of 8 and short ones; 19: a second block of entries, of 3, which
  // a two-tile launch's shrinking block takes with one tile), rows
  // repeated, 37 rows (a short last tile of 16).
  Problem experts{GgmlType::kQ4_K, 37, 1280, 3, {2, 0, 1, 1, 2, 0, 1},
                  {0, 3, 3, 14, 15, 15, 24, 43}, {}, 6};
  for (int e = 0; e < 43; ++e) experts.x_row.push_back((e * 5) % 6);
  for (const GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ1_0}) {
    const uint32_t type_seed = 1000u * static_cast<uint32_t>(t);
    // Q1_0's blocks are 128 columns: rows of 1, 4, 6 and 10 blocks.
    for (const int64_t cols : {t == GgmlType::kQ1_0 ? 128 : 256, 512, 768, 1280}) {
      Problem p = experts;
      p.type = t;
      p.cols = cols;
      ExpectMatches(p, 7u + static_cast<uint32_t>(cols) + type_seed);
    }
    // Weights only 2-byte aligned (two loads a word, shifted).
    Problem p = experts;
    p.type = t;
    p.weight_offset = 2;
    ExpectMatches(p, 99u + type_seed);
    // A pair: each matrix's sums as its own launch's, the second's in y_up.
    p.weight_offset = 0;
    p.pair = true;
    p.cols = 512;
    ExpectMatches(p, 5u + type_seed);
  }
}

}  // namespace
}  // namespace sluice::cuda::internal
