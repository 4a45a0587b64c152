#include "tools/coldread_lib.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/arch.h"
#include "model/testing/mkmodel.h"

namespace sluice::coldread {
namespace {

TEST(ColdreadTest, MergeRangesSortsJoinsTouchingAndDropsEmpty) {
  const std::vector<FileRange> got = MergeRanges({{1, 50, 60},
                                                  {0, 30, 40},
                                                  {0, 0, 10},
                                                  {0, 10, 20},  // touches [0, 10)
                                                  {0, 35, 45},  // overlaps [30, 40)
                                                  {0, 70, 70},  // empty
                                                  {1, 0, 50}});
  const std::vector<FileRange> want = {{0, 0, 20}, {0, 30, 45}, {1, 0, 60}};
  EXPECT_EQ(got, want);
}

TEST(ColdreadTest, DiskBlocksAreAlignedCoverTheRangesAndStopAtTheCap) {
  // Shard 0: [5000, 20000) widens to [4096, 20480); shard 1: [0, 12288).
  const std::vector<FileRange> ranges = {{0, 5000, 20000}, {1, 0, 12288}};
  const std::vector<int> fds = {7, 9};
  // 8192 + 1000 rounds down to two blocks.
  const std::vector<memory::DirectRead> all = DiskBlocks(ranges, fds, 8192 + 1000, 0);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].fd, 7);
  EXPECT_EQ(all[0].offset, 4096u);
  EXPECT_EQ(all[0].length, 8192u);
  EXPECT_EQ(all[1].offset, 12288u);
  EXPECT_EQ(all[1].length, 8192u);
  EXPECT_EQ(all[2].fd, 9);
  EXPECT_EQ(all[2].offset, 0u);
  EXPECT_EQ(all[2].length, 8192u);
  EXPECT_EQ(all[3].fd, 9);
  EXPECT_EQ(all[3].offset, 8192u);
  EXPECT_EQ(all[3].length, 4096u);
  for (const memory::DirectRead& b : all) EXPECT_EQ(b.dst, nullptr);

  // A cap stops after the block that reaches it.
  EXPECT_EQ(DiskBlocks(ranges, fds, 8192, 8192).size(), 1u);
  EXPECT_EQ(DiskBlocks(ranges, fds, 8192, 8193).size(), 2u);
  EXPECT_EQ(DiskBlocks(ranges, fds, 8192, 1 << 30).size(), 4u);
}

