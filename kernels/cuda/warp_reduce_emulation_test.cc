// GroupSumScattered (warp_reduce.h) on the CPU through host_emulation.h:
// each sum a lane holds has GroupSum's bits, and every value of every lane
// group is held by the lanes GroupSumScattered says, for groups of 8, 16
// and 32 lanes and more or fewer values than lanes.
#include "kernels/cuda/host_emulation.h"  // first: defines the CUDA keywords

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/warp_reduce.h"

namespace sluice::cuda {
namespace {

template <int N>
void ExpectScatteredIsGroupSum(int L, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << N << " values, groups of " << L << " lanes");
  std::mt19937 rng(seed);
  // Values of very different sizes, so that the order of the adds shows.
  std::uniform_real_distribution<float> mant(-1.f, 1.f);
  std::uniform_int_distribution<int> expo(-20, 20);
  float in[32][N];
  for (auto& lane : in) {
    for (float& x : lane) x = std::ldexp(mant(rng), expo(rng));
  }
  float want[32][N], got[32][N];
  int base[32];
  emulation::Launch(dim3(), 32, [&] {
    const int lane = static_cast<int>(threadIdx.x);
    float v[N];
    for (int i = 0; i < N; ++i) {
      v[i] = in[lane][i];
      want[lane][i] = internal::GroupSum(in[lane][i], L);
    }
    base[lane] = internal::GroupSumScattered(v, L);
    std::memcpy(got[lane], v, sizeof(v));
  });
  const int held = internal::ScatteredHeld(N, L);
  std::vector<int> holders(32 / L * N, 0);  // (group, value): lanes holding it
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < held; ++i) {
      const int idx = base[lane] + i;
      ASSERT_LT(idx, N) << lane;
      EXPECT_EQ(std::memcmp(&got[lane][i], &want[lane][idx], sizeof(float)), 0)
          << "lane " << lane << " value " << idx << ": " << got[lane][i] << " against "
          << want[lane][idx];
      ++holders[lane / L * N + idx];
    }
  }
  const int copies = internal::ScatteredCopies(N, L);
  for (size_t k = 0; k < holders.size(); ++k) EXPECT_EQ(holders[k], copies) << k;
}

TEST(WarpReduceEmulationTest, ScatteredSumsAreGroupSumsBits) {
  for (const int L : {8, 16, 32}) {
    ExpectScatteredIsGroupSum<16>(L, 11u + L);  // the streamed entries kernel's 8 x 2
    ExpectScatteredIsGroupSum<4>(L, 23u + L);   // fewer values than lanes
    ExpectScatteredIsGroupSum<64>(L, 37u + L);  // several held a lane
  }
}

}  // namespace
}  // namespace sluice::cuda
