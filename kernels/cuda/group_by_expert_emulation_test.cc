// GroupByExpert's block (group_device.h) run on the CPU through
// host_emulation.h: the group bounds are the prefix sums of each expert's
// pairs, every pair lands in its expert's group exactly once, and the
// entry / slot maps agree, and the non-empty groups come compacted in
// expert order with empty ones after them; with more experts than threads
// (runs of several experts a thread), more pairs than threads, and an
// expert every pair chose.
#include "kernels/cuda/host_emulation.h"  // first: defines the CUDA keywords

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/group_device.h"

namespace sluice::cuda {
namespace {

struct Grouped {
  std::vector<int32_t> begin, active, active_begin, entry_token, slot_entry;
};

Grouped Run(const std::vector<int32_t>& ids, int k, int n_expert, unsigned threads) {
  const int n_pairs = static_cast<int>(ids.size());
  Grouped g{std::vector<int32_t>(n_expert + 1, -1), std::vector<int32_t>(n_expert, -1),
            std::vector<int32_t>(n_expert + 1, -1), std::vector<int32_t>(n_pairs, -1),
            std::vector<int32_t>(n_pairs, -1)};
  std::vector<int32_t> shared(internal::GroupSharedBytes(n_expert, threads) / sizeof(int32_t));
  dim3 grid;
  emulation::Launch(grid, threads, [&] {
    internal::GroupByExpertBlock(ids.data(), n_pairs, k, n_expert, g.begin.data(),
                                 g.active.data(), g.active_begin.data(), g.entry_token.data(),
                                 g.slot_entry.data(), shared.data());
  });
  return g;
}

void ExpectGrouped(const std::vector<int32_t>& ids, int k, int n_expert, unsigned threads) {
  const Grouped g = Run(ids, k, n_expert, threads);
  const int n_pairs = static_cast<int>(ids.size());
  std::vector<int32_t> want(n_expert, 0);
  for (int32_t e : ids) ++want[e];
  ASSERT_EQ(g.begin[0], 0);
  for (int e = 0; e < n_expert; ++e) ASSERT_EQ(g.begin[e + 1] - g.begin[e], want[e]) << e;
  EXPECT_EQ(g.begin[n_expert], n_pairs);
  std::vector<int> seen(n_pairs, 0);
  for (int i = 0; i < n_pairs; ++i) {
    const int entry = g.slot_entry[i];
    ASSERT_GE(entry, g.begin[ids[i]]) << i;
    ASSERT_LT(entry, g.begin[ids[i] + 1]) << i;  // in its expert's group
    EXPECT_EQ(g.entry_token[entry], i / k) << i;
    ++seen[entry];
  }
  for (int entry = 0; entry < n_pairs; ++entry) EXPECT_EQ(seen[entry], 1) << entry;
  // The compacted groups: each non-empty expert in order, its bounds, then
  // empty groups of expert 0 up to n_expert.
  int j = 0;
  for (int e = 0; e < n_expert; ++e) {
    if (want[e] == 0) continue;
    ASSERT_EQ(g.active[j], e) << j;
    EXPECT_EQ(g.active_begin[j], g.begin[e]) << j;
    EXPECT_EQ(g.active_begin[j + 1] - g.active_begin[j], want[e]) << j;
    ++j;
  }
  for (int x = j; x < n_expert; ++x) EXPECT_EQ(g.active[x], 0) << x;
  for (int x = j; x <= n_expert; ++x) EXPECT_EQ(g.active_begin[x], n_pairs) << x;
}

TEST(GroupByExpertEmulationTest, GroupsEveryPairOnce) {
  std::mt19937 rng(7);
  const int k = 8, n_expert = 300;  // runs of 2 experts for 256 threads
  std::vector<int32_t> ids;
  for (int t = 0; t < 45; ++t) {  // 360 pairs, more than the threads
    std::vector<int32_t> row;
    while (static_cast<int>(row.size()) < k) {
      const int32_t e = static_cast<int32_t>(rng() % 40);  // crowded groups
      bool dup = false;
      for (int32_t x : row) dup |= x == e;
      if (!dup) row.push_back(e);
    }
    ids.insert(ids.end(), row.begin(), row.end());
  }
  ExpectGrouped(ids, k, n_expert, 256);
  ExpectGrouped(ids, k, n_expert, 64);  // runs of 5
}

TEST(GroupByExpertEmulationTest, OneExpertEveryTokenChose) {
  const int k = 2, n_expert = 16;
  std::vector<int32_t> ids;
  for (int t = 0; t < 20; ++t) {
    ids.push_back(3);
    ids.push_back(static_cast<int32_t>(t % 16 == 3 ? 4 : t % 16));
  }
  ExpectGrouped(ids, k, n_expert, 32);
}

}  // namespace
}  // namespace sluice::cuda
