// The latent-attention kernels (kernels/cuda/mla_ops.h) against the CPU's
// RunMla (model/mla.h) on random F32 weights, with YaRN RoPE (factor 4) and
// shapes that leave a partial block of heads and more latent values than
// threads: a whole block run as the batch pass runs it (q LoRA, kv_a,
// cache rows, K_b absorbed per head, attention over the latent cache, V_b
// per head, output) over a 5-token prompt, a 35-token chunk (more keys than
// a chunk of the attention kernel) and one decode token. The several-
// sequence forms against the one-sequence forms: bit for bit. Skips where
// no CUDA device is present.
//
// Error measure: max |gpu - cpu| / max |cpu|. Both round the cache rows and
// the absorbed queries to half and accumulate in half; they differ where
// their f32 scores differ in the last bits and a half rounding flips.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "kernels/cpu/half_acc.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/mla_ops.h"
#include "kernels/cuda/quant_matmul.h"
#include "model/cuda/testing/sm90.h"
#include "model/mla.h"
#include "model/rope_yarn.h"
#include "model/state.h"

namespace sluice {
namespace {

using sm90::Dev;
using sm90::Random;
using sm90::RelErr;


Matrix HostMatrix(const std::vector<float>& w, int64_t rows, int64_t cols) {
  return Matrix{GgmlType::kF32, reinterpret_cast<const uint8_t*>(w.data()), rows, cols,
                static_cast<uint64_t>(cols) * 4};
}

ExpertMatrix HostHeads(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t heads) {
  return ExpertMatrix{GgmlType::kF32, reinterpret_cast<const uint8_t*>(w.data()), rows, cols,
                      heads, static_cast<uint64_t>(cols) * 4,
                      static_cast<uint64_t>(rows * cols) * 4};
}

// Kimi-K2's proportions, smaller: 12 heads (a partial block of 8), a latent
// of 320 (two values a thread), YaRN factor 4 over 64 positions.
MlaConfig Config() {
  MlaConfig c;
  c.n_embd = 256;
  c.n_head = 12;
  c.q_lora_rank = 96;
  c.kv_lora_rank = 320;
  c.n_rot = 32;
  c.head_k = 64 + c.n_rot;
  c.head_v = 48;
  c.eps = 1e-6f;
  RopeScaling scaling;
  scaling.type = RopeScaling::Type::kYarn;
  scaling.factor = 4.0f;
  scaling.original_context = 64;
  scaling.yarn_log_multiplier = 0.1f;
  const RopeAndScale r = YarnRopeAndScale(c.n_rot, 10000.0f, scaling, c.head_k);
  c.rope = r.rope;
  c.kq_scale = r.kq_scale;
  return c;
}

cuda::MlaShape ShapeOf(const MlaConfig& c) {
  cuda::MlaShape s;
  s.n_head = static_cast<int>(c.n_head);
  s.kv_lora_rank = static_cast<int>(c.kv_lora_rank);
  s.head_k = static_cast<int>(c.head_k);
  s.head_v = static_cast<int>(c.head_v);
  s.eps = c.eps;
  s.kq_scale = c.kq_scale;
  const ScaledRope& r = c.rope;
  s.rope = cuda::MlaRopeOf(static_cast<int>(r.n_rot), r.neox, r.freq_base, r.freq_scale,
                           r.ext_factor, r.attn_factor, r.corr_dims[0], r.corr_dims[1]);
  return s;
}

struct HostWeights {
  std::vector<float> wq_a, q_a_norm, wq_b, wkv_a, kv_a_norm, k_b, v_b, wo;
};

HostWeights MakeWeights(const MlaConfig& c) {
  const int64_t e = c.n_embd, h = c.n_head, lat = c.kv_lora_rank;
  HostWeights w;
  w.wq_a = Random(c.q_lora_rank * e, 1, 0.06f);
  w.q_a_norm = Random(c.q_lora_rank, 2);
  w.wq_b = Random(h * c.head_k * c.q_lora_rank, 3, 0.1f);
  w.wkv_a = Random((lat + c.n_rot) * e, 4, 0.06f);
  w.kv_a_norm = Random(lat, 5);
  w.k_b = Random(h * lat * c.nope(), 6, 0.12f);
  w.v_b = Random(h * c.head_v * lat, 7, 0.06f);
  w.wo = Random(e * h * c.head_v, 8, 0.05f);
  return w;
}

MlaWeights View(const MlaConfig& c, const HostWeights& w) {
  MlaWeights m;
  const int64_t e = c.n_embd, h = c.n_head, lat = c.kv_lora_rank;
  m.wq_a = HostMatrix(w.wq_a, c.q_lora_rank, e);
  m.q_a_norm = w.q_a_norm.data();
  m.wq_b = HostMatrix(w.wq_b, h * c.head_k, c.q_lora_rank);
  m.wkv_a = HostMatrix(w.wkv_a, lat + c.n_rot, e);
  m.kv_a_norm = w.kv_a_norm.data();
  m.k_b = HostHeads(w.k_b, lat, c.nope(), h);
  m.v_b = HostHeads(w.v_b, c.head_v, lat, h);
  m.wo = HostMatrix(w.wo, e, h * c.head_v);
  return m;
}

// The block on the device, in the batch pass's order (batch_pass.cc Mla).
class GpuMla {
 public:
  GpuMla(const MlaConfig& c, const HostWeights& w, int max_tok, int capacity)
      : c_(c), s_(ShapeOf(c)) {
    const int64_t h = c.n_head, lat = c.kv_lora_rank, width = c.cache_width();
    wq_a_ = d_.Put(w.wq_a), qan_ = d_.Put(w.q_a_norm), wq_b_ = d_.Put(w.wq_b);
    wkv_a_ = d_.Put(w.wkv_a), kvn_ = d_.Put(w.kv_a_norm), wo_ = d_.Put(w.wo);
    const float* k_b = d_.Put(w.k_b);
    const float* v_b = d_.Put(w.v_b);
    std::vector<const void*> kt, vt;
    for (int64_t i = 0; i < h; ++i) {
      kt.push_back(k_b + i * lat * c.nope());
      vt.push_back(v_b + i * c.head_v * lat);
    }
    k_table_ = d_.Put(kt), v_table_ = d_.Put(vt);
    qa_ = d_.Zeros<float>(max_tok * c.q_lora_rank);
    q_ = d_.Zeros<float>(max_tok * h * c.head_k);
    ckv_ = d_.Zeros<float>(max_tok * width);
    q_abs_ = d_.Zeros<float>(max_tok * h * width);
    o_lat_ = d_.Zeros<float>(max_tok * h * lat);
    o_heads_ = d_.Zeros<float>(max_tok * h * c.head_v);
    o_ = d_.Zeros<float>(max_tok * h * c.head_v);
    y_ = d_.Zeros<float>(max_tok * c.n_embd);
    begin_ = d_.Zeros<int32_t>(h + 1);
    x_row_ = d_.Zeros<int32_t>(max_tok * h);
    pos_ = d_.Zeros<int32_t>(1);
    cache_ = d_.Zeros<float>(static_cast<size_t>(capacity) * width);
  }

