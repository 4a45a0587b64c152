#include "model/cuda/host_tier.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader/model_files.h"
#include "loader/testing/gguf_bytes.h"

namespace sluice {
namespace {

// Two layers of 4 F32 experts; gate, up and down are [64 x 16] each, so a
// slice is 4096 bytes and every byte of the file's data is distinct enough
// (its offset mod 251) to show a slice read from the wrong place.
constexpr int kLayers = 2;
constexpr int kExperts = 4;
constexpr uint64_t kSlice = 64 * 16 * 4;
constexpr uint64_t kTensor = kSlice * kExperts;
const char* const kParts[3] = {"gate", "up", "down"};

// Each case with both readers: io_uring and the pread pool.
using Reader = HostTier::Options::Reader;

class HostTierTest : public ::testing::TestWithParam<Reader> {
 protected:
  void SetUp() override {
    testing::GgufBytes g;
    g.Header(3, /*n_tensors=*/kLayers * 3, /*n_kv=*/0);
    for (int l = 0; l < kLayers; ++l) {
      for (int p = 0; p < 3; ++p) {
        g.TensorInfo("blk." + std::to_string(l) + ".ffn_" + kParts[p] + "_exps.weight",
                     {64, 16, kExperts}, /*F32*/ 0, (l * 3 + p) * kTensor);
      }
    }
    std::string file = g.PadTo(32).bytes();
    for (uint64_t i = 0; i < kLayers * 3 * kTensor; ++i) file.push_back(static_cast<char>(i % 251));
    path_ = testing::MakeTempDir() + "/experts.gguf";
    testing::WriteFileOrDie(path_, file);
    auto files = ModelFiles::Open(path_);
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = *std::move(files);
    const auto& entries = files_->tensors().entries();
    for (int l = 0; l < kLayers; ++l) {
      std::array<ExpertMatrix, 3> layer;
      for (int p = 0; p < 3; ++p) {
        layer[p] = {GgmlType::kF32, entries[l * 3 + p].data, 16, 64, kExperts, 64 * 4, kSlice};
      }
      layers_.push_back(layer);
    }
  }

  std::unique_ptr<HostTier> Make(int64_t slots, bool exclusive) {
    HostTier::Options o;
    o.bytes = static_cast<uint64_t>(slots) * HostTier::SlotBytes(layers_);
    o.threads = 2;
    o.policy = "lru";
    o.exclusive = exclusive;
    o.pinned = false;
    o.reader = GetParam();
    auto t = HostTier::Create(*files_, layers_, o);
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) {
      EXPECT_EQ((*t)->uring(), GetParam() == Reader::kUring);
    }
    return t.ok() ? *std::move(t) : nullptr;
  }

  // Whether `s` are the slices of `expert` of `layer` as they lie in the file.
  bool SameAsFile(const HostTier::Slices& s, int layer, int32_t expert) const {
    for (int p = 0; p < 3; ++p) {
      const uint8_t* want = layers_[layer][p].data + expert * kSlice;
      if (s[p] == nullptr || std::memcmp(s[p], want, kSlice) != 0) return false;
    }
    return true;
  }

  std::string path_;
  std::unique_ptr<ModelFiles> files_;
  std::vector<std::array<ExpertMatrix, 3>> layers_;
};

TEST_P(HostTierTest, InclusiveLoadsReadOnceAndKeepWhatTheyRead) {
  std::unique_ptr<HostTier> t = Make(/*slots=*/6, /*exclusive=*/false);
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->exclusive());
  EXPECT_EQ(t->slots(), 6);
  std::vector<HostTier::Slices> out;
  std::vector<bool> disk;
  const std::vector<int32_t> experts = {3, 1};
  ASSERT_TRUE(t->Load(1, experts, out, disk).ok());
  EXPECT_EQ(disk, (std::vector<bool>{true, true}));
  EXPECT_TRUE(SameAsFile(out[0], 1, 3));
  EXPECT_TRUE(SameAsFile(out[1], 1, 1));
  // pass_through means nothing to an inclusive tier.
  const bool pass[2] = {true, true};
  ASSERT_TRUE(t->Load(1, experts, out, disk, pass).ok());
  EXPECT_EQ(disk, (std::vector<bool>{false, false}));
  EXPECT_TRUE(SameAsFile(out[0], 1, 3));
  EXPECT_EQ(t->Snapshot().hits, 2u);
  EXPECT_EQ(t->Snapshot().misses, 2u);
}