TEST(ColdreadTest, BatchesCoverEveryExpertOnceInCallsOfK) {
  const std::vector<std::vector<int32_t>> in_order = Batches(10, 4, false, 1);
  const std::vector<std::vector<int32_t>> want = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}};
  EXPECT_EQ(in_order, want);

  const std::vector<std::vector<int32_t>> shuffled = Batches(256, 10, true, 3);
  ASSERT_EQ(shuffled.size(), 26u);  // 25 calls of 10, one of 6
  EXPECT_EQ(shuffled.back().size(), 6u);
  std::set<int32_t> seen;
  for (const auto& b : shuffled) seen.insert(b.begin(), b.end());
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(*seen.rbegin(), 255);
  EXPECT_NE(shuffled[0], (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(shuffled, Batches(256, 10, true, 3));  // the seed decides
  EXPECT_EQ(Batches(8, 8, true, 1).size(), 1u);    // a whole layer in one call
}

TEST(ColdreadTest, ExpertRangesAreTheExpertTensorsOfEveryShard) {
  mkmodel::Options o;
  o.shape = *mkmodel::NamedShape(mkmodel::Arch::kQwen35Moe, "micro");
  o.split_count = 2;
  o.threads = 1;
  const std::string base = ::testing::TempDir() + "/coldread_ranges.gguf";
  absl::StatusOr<std::vector<std::string>> paths = mkmodel::WriteModel(o, base);
  ASSERT_TRUE(paths.ok()) << paths.status();
  absl::StatusOr<std::unique_ptr<ModelFiles>> files = ModelFiles::Open((*paths)[0]);
  ASSERT_TRUE(files.ok()) << files.status();
  absl::StatusOr<ArchDesc> desc = DescribeModel(**files);
  ASSERT_TRUE(desc.ok()) << desc.status();
  LayerExperts layers;
  for (const LayerDesc& l : desc->layers) layers.push_back({l.moe.gate, l.moe.up, l.moe.down});

  absl::StatusOr<std::vector<FileRange>> ranges = ExpertRanges(**files, layers);
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  std::vector<FileRange> want;
  for (const TensorEntry& e : (*files)->tensors().entries()) {
    if (e.kind == TensorKind::kRoutedExpert) {
      want.push_back({static_cast<int>(e.shard), e.file_offset, e.file_offset + e.n_bytes});
    }
  }
  EXPECT_EQ(*ranges, MergeRanges(want));
  uint64_t bytes = 0;
  std::set<int> shards;
  for (const FileRange& r : *ranges) {
    bytes += r.end - r.begin;
    shards.insert(r.shard);
  }
  EXPECT_EQ(bytes, (*files)->tensors().expert_bytes());
  EXPECT_EQ(shards.size(), 2u);

  // The disk half reads them: every byte counted once, a nonzero time.
  absl::StatusOr<DirectShards> direct = DirectShards::Open(**files);
  ASSERT_TRUE(direct.ok()) << direct.status();
  const std::vector<int> fds = {direct->fd(0), direct->fd(1)};
  const std::vector<memory::DirectRead> blocks = DiskBlocks(*ranges, fds, 1 << 20, 0);
  uint64_t block_bytes = 0;
  for (const memory::DirectRead& b : blocks) block_bytes += b.length;
  absl::StatusOr<Rate> rate = MeasureDisk(blocks, 4);
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_EQ(rate->bytes, block_bytes);
  EXPECT_GE(rate->bytes, bytes);
  EXPECT_GT(rate->seconds, 0);
  // The same blocks through io_uring (skipped where the kernel refuses it).
  absl::StatusOr<UringRun> uring = MeasureDiskUring(blocks, 3);
  if (!absl::IsUnavailable(uring.status())) {
    ASSERT_TRUE(uring.ok()) << uring.status();
    EXPECT_EQ(uring->depth, 3);
    EXPECT_EQ(uring->rate.bytes, block_bytes);
    EXPECT_GT(uring->rate.seconds, 0);
  }
}

Report Sample() {
  Report r;
  r.model = "/m/\"x\".gguf";
  r.shards = 2;
  r.layers = 4;
  r.n_layer = 8;
  r.n_expert = 64;
  r.n_expert_used = 8;
  r.expert_bytes = 1000;
  r.o_direct = true;
  r.block_bytes = 4096;
  r.disk = {{1, {1000000000, 1.0}}, {4, {2000000000, 1.0}}};
  r.tier = {{8, "threads", 8, 1048576, {1500000000, 1.0}, 32, 256, 256}};
  r.uring = {{32, true, {3000000000, 1.0}}};
  return r;
}

TEST(ColdreadTest, ReportGivesEachRunAndTheRatioToTheBestDisk) {
  const Report r = Sample();
  ASSERT_NE(BestDisk(r), nullptr);
  EXPECT_EQ(BestDisk(r)->threads, 4);
  EXPECT_EQ(FormatText(r),
            "model: /m/\"x\".gguf (2 shards), 4 of 8 layers, 64 experts, 8 used per "
            "token, expert bytes 1000, o_direct yes\n"
            "disk threads=1 block=4096 bytes=1000000000 seconds=1.000 GB/s=1.000\n"
            "disk threads=4 block=4096 bytes=2000000000 seconds=1.000 GB/s=2.000\n"
            "disk best threads=4 GB/s=2.000\n"
            "uring depth=32 registered=yes block=4096 bytes=3000000000 seconds=1.000 "
            "GB/s=3.000 vs_best_threads=1.500\n"
            "tier batch=8 (routing) reader=threads threads=8 piece=1048576 calls=32 "
            "experts_from_disk=256/256 bytes=1500000000 seconds=1.000 GB/s=1.500 ratio=0.750\n");
  EXPECT_EQ(FormatJson(r),
            "{\"model\": \"/m/\\\"x\\\".gguf\", \"shards\": 2, \"layers\": 4, "
            "\"n_layer\": 8, \"n_expert\": 64, \"n_expert_used\": 8, \"expert_bytes\": "
            "1000, \"o_direct\": true, \"block_bytes\": 4096, \"disk\": [{\"threads\": "
            "1, \"bytes\": 1000000000, \"seconds\": 1.000000, \"gbps\": 1.0000}, "
            "{\"threads\": 4, \"bytes\": 2000000000, \"seconds\": 1.000000, \"gbps\": "
            "2.0000}], \"disk_best\": {\"threads\": 4, \"bytes\": 2000000000, "
            "\"seconds\": 1.000000, \"gbps\": 2.0000}, \"uring\": [{\"depth\": 32, "
            "\"registered\": true, \"bytes\": 3000000000, \"seconds\": 1.000000, "
            "\"gbps\": 3.0000}], \"uring_skipped\": null, \"tier\": [{\"batch\": 8, "
            "\"reader\": \"threads\", \"threads\": 8, \"piece_bytes\": 1048576, \"calls\": 32, \"experts_from_disk\": 256, "
            "\"experts_loaded\": 256, \"bytes\": 1500000000, \"seconds\": 1.000000, "
            "\"gbps\": 1.5000, \"ratio\": 0.7500}], \"tier_skipped\": null}");
}

TEST(ColdreadTest, ReportWithoutTierSaysWhy) {
  Report r = Sample();
  r.tier.clear();
  r.disk.clear();
  r.uring.clear();
  r.tier_skipped = "disk_only";
  EXPECT_EQ(BestDisk(r), nullptr);
  const std::string text = FormatText(r);
  EXPECT_NE(text.find("\ntier skipped: disk_only\n"), std::string::npos) << text;
  const std::string json = FormatJson(r);
  EXPECT_NE(json.find("\"disk\": [], \"disk_best\": null, \"uring\": [], "
                      "\"uring_skipped\": null, \"tier\": [], "
                      "\"tier_skipped\": \"disk_only\"}"),
            std::string::npos)
      << json;
}

}  // namespace
}  // namespace sluice::coldread
