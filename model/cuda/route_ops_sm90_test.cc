// The routing kernel (kernels/cuda/route_ops.h) against the CPU's
// RouteTokenWith (model/moe.h) on random logits and biases: the golden
// deepseek2's choice (sigmoid, bias, 4 groups of which 2 are used, norm,
// scale 2.5), DeepSeek-V3's (256 experts in 8 groups of which 4, k 8),
// Kimi-K2's (384 experts, one group, k 8), softmax with groups, and no norm.
// The chosen experts must be the CPU's, in its order; the weights within
// 1e-6. Skips where no CUDA device is present; the shape checks run
// everywhere.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/route_ops.h"
#include "model/cuda/testing/sm90.h"
#include "model/moe.h"

namespace sluice {
namespace {

using sm90::Random;

struct Case {
  const char* name;
  int n_expert, k, n_group, n_group_used;
  bool sigmoid, bias, norm;
  float scale;
};

constexpr Case kCases[] = {
    {"golden micro", 16, 4, 4, 2, true, true, true, 2.5f},
    {"deepseek-v3", 256, 8, 8, 4, true, true, true, 2.5f},
    {"kimi-k2", 384, 8, 1, 1, true, true, true, 2.827f},
    {"softmax groups", 64, 6, 8, 3, false, true, true, 1.0f},
    {"sigmoid no norm", 32, 4, 1, 1, true, false, false, 1.5f},
};

MoeConfig ConfigOf(const Case& c) {
  MoeConfig m;
  m.n_expert = c.n_expert;
  m.n_expert_used = c.k;
  m.gating = c.sigmoid ? ExpertGating::kSigmoid : ExpertGating::kSoftmax;
  m.n_group = c.n_group;
  m.n_group_used = c.n_group_used;
  m.norm_weights = c.norm;
  m.weights_scale = c.scale;
  return m;
}

cuda::RouteShape ShapeOf(const Case& c) {
  return {c.n_expert, c.k, c.sigmoid, c.n_group, c.n_group_used, c.norm, c.scale};
}

TEST(RouteOpsSm90Test, RouteChoosesTheCpuExpertsAndWeights) {
  if (absl::Status s = cuda::SetDevice(0); !s.ok()) {
    SLUICE_SKIP("no CUDA device here: " + s.ToString());
  }
  const int n_tok = 33;
  for (const Case& c : kCases) {
    const auto logits = Random(n_tok * c.n_expert, 7 + c.n_expert, 1.5f);
    const auto bias = Random(c.n_expert, 9 + c.n_expert, 0.05f);
    sm90::Dev dev;
    const int k = c.k;
    int32_t* ids = dev.Put(std::vector<int32_t>(n_tok * k));
    float* weights = dev.Put(std::vector<float>(n_tok * k));
    int32_t* paired = dev.Put(std::vector<int32_t>(n_tok * 2 * k));
    ASSERT_TRUE(cuda::RouteSupported(ShapeOf(c))) << c.name;
    cuda::Route(ShapeOf(c), dev.Put(logits), c.bias ? dev.Put(bias) : nullptr, n_tok, ids,
                weights, nullptr, paired);
    ASSERT_TRUE(cuda::LastLaunchError("route").ok());
    const auto gid = dev.Get(ids, n_tok * k);
    const auto gw = dev.Get(weights, n_tok * k);
    const auto gp = dev.Get(paired, n_tok * 2 * k);
    const MoeConfig m = ConfigOf(c);
    double max_w = 0;
    for (int t = 0; t < n_tok; ++t) {
      Routing r;
      RouteTokenWith(m, logits.data() + t * c.n_expert, c.bias ? bias.data() : nullptr, &r);
      for (int s = 0; s < k; ++s) {
        EXPECT_EQ(gid[t * k + s], r.expert[s]) << c.name << " token " << t << " slot " << s;
        EXPECT_EQ(gp[t * 2 * k + s], r.expert[s]) << c.name;
        EXPECT_EQ(gp[t * 2 * k + k + s], r.expert[s] + c.n_expert) << c.name;
        max_w = std::max(max_w, std::fabs(static_cast<double>(gw[t * k + s]) - r.weight[s]));
      }
    }
    std::printf("Route %s: ids equal, max |weight diff| %.3g\n", c.name, max_w);
    EXPECT_LT(max_w, 1e-6) << c.name;
  }
}

TEST(RouteOpsTest, SupportedShapes) {
  EXPECT_TRUE(cuda::RouteSupported({256, 8, true, 8, 4, true, 2.5f}));
  EXPECT_FALSE(cuda::RouteSupported({256, 8, true, 7, 4, true, 1.0f}));   // 7 does not divide
  EXPECT_FALSE(cuda::RouteSupported({16, 8, true, 4, 1, true, 1.0f}));    // 1 group of 4 < k
  EXPECT_FALSE(cuda::RouteSupported({128, 65, true, 1, 1, true, 1.0f}));  // k past 64
}

}  // namespace
}  // namespace sluice