  std::vector<float> Run(const std::vector<float>& x, int n, int32_t pos0) {
    const int64_t e = c_.n_embd, h = c_.n_head, lat = c_.kv_lora_rank;
    const float* dx = d_.Put(x);
    EXPECT_TRUE(cuda::CopyToDevice(pos_, &pos0, 4, nullptr).ok());
    Mm(wq_a_, c_.q_lora_rank, e, dx, n, qa_);
    cuda::AddRmsNorm(qa_, nullptr, n, c_.q_lora_rank, qan_, c_.eps, qa_, nullptr);
    Mm(wq_b_, h * c_.head_k, c_.q_lora_rank, qa_, n, q_);
    Mm(wkv_a_, c_.cache_width(), e, dx, n, ckv_);
    cuda::MlaHeadEntries(s_.n_head, n, begin_, x_row_, nullptr);
    cuda::MlaPrepare(s_, ckv_, q_, kvn_, pos_, n, cache_, q_abs_, nullptr);
    Heads(k_table_, lat, c_.nope(), q_, x_row_, c_.head_k, q_abs_, c_.cache_width(), n);
    cuda::MlaAttend(s_, q_abs_, cache_, pos_, n, o_lat_, nullptr, nullptr);
    Heads(v_table_, c_.head_v, lat, o_lat_, nullptr, lat, o_heads_, c_.head_v, n);
    cuda::HeadsToTokens(o_heads_, s_.n_head, n, c_.head_v, o_, nullptr);
    Mm(wo_, e, h * c_.head_v, o_, n, y_);
    return d_.Get(y_, n * e);
  }
  std::vector<float> Cache(int rows) { return d_.Get(cache_, rows * c_.cache_width()); }