TEST_P(HostTierTest, ExclusiveStagesWhatItLacksAndHandsUpWhatItHolds) {
  std::unique_ptr<HostTier> t = Make(/*slots=*/8, /*exclusive=*/true);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->exclusive());
  EXPECT_EQ(t->slots(), 4);  // 4 of the 8 stage one layer's reads
  std::vector<HostTier::Slices> out;
  std::vector<bool> disk;
  // Expert 2 of layer 0 is held (warmed); 0 is not.
  const memory::ExpertKey warm[] = {{0, 2}};
  auto placed = t->Warm(warm);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(*placed, 1);
  ASSERT_TRUE(t->Peek(0, 2).has_value());
  EXPECT_TRUE(SameAsFile(*t->Peek(0, 2), 0, 2));

  // Device misses 0 and 2 (pass through), and 3 forced (kept here).
  const std::vector<int32_t> experts = {0, 2, 3};
  const bool pass[3] = {true, true, false};
  ASSERT_TRUE(t->Load(0, experts, out, disk, pass).ok());
  EXPECT_EQ(disk, (std::vector<bool>{true, false, true}));
  for (size_t i = 0; i < experts.size(); ++i) EXPECT_TRUE(SameAsFile(out[i], 0, experts[i])) << i;
  EXPECT_FALSE(t->Peek(0, 0).has_value());  // staged, not kept
  EXPECT_TRUE(t->Peek(0, 3).has_value());
  // 2 moved up to the device: its slot is free.
  t->Promote(0, 2);
  EXPECT_FALSE(t->Peek(0, 2).has_value());
  EXPECT_EQ(t->Snapshot().lookups, 2u);  // 2 and 3; the staged read is not one
}

TEST_P(HostTierTest, ExclusiveTakesDeviceVictimsAndRefusesWhatItHolds) {
  std::unique_ptr<HostTier> t = Make(/*slots=*/8, /*exclusive=*/true);
  ASSERT_NE(t, nullptr);
  auto to = t->Demote(1, 2);
  ASSERT_TRUE(to.ok()) << to.status();
  ASSERT_TRUE(to->has_value());
  // The device copies the victim's slices down (here from the file).
  for (int p = 0; p < 3; ++p) std::memcpy((**to)[p], layers_[1][p].data + 2 * kSlice, kSlice);
  ASSERT_TRUE(t->Peek(1, 2).has_value());
  EXPECT_TRUE(SameAsFile(*t->Peek(1, 2), 1, 2));
  // Held already: nothing to copy.
  auto again = t->Demote(1, 2);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  // A later device miss of it is a host hit.
  std::vector<HostTier::Slices> out;
  std::vector<bool> disk;
  const int32_t e = 2;
  const bool pass = true;
  ASSERT_TRUE(t->Load(1, absl::MakeConstSpan(&e, 1), out, disk, absl::MakeConstSpan(&pass, 1)).ok());
  EXPECT_EQ(disk, std::vector<bool>{false});
  EXPECT_TRUE(SameAsFile(out[0], 1, 2));
}

TEST_P(HostTierTest, WarmStopsWhenTheCacheIsFull) {
  std::unique_ptr<HostTier> t = Make(/*slots=*/5, /*exclusive=*/false);
  ASSERT_NE(t, nullptr);
  const memory::ExpertKey keys[] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}, {1, 3}, {0, 3}, {7, 0}};
  auto placed = t->Warm(keys);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(*placed, 5);
  EXPECT_TRUE(t->Peek(1, 2).has_value());
  EXPECT_TRUE(SameAsFile(*t->Peek(1, 2), 1, 2));
  EXPECT_FALSE(t->Peek(1, 3).has_value());
  EXPECT_EQ(t->Snapshot().lookups, 0u);
}

TEST_P(HostTierTest, ExclusiveNeedsTwoLayersOfSlots) {
  // Each 4096-byte slice read as the 4096-aligned span around it, which
  // may start up to 4095 bytes early: 12288 bytes a part.
  const uint64_t slot = HostTier::SlotBytes(layers_);
  EXPECT_EQ(slot, 3u * 12288);
  EXPECT_EQ(HostTier::MinBytes(layers_, /*exclusive=*/true), 8 * slot);
  EXPECT_EQ(HostTier::MinBytes(layers_, /*exclusive=*/false), 4 * slot);
  HostTier::Options o;
  o.bytes = 6 * slot;
  o.pinned = false;
  o.reader = GetParam();
  o.exclusive = true;
  auto t = HostTier::Create(*files_, layers_, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(t.status().message()),
            "host tier: 221184 bytes hold 6 expert slices of 36864 bytes; one layer's 4 experts "
            "need at least 294912 bytes (room for them twice: exclusive tiers stage disk reads "
            "apart)");
  o.exclusive = false;
  EXPECT_TRUE(HostTier::Create(*files_, layers_, o).ok());
}

INSTANTIATE_TEST_SUITE_P(Readers, HostTierTest,
                         ::testing::Values(Reader::kUring, Reader::kThreads),
                         [](const ::testing::TestParamInfo<Reader>& i) {
                           return i.param == Reader::kUring ? "uring" : "threads";
                         });

}  // namespace
}  // namespace sluice
