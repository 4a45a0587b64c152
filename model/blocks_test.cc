#include "model/blocks.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "model/moe.h"
#include "model/state.h"

namespace sluice {
namespace {

TEST(RmsNormTest, ScalesToUnitRmsThenByWeight) {
  const float x[4] = {1, -2, 3, -4};  // mean square 7.5
  const float w[4] = {1, 2, 0.5f, 1};
  float y[4];
  RmsNorm(x, 4, w, 1e-6f, y);
  const float s = 1.0f / std::sqrt(7.5f + 1e-6f);
  EXPECT_FLOAT_EQ(y[0], 1 * s * 1);
  EXPECT_FLOAT_EQ(y[1], -2 * s * 2);
  EXPECT_FLOAT_EQ(y[2], 3 * s * 0.5f);
  EXPECT_FLOAT_EQ(y[3], -4 * s * 1);
}

TEST(RmsNormTest, InPlaceWithoutWeight) {
  float x[2] = {3, 4};  // mean square 12.5
  RmsNorm(x, 2, nullptr, 0.0f, x);
  EXPECT_FLOAT_EQ(x[0], 3 / std::sqrt(12.5f));
  EXPECT_FLOAT_EQ(x[1], 4 / std::sqrt(12.5f));
}

TEST(L2NormalizeTest, UnitLengthAndEpsFloor) {
  float x[2] = {3, 4};
  L2Normalize(x, 2, 1e-6f);
  EXPECT_FLOAT_EQ(x[0], 0.6f);
  EXPECT_FLOAT_EQ(x[1], 0.8f);
  // A tiny vector is divided by eps, not by its own norm.
  float z[2] = {1e-8f, 0};
  L2Normalize(z, 2, 1e-6f);
  EXPECT_NEAR(z[0], 1e-2f, 1e-9f);
}

TEST(ActivationTest, Values) {
  EXPECT_FLOAT_EQ(Sigmoid(0), 0.5f);
  EXPECT_FLOAT_EQ(Silu(2), 2 / (1 + std::exp(-2.0f)));
  EXPECT_FLOAT_EQ(Softplus(0), std::log(2.0f));
  EXPECT_FLOAT_EQ(Softplus(30), 30);
}

TEST(RopeTest, NeoxAnglesAreGeometricInPairIndex) {
  RopeConfig c;
  c.n_rot = 8;
  c.freq_base = 10000;
  float cs[4], sn[4];
  RopeAngles(c, TextPositions(3), cs, sn);
  for (int i = 0; i < 4; ++i) {
    const double theta = 3 * std::pow(10000.0, -2.0 * i / 8);
    EXPECT_NEAR(cs[i], std::cos(theta), 1e-6) << i;
    EXPECT_NEAR(sn[i], std::sin(theta), 1e-6) << i;
  }
}

TEST(RopeTest, ApplyRotatesPairsHalfApartAndLeavesTheRest) {
  // n_rot 4 of a 6-dim head: pairs (0,2) and (1,3); dims 4, 5 untouched.
  float head[6] = {1, 2, 3, 4, 5, 6};
  const float cs[2] = {0, 1};
  const float sn[2] = {1, 0};
  ApplyRope(head, 4, cs, sn);
  EXPECT_FLOAT_EQ(head[0], -3);  // 1*0 - 3*1
  EXPECT_FLOAT_EQ(head[2], 1);   // 1*1 + 3*0
  EXPECT_FLOAT_EQ(head[1], 2);
  EXPECT_FLOAT_EQ(head[3], 4);
  EXPECT_FLOAT_EQ(head[4], 5);
  EXPECT_FLOAT_EQ(head[5], 6);
}

TEST(RopeTest, MultiSectionWithGoldenSectionsEqualsNeoxForText) {
  for (const auto& [n_rot, sections] :
       std::vector<std::pair<int, std::array<int32_t, 4>>>{
           {8, {2, 1, 1, 0}}, {16, {3, 3, 2, 0}}}) {
    RopeConfig neox;
    neox.n_rot = n_rot;
    neox.freq_base = 1e7f;
    RopeConfig multi = neox;
    multi.multi_section = true;
    multi.sections = sections;
    std::vector<float> c1(n_rot / 2), s1(n_rot / 2), c2(n_rot / 2), s2(n_rot / 2);
    RopeAngles(neox, TextPositions(17), c1.data(), s1.data());
    RopeAngles(multi, TextPositions(17), c2.data(), s2.data());
    EXPECT_EQ(c1, c2);
    EXPECT_EQ(s1, s2);
  }
}

TEST(RopeTest, MultiSectionMapsUncoveredPairsToTheFourthStream) {
  // sections [1, 1, 2, 0], 4 pairs, s = i mod 4: pairs 0, 1, 2 take streams
  // t, h, w; pair 3 has s = 3 with s mod 3 = 0, not below 3*sections[0] = 3,
  // so it takes stream e (position 0 for text): no rotation.
  RopeConfig c;
  c.n_rot = 8;
  c.freq_base = 100;
  c.multi_section = true;
  c.sections = {1, 1, 2, 0};
  float cs[4], sn[4];
  RopeAngles(c, {5, 6, 7, 0}, cs, sn);
  EXPECT_NEAR(cs[0], std::cos(5.0), 1e-6);
  EXPECT_NEAR(sn[1], std::sin(6 * std::pow(100.0, -0.25)), 1e-6);
  EXPECT_NEAR(sn[2], std::sin(7 * std::pow(100.0, -0.5)), 1e-6);
  EXPECT_FLOAT_EQ(cs[3], 1);
  EXPECT_FLOAT_EQ(sn[3], 0);
}

TEST(ProjectRowsTest, OneParallelLoopEqualsSeparateProducts) {
  // Three F32 matrices of different heights, enough work to use the pool.
  std::vector<std::vector<float>> data;
  std::vector<Matrix> mats;
  const int64_t cols = 1024;
  for (int64_t rows : {300, 5, 900}) {
    std::vector<float> m(rows * cols);
    for (size_t i = 0; i < m.size(); ++i) m[i] = std::sin(0.37 * i + rows);
    data.push_back(std::move(m));
    mats.push_back(Matrix{GgmlType::kF32,
                          reinterpret_cast<const uint8_t*>(data.back().data()),
                          rows, cols, cols * sizeof(float)});
  }
  ASSERT_GE((300 + 5 + 900) * cols, kMinParallelMatMulWork);
  std::vector<float> x(cols);
  for (int64_t i = 0; i < cols; ++i) x[i] = std::cos(0.11 * i);
  std::vector<std::vector<float>> expected(3), got(3);
  std::vector<RowJob> jobs;
  for (int j = 0; j < 3; ++j) {
    expected[j].resize(mats[j].rows);
    got[j].assign(mats[j].rows, -1.0f);
    ASSERT_TRUE(Project(mats[j], x.data(), 1, expected[j].data(), nullptr).ok());
    jobs.push_back({&mats[j], x.data(), got[j].data()});
  }
  ThreadPool pool(3);
  ASSERT_TRUE(ProjectRows(jobs, &pool).ok());
  for (int j = 0; j < 3; ++j) EXPECT_EQ(got[j], expected[j]) << j;
}

TEST(RouteTokenTest, SoftmaxTopKRenormalised) {
  const float logits[4] = {0, 2, 1, -1};
  Routing r;
  RouteToken(logits, 4, 2, &r);
  EXPECT_EQ(r.expert[0], 1);
  EXPECT_EQ(r.expert[1], 2);
  // Renormalised softmax of the chosen pair: e^2 / (e^2 + e^1).
  EXPECT_NEAR(r.weight[0], std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(r.weight[0] + r.weight[1], 1.0, 1e-6);
}

TEST(RouteTokenTest, TiesGoToTheLowerExpertId) {
  const float logits[3] = {1, 1, 1};
  Routing r;
  RouteToken(logits, 3, 2, &r);
  EXPECT_EQ(r.expert[0], 0);
  EXPECT_EQ(r.expert[1], 1);
  EXPECT_FLOAT_EQ(r.weight[0], 0.5f);
}

TEST(StateTest, SizesAndReset) {
  BlockStateShape attn;
  attn.kv_dim = 8;
  BlockStateShape delta;
  delta.conv_kernel = 4;
  delta.conv_channels = 10;
  delta.v_heads = 2;
  delta.state_size = 3;
  State s(16, {attn, delta});
  // 2 * 16 * 8 KV floats + 3 * 10 conv + 2 * 3 * 3 recurrent.
  EXPECT_EQ(s.bytes(), (2 * 16 * 8 + 30 + 18) * sizeof(float));
  EXPECT_EQ(State::BytesFor(16, {attn, delta}), s.bytes());
  EXPECT_EQ(s.block(0).k.size(), 128u);
  EXPECT_EQ(s.block(1).conv.size(), 30u);
  EXPECT_EQ(s.block(1).ssm.size(), 18u);
  s.block(1).ssm[5] = 2;
  s.Advance(3);
  EXPECT_EQ(s.position(), 3);
  s.Reset();
  EXPECT_EQ(s.position(), 0);
  EXPECT_EQ(s.block(1).ssm[5], 0);
}

TEST(StateTest, KvIsResidentOnlyWhereWritten) {
  BlockStateShape attn;
  attn.kv_dim = 1024;  // one 4 KiB page of floats per position
  BlockStateShape delta;
  delta.conv_kernel = 4;
  delta.conv_channels = 10;
  delta.v_heads = 2;
  delta.state_size = 3;
  const uint64_t recurrent = (30 + 18) * sizeof(float);
  const uint64_t page = 4096;
  // A capacity of 65,536 positions is 512 MiB of KV: address space only.
  State s(65536, {attn, delta});
  EXPECT_EQ(s.bytes(), 2 * 65536 * page + recurrent);
  EXPECT_EQ(s.resident_bytes(), recurrent);
  for (int p = 0; p < 3; ++p) {
    s.block(0).k[p * 1024 + 7] = 1;
    s.block(0).v[p * 1024] = 2;
  }
  EXPECT_EQ(s.resident_bytes(), 6 * page + recurrent);
  s.Reset();
  EXPECT_EQ(s.resident_bytes(), recurrent);
  EXPECT_EQ(s.block(0).k[7], 0);
  EXPECT_EQ(s.block(0).v[2 * 1024], 0);
}

}  // namespace
}  // namespace sluice