 private:
  void Mm(const float* w, int64_t rows, int64_t cols, const float* x, int n, float* y) {
    EXPECT_TRUE(cuda::MatMul(GgmlType::kF32, w, rows, cols, x, n, y, nullptr).ok());
  }
  void Heads(const void* const* table, int64_t rows, int64_t cols, const float* x,
             const int32_t* x_row, int64_t x_stride, float* y, int64_t y_stride, int n) {
    cuda::GroupedMatMul g;
    g.rows = rows;
    g.cols = cols;
    g.n_groups = s_.n_head;
    g.max_entries_per_group = n;
    g.d_weights = table;
    g.d_group_begin = begin_;
    g.d_x_row = x_row;
    g.d_x = x;
    g.x_stride = x_stride;
    g.d_y = y;
    g.y_stride = y_stride;
    EXPECT_TRUE(cuda::LaunchGroupedMatMul(g, nullptr).ok());
  }

  const MlaConfig c_;
  const cuda::MlaShape s_;
  Dev d_;
  float *wq_a_, *qan_, *wq_b_, *wkv_a_, *kvn_, *wo_;
  const void* const* k_table_;
  const void* const* v_table_;
  float *qa_, *q_, *ckv_, *q_abs_, *o_lat_, *o_heads_, *o_, *y_, *cache_;
  int32_t *begin_, *x_row_, *pos_;
};

class MlaOpsSm90Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = cuda::SetDevice(0); !s.ok()) {
      SLUICE_SKIP("no CUDA device here: " + s.ToString());
    }
    cuda::PrepareKernels();
    cuda::PrepareMlaKernels();
  }
};

TEST_F(MlaOpsSm90Test, MlaBlockWithYarnMatchesTheCpu) {
  const MlaConfig c = Config();
  ASSERT_TRUE(cuda::MlaSupported(ShapeOf(c)));
  const HostWeights hw = MakeWeights(c);
  const MlaWeights w = View(c, hw);
  const int capacity = 48;
  State st(capacity, {BlockStateShape{.kv_dim = c.cache_width(), .latent = true}});
  GpuMla gpu(c, hw, 35, capacity);
  int32_t pos = 0;
  for (const int n : {5, 35, 1}) {
    const auto x = Random(n * c.n_embd, 100 + n);
    std::vector<float> cpu(n * c.n_embd);
    ASSERT_TRUE(RunMla(c, w, x.data(), n, pos, st.block(0), cpu.data(), nullptr).ok());
    const double err = RelErr(gpu.Run(x, n, pos), cpu);
    std::printf("MLA block, %d tokens at %d: output rel err %.3g\n", n, pos, err);
    EXPECT_LT(err, 5e-3) << n << " tokens at " << pos;
    pos += n;
  }
  const std::vector<float> cpu_cache(st.block(0).k.begin(),
                                     st.block(0).k.begin() + pos * c.cache_width());
  const std::vector<float> gpu_cache = gpu.Cache(pos);
  int differ = 0;
  for (size_t i = 0; i < cpu_cache.size(); ++i) differ += gpu_cache[i] != cpu_cache[i];
  const double cerr = RelErr(gpu_cache, cpu_cache);
  std::printf("MLA cache rows (YaRN RoPE, half): %d of %zu values differ, rel err %.3g\n",
              differ, cpu_cache.size(), cerr);
  EXPECT_LT(cerr, 1e-3);
  EXPECT_LT(differ, static_cast<int>(cpu_cache.size() / 100));
}

// Three sequences of 1, 4 and 2 rows at positions 5, 0 and 3 (their earlier
// rows random half values) through MlaPrepareSeqs / MlaAttendSeqs, against
// each through MlaPrepare / MlaAttend alone.
// Decode rows (1 and a batch of 3) at depths 40 and 3,000 of a 4,096-row
// cache, whose keys go in ranges of 64 (mla_ops.h): split over blocks with
// scratch, and merged in each block without; the two equal bit for bit,
// and the one pass over every key (no capacity) within the half
// accumulator's rounding; at depth 40 (one range) all three equal.
TEST_F(MlaOpsSm90Test, SplitKeysMatchOnePass) {
  const MlaConfig c = Config();
  cuda::MlaShape one_pass = ShapeOf(c);
  one_pass.kv_capacity = 0;
  cuda::MlaShape s = one_pass;
  s.kv_capacity = 4096;
  const int64_t h = c.n_head, width = c.cache_width(), lat = c.kv_lora_rank;
  auto cache = Random(s.kv_capacity * width, 80);
  kernels::RoundToHalf(cache.data(), static_cast<int64_t>(cache.size()));
  Dev d;
  float* d_cache = d.Put(cache);
  float* scratch = d.Zeros<float>(cuda::MlaAttendScratchFloats(s.n_head, s.kv_lora_rank, 3));
  for (int n : {1, 3}) {
    for (int32_t pos0 : {40, 3000}) {
      const auto q_abs = Random(h * n * width, 81 + n);
      float* qa = d.Put(q_abs);
      int32_t* pos = d.Put(std::vector<int32_t>{pos0});
      float* whole = d.Zeros<float>(h * n * lat);
      float* ranges = d.Zeros<float>(h * n * lat);
      float* split = d.Zeros<float>(h * n * lat);
      cuda::MlaAttend(one_pass, qa, d_cache, pos, n, whole, nullptr, nullptr);
      cuda::MlaAttend(s, qa, d_cache, pos, n, ranges, nullptr, nullptr);
      cuda::MlaAttend(s, qa, d_cache, pos, n, split, scratch, nullptr);
      const auto a = d.Get(whole, h * n * lat), r = d.Get(ranges, h * n * lat),
                 b = d.Get(split, h * n * lat);
      EXPECT_EQ(r, b) << n << " rows at depth " << pos0;
      double max_diff = 0, max_ref = 0;
      int differ = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - b[i]));
        max_ref = std::max(max_ref, std::fabs(static_cast<double>(a[i])));
        differ += a[i] != b[i];
      }
      std::printf("MLA split vs one pass, %d rows at depth %d: %d of %zu differ, max |diff| / "
                  "max |ref| = %.3g\n",
                  n, pos0, differ, a.size(), max_diff / max_ref);
      if (pos0 + n <= cuda::MlaSplitKeys(s.kv_capacity)) {
        EXPECT_EQ(differ, 0);
      } else {
        EXPECT_LT(max_diff / max_ref, 0.02);
      }
    }
  }
}

// Kimi-K2's attention widths (a latent of 512, RoPE 64, heads of 192 / 128)
// with n_head heads and a cache of `capacity` rows.
cuda::MlaShape KimiWidths(int n_head, int capacity) {
  cuda::MlaShape s;
  s.n_head = n_head;
  s.kv_lora_rank = 512;
  s.head_k = 192;
  s.head_v = 128;
  s.rope.n_rot = 64;
  s.kq_scale = 0.0723f;
  s.kv_capacity = capacity;
  return s;
}

// A cache of s's capacity of random half values on the device.
float* HalfCache(Dev& d, const cuda::MlaShape& s, int seed) {
  auto cache = Random(s.kv_capacity * s.width(), seed);
  kernels::RoundToHalf(cache.data(), static_cast<int64_t>(cache.size()));
  return d.Put(cache);
}

// The tensor-core attention (SetMlaTensorCoresEnabled, the default) against
// the f32 kernel at Kimi-K2's widths (a latent of 512, RoPE 64) with 64 heads
// and DeepSeek-V3's 128 (two blocks of heads): decode rows (1 and 3) at depth
// 3,000 of a 4,096-row cache split over blocks and merged in each block
// (the same bits), and a 40-row prompt at 2,000; every value within 1e-5 of
// the largest of the f32 kernel's.
TEST_F(MlaOpsSm90Test, TensorCoresMatchTheF32Kernel) {
  const bool was = cuda::MlaTensorCoresEnabled();
  for (const int n_head : {64, 128}) {
    const cuda::MlaShape s = KimiWidths(n_head, 4096);
    ASSERT_TRUE(cuda::MlaMmaSupported(s));
    const int64_t width = s.width(), lat = s.kv_lora_rank;
    Dev d;
    float* d_cache = HalfCache(d, s, 100);
    float* scratch = d.Zeros<float>(cuda::MlaAttendScratchFloats(n_head, lat, 3));
    for (const auto& [n, pos0, split] : std::vector<std::tuple<int, int32_t, bool>>{
             {1, 3000, true}, {3, 3000, true}, {3, 3000, false}, {40, 2000, false}}) {
      const auto q_abs = Random(n_head * n * width, 101 + n, 0.3f);
      float* qa = d.Put(q_abs);
      int32_t* pos = d.Put(std::vector<int32_t>{pos0});
      std::vector<float> out[2];
      for (const bool tensor_cores : {false, true}) {
        cuda::SetMlaTensorCoresEnabled(tensor_cores);
        float* o = d.Zeros<float>(n_head * n * lat);
        cuda::MlaAttend(s, qa, d_cache, pos, n, o, split ? scratch : nullptr, nullptr);
        ASSERT_TRUE(cuda::LastLaunchError("MlaAttend").ok());
        out[tensor_cores] = d.Get(o, n_head * n * lat);
      }
      const double err = RelErr(out[1], out[0]);
      std::printf("MLA tensor cores vs f32, %d heads, %d rows at %d%s: %.3g\n", n_head, n,
                  pos0, split ? " (split)" : "", err);
      EXPECT_LT(err, 1e-5) << n_head << " heads, " << n << " rows at " << pos0;
      if (n == 3 && split) {
        // The same rows merged in each block below: their bits.
        float* o = d.Zeros<float>(n_head * n * lat);
        cuda::MlaAttend(s, qa, d_cache, pos, n, o, nullptr, nullptr);
        EXPECT_EQ(d.Get(o, n_head * n * lat), out[1]) << n_head << " heads";
      }
    }
  }
  cuda::SetMlaTensorCoresEnabled(was);
}

// 16 or 32 heads a block (SetMlaFewHeadsEnabled; a short context's few key
// ranges) give the bits of 64 a block: a decode row at depths 500 (a
// 656-row cache: 11 ranges, 16 heads a block) and 3,000 (4,096 rows: 64
// ranges, 32 heads a block at 64 heads), split over blocks and merged in
// one, 64 and 128 heads.
TEST_F(MlaOpsSm90Test, FewHeadsABlockAreTheBitsOfSixtyFour) {
  const bool was = cuda::MlaFewHeadsEnabled();
  for (const int n_head : {64, 128}) {
    for (const auto& [capacity, pos0] : std::vector<std::pair<int, int32_t>>{{656, 500},
                                                                            {4096, 3000}}) {
      const cuda::MlaShape s = KimiWidths(n_head, capacity);
      ASSERT_TRUE(cuda::MlaMmaSupported(s));
      const int64_t width = s.width(), lat = s.kv_lora_rank;
      Dev d;
      float* d_cache = HalfCache(d, s, 200);
      float* scratch = d.Zeros<float>(cuda::MlaAttendScratchFloats(n_head, lat, 1));
      float* qa = d.Put(Random(n_head * width, 201, 0.3f));
      int32_t* pos = d.Put(std::vector<int32_t>{pos0});
      for (float* part : {scratch, static_cast<float*>(nullptr)}) {
        std::vector<float> out[2];
        for (const bool few : {false, true}) {
          cuda::SetMlaFewHeadsEnabled(few);
          float* o = d.Zeros<float>(n_head * lat);
          cuda::MlaAttend(s, qa, d_cache, pos, 1, o, part, nullptr);
          ASSERT_TRUE(cuda::LastLaunchError("MlaAttend").ok());
          out[few] = d.Get(o, n_head * lat);
        }
        EXPECT_EQ(out[1], out[0]) << n_head << " heads, capacity " << capacity
                                  << (part != nullptr ? ", split" : "");
      }
    }
  }
  cuda::SetMlaFewHeadsEnabled(was);
}

TEST_F(MlaOpsSm90Test, MlaOverSeveralSequencesEqualsEachAlone) {
  constexpr int kSeqs = 3, kTotal = 7;
  const int rows[kSeqs] = {1, 4, 2}, pos0[kSeqs] = {5, 0, 3};
  const MlaConfig c = Config();
  const cuda::MlaShape s = ShapeOf(c);
  const int64_t h = c.n_head, width = c.cache_width(), lat = c.kv_lora_rank;
  const int64_t qw = h * c.head_k, capacity = 16;
  const auto ckv = Random(kTotal * width, 60), q = Random(kTotal * qw, 61);
  const auto q_abs = Random(h * kTotal * width, 62), norm = Random(lat, 63);
  Dev d;
  float *d_norm = d.Put(norm), *q_abs_all = d.Put(q_abs), *o_all = d.Zeros<float>(h * kTotal * lat);
  std::vector<cuda::SeqRows> seq_rows;
  std::vector<int32_t> row_seq;
  std::vector<cuda::SeqState> states;
  std::vector<std::vector<float>> caches;
  for (int i = 0, row = 0; i < kSeqs; row += rows[i], ++i) {
    seq_rows.push_back({row, rows[i], pos0[i], 0});
    for (int r = 0; r < rows[i]; ++r) row_seq.push_back(i);
    caches.push_back(Random(capacity * width, 70 + i));
    kernels::RoundToHalf(caches.back().data(), capacity * width);
    states.push_back({d.Put(caches.back()), nullptr});
  }
  const cuda::SeqBatch b{kSeqs, d.Put(seq_rows), d.Put(row_seq), d.Put(states)};
  cuda::MlaPrepareSeqs(s, d.Put(ckv), d.Put(q), d_norm, b, kTotal, q_abs_all, nullptr);
  cuda::MlaAttendSeqs(s, q_abs_all, b, kTotal, o_all, nullptr, nullptr);
  const auto q_abs_batch = d.Get(q_abs_all, q_abs.size());
  const auto o_batch = d.Get(o_all, h * kTotal * lat);
  for (int i = 0, row = 0; i < kSeqs; row += rows[i], ++i) {
    const int n = rows[i];
    std::vector<float> qa_one(h * n * width);
    for (int64_t hh = 0; hh < h; ++hh) {
      std::copy_n(q_abs.begin() + (hh * kTotal + row) * width, n * width,
                  qa_one.begin() + hh * n * width);
    }
    float* cache = d.Put(caches[i]);
    float* qa = d.Put(qa_one);
    float* o = d.Zeros<float>(h * n * lat);
    int32_t* pos = d.Put(std::vector<int32_t>{pos0[i]});
    cuda::MlaPrepare(s, d.Put(std::vector<float>(ckv.begin() + row * width,
                                                 ckv.begin() + (row + n) * width)),
                     d.Put(std::vector<float>(q.begin() + row * qw, q.begin() + (row + n) * qw)),
                     d_norm, pos, n, cache, qa, nullptr);
    cuda::MlaAttend(s, qa, cache, pos, n, o, nullptr, nullptr);
    EXPECT_EQ(d.Get(cache, capacity * width), d.Get(states[i].a, capacity * width)) << i;
    const auto qa_got = d.Get(qa, h * n * width);
    const auto o_got = d.Get(o, h * n * lat);
    for (int64_t hh = 0; hh < h; ++hh) {
      for (int t = 0; t < n; ++t) {
        for (int64_t k = 0; k < width; ++k) {
          ASSERT_EQ(qa_got[(hh * n + t) * width + k],
                    q_abs_batch[(hh * kTotal + row + t) * width + k]);
        }
        for (int64_t k = 0; k < lat; ++k) {
          ASSERT_EQ(o_got[(hh * n + t) * lat + k], o_batch[(hh * kTotal + row + t) * lat + k])
              << "sequence " << i << " head " << hh << " row " << t;
        }
      }
    }
  }
  std::printf("MLA over 3 sequences: caches, rotated queries and outputs equal each alone\n");
}

TEST(MlaOpsLimitsTest, SupportedShapes) {
  cuda::MlaShape s;
  s.n_head = 64;
  s.kv_lora_rank = 512;
  s.head_k = 192;
  s.head_v = 128;
  s.rope.n_rot = 64;
  EXPECT_TRUE(cuda::MlaSupported(s));  // Kimi-K2, DeepSeek-V3
  s.kv_lora_rank = 1100;
  EXPECT_FALSE(cuda::MlaSupported(s));
}

}  // namespace
}  // namespace sluice
