#include "loader/model_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "base/testing/goldens.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/gguf_writer.h"
#include "loader/testing/gguf_bytes.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kSplitDir[] = "/split/";
constexpr char kSplitPrefix[] = "qwen3moe-tiny-q8_0";

// The comparable part of a table entry (no shard or offset: those differ
// between a split set and the unsplit file).
std::string Describe(const TensorEntry& e) {
  return absl::StrCat(e.name, " type=", static_cast<int>(e.type), " dims=", e.n_dims,
                      " ne=", e.ne[0], ",", e.ne[1], ",", e.ne[2], ",", e.ne[3],
                      " bytes=", e.n_bytes, " kind=", std::string(TensorKindName(e.kind)),
                      " experts=", e.n_experts, " slice=", e.expert_slice_bytes);
}

std::vector<std::string> SortedDescriptions(const TensorTable& t) {
  std::vector<std::string> out;
  for (const TensorEntry& e : t.entries()) out.push_back(Describe(e));
  std::sort(out.begin(), out.end());
  return out;
}

std::string Shard(const std::string& dir, int i) {
  return MakeSplitName(dir + "/" + kSplitPrefix, i, 3);
}

TEST(SplitNameTest, ParsesAndFormats) {
  std::optional<SplitName> n = ParseSplitName("/a/b/model-00002-of-00010.gguf");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->prefix, "/a/b/model");
  EXPECT_EQ(n->index, 2u);
  EXPECT_EQ(n->count, 10u);
  EXPECT_EQ(MakeSplitName("/a/b/model", 2, 10), "/a/b/model-00002-of-00010.gguf");
  EXPECT_FALSE(ParseSplitName("model.gguf").has_value());
  EXPECT_FALSE(ParseSplitName("model-00000-of-00002.gguf").has_value());
  EXPECT_FALSE(ParseSplitName("model-00003-of-00002.gguf").has_value());
  EXPECT_FALSE(ParseSplitName("model-0001-of-00002.gguf").has_value());
}

TEST(ModelFilesTest, EveryGoldenLoads) {
  SLUICE_REQUIRE_GOLDENS(dir);
  int loaded = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    auto m = ModelFiles::Open(entry.path().string());
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_GT((*m)->tensors().size(), 0u) << entry.path();
    for (const TensorEntry& e : (*m)->tensors().entries()) {
      const ShardInfo& s = (*m)->shard(e.shard);
      ASSERT_LE(e.file_offset + e.n_bytes, s.size) << e.name;
      EXPECT_EQ(e.data, s.base + e.file_offset);
    }
    ++loaded;
  }
  EXPECT_EQ(loaded, 10) << "expected 6 models, 3 split shards and quant_types.gguf";
}

TEST(ModelFilesTest, ClassifiesExpertsAndSlices) {
  SLUICE_REQUIRE_GOLDENS(dir);
  auto m = ModelFiles::Open(dir + "/qwen3moe-tiny-q8_0.gguf");
  ASSERT_TRUE(m.ok()) << m.status();
  const TensorTable& t = (*m)->tensors();
  auto down = t.Require("blk.0.ffn_down_exps.weight");
  ASSERT_TRUE(down.ok()) << down.status();
  const TensorEntry& e = **down;
  EXPECT_EQ(e.kind, TensorKind::kRoutedExpert);
  EXPECT_EQ(e.type, GgmlType::kQ8_0);
  EXPECT_EQ(e.ne, (std::array<uint64_t, 4>{256, 256, 16, 1}));  // [F, E, X]
  EXPECT_EQ(e.n_experts, 16u);
  EXPECT_EQ(e.row_bytes(), 256u / 32 * 34);
  EXPECT_EQ(e.expert_slice_bytes, e.row_bytes() * 256);
  EXPECT_EQ(e.expert_data(3), e.data + 3 * e.expert_slice_bytes);
  const TensorEntry* norm = t.Find("blk.0.attn_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->kind, TensorKind::kDense);
  EXPECT_EQ(norm->n_experts, 0u);
  EXPECT_EQ(t.dense_bytes() + t.expert_bytes(), t.total_bytes());
  EXPECT_EQ(t.expert_bytes(), 4u * 3 * (256 / 32 * 34) * 256 * 16);  // 4 layers
  // The mapping holds the file's bytes.
  char buf[16];
  int fd = open((dir + "/qwen3moe-tiny-q8_0.gguf").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pread(fd, buf, sizeof(buf), static_cast<off_t>(e.file_offset)), 16);
  close(fd);
  EXPECT_EQ(std::memcmp(buf, e.data, sizeof(buf)), 0);
}

TEST(ModelFilesTest, RequireNamesModelAndTensor) {
  SLUICE_REQUIRE_GOLDENS(dir);
  auto m = ModelFiles::Open(dir + "/qwen3moe-micro-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.status();
  auto e = (*m)->tensors().Require("blk.9.attn_q.weight");
  EXPECT_EQ(e.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(e.status().message(), "model " + dir +
                                      "/qwen3moe-micro-f32.gguf: tensor "
                                      "'blk.9.attn_q.weight' not found");
}

TEST(ModelFilesTest, SplitSetFromAnyShardMatchesUnsplitFile) {
  SLUICE_REQUIRE_GOLDENS(dir);
  auto whole = ModelFiles::Open(dir + "/qwen3moe-tiny-q8_0.gguf");
  ASSERT_TRUE(whole.ok()) << whole.status();
  const std::vector<std::string> want = SortedDescriptions((*whole)->tensors());
  ASSERT_EQ(want.size(), 51u);
  for (int i = 1; i <= 3; ++i) {
    auto split = ModelFiles::Open(Shard(dir + kSplitDir, i));
    ASSERT_TRUE(split.ok()) << split.status();
    EXPECT_EQ((*split)->shard_count(), 3);
    EXPECT_EQ(SortedDescriptions((*split)->tensors()), want) << "opened from shard " << i;
    EXPECT_EQ((*split)->tensors().dense_bytes(), (*whole)->tensors().dense_bytes());
    EXPECT_EQ((*split)->tensors().expert_bytes(), (*whole)->tensors().expert_bytes());
    EXPECT_EQ(*(*split)->metadata().GetString("general.architecture"), "qwen3moe");
    EXPECT_EQ((*split)->shard(2).path, Shard(dir + kSplitDir, 3));
    // Same bytes through either mapping.
    const TensorEntry* a = (*split)->tensors().Find("output.weight");
    const TensorEntry* b = (*whole)->tensors().Find("output.weight");
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(std::memcmp(a->data, b->data, a->n_bytes), 0);
  }
}

// Links the golden shards into a scratch directory under chosen names.
std::string LinkShards(const std::string& goldens,
                       const std::vector<std::pair<int, std::string>>& links) {
  const std::string tmp = testing::MakeTempDir();
  for (const auto& [from, to] : links) {
    fs::create_symlink(Shard(goldens + kSplitDir, from), tmp + "/" + to);
  }
  return tmp;
}

TEST(ModelFilesTest, MissingShardIsNotFound) {
  SLUICE_REQUIRE_GOLDENS(dir);
  const std::string tmp = LinkShards(
      dir, {{1, "qwen3moe-tiny-q8_0-00001-of-00003.gguf"},
            {3, "qwen3moe-tiny-q8_0-00003-of-00003.gguf"}});
  auto m = ModelFiles::Open(Shard(tmp, 3));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.status().message(), Shard(tmp, 2) + ": shard 2 of 3 missing (set opened from " +
                                      Shard(tmp, 3) + ")");
}

TEST(ModelFilesTest, ExtraShardFailsClearly) {
  SLUICE_REQUIRE_GOLDENS(dir);
  const std::string tmp = LinkShards(
      dir, {{1, "qwen3moe-tiny-q8_0-00001-of-00003.gguf"},
            {2, "qwen3moe-tiny-q8_0-00002-of-00003.gguf"},
            {3, "qwen3moe-tiny-q8_0-00003-of-00003.gguf"},
            {3, "qwen3moe-tiny-q8_0-00004-of-00003.gguf"}});
  auto m = ModelFiles::Open(Shard(tmp, 1));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr(tmp + "/qwen3moe-tiny-q8_0-00004-of-00003.gguf: extra or "
                              "mismatched shard beside the 3-shard set"));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("says shard 4 of 3"));
}

TEST(ModelFilesTest, ShardOfAnotherCountFailsClearly) {
  SLUICE_REQUIRE_GOLDENS(dir);
  const std::string tmp = LinkShards(
      dir, {{1, "qwen3moe-tiny-q8_0-00001-of-00003.gguf"},
            {2, "qwen3moe-tiny-q8_0-00002-of-00003.gguf"},
            {3, "qwen3moe-tiny-q8_0-00003-of-00003.gguf"},
            {1, "qwen3moe-tiny-q8_0-00001-of-00002.gguf"}});
  auto m = ModelFiles::Open(Shard(tmp, 2));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("says shard 1 of 2"));
}

TEST(ModelFilesTest, SwappedShardsFailOnSplitNo) {
  SLUICE_REQUIRE_GOLDENS(dir);
  const std::string tmp = LinkShards(
      dir, {{1, "qwen3moe-tiny-q8_0-00001-of-00003.gguf"},
            {3, "qwen3moe-tiny-q8_0-00002-of-00003.gguf"},
            {2, "qwen3moe-tiny-q8_0-00003-of-00003.gguf"}});
  auto m = ModelFiles::Open(Shard(tmp, 1));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(),
            Shard(tmp, 2) + ": metadata key 'split.no' is 2 but the file is shard 2 of 3 "
                            "(split.no counts from 0)");
}

// Writes a shard with the given split keys and one tensor named `tensor`.
void WriteShard(const std::string& path, int no, int count, int total,
                const std::string& tensor) {
  auto w = GgufWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Add("split.no", GgufValue::Scalar<uint16_t>(no)).ok());
  ASSERT_TRUE((*w)->Add("split.count", GgufValue::Scalar<uint16_t>(count)).ok());
  ASSERT_TRUE((*w)->Add("split.tensors.count", GgufValue::Scalar<int32_t>(total)).ok());
  ASSERT_TRUE((*w)->AddTensorInfo(tensor, GgmlType::kF32, {8}).ok());
  ASSERT_TRUE((*w)->WriteTensor(tensor, std::vector<uint8_t>(32, 1)).ok());
  ASSERT_TRUE((*w)->Finish().ok());
}

// Shard `no` of the two-shard set "<dir>/m-0000N-of-00002.gguf".
std::string TwoShardPath(const std::string& dir, int no) {
  return MakeSplitName(dir + "/m", no, 2);
}

// Writes a two-shard set: shard 1 (split.count 2) holds tensor "a", shard 2
// declares split.count `count2` and holds `tensor2`; both declare
// split.tensors.count `total`.
void WriteTwoShards(const std::string& dir, int count2, int total,
                    const std::string& tensor2) {
  WriteShard(TwoShardPath(dir, 1), 0, 2, total, "a");
  WriteShard(TwoShardPath(dir, 2), 1, count2, total, tensor2);
}

TEST(ModelFilesTest, WrongSplitCountInFile) {
  const std::string tmp = testing::MakeTempDir();
  WriteTwoShards(tmp, /*count2=*/3, /*total=*/2, "b");
  auto m = ModelFiles::Open(TwoShardPath(tmp, 1));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(), TwoShardPath(tmp, 2) +
                                      ": metadata key 'split.count' is 3 but the set has "
                                      "2 shards");
}

TEST(ModelFilesTest, WrongSplitTensorsCount) {
  const std::string tmp = testing::MakeTempDir();
  WriteTwoShards(tmp, /*count2=*/2, /*total=*/5, "b");
  auto m = ModelFiles::Open(TwoShardPath(tmp, 2));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(), TwoShardPath(tmp, 1) +
                                      ": metadata key 'split.tensors.count' is 5 but the "
                                      "2 shards hold 2 tensors");
}

TEST(ModelFilesTest, TensorInTwoShards) {
  const std::string tmp = testing::MakeTempDir();
  WriteTwoShards(tmp, /*count2=*/2, /*total=*/2, "a");
  auto m = ModelFiles::Open(TwoShardPath(tmp, 1));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("-00002-of-00002.gguf: tensor 'a' is also in shard 1 ("));
}

TEST(ModelFilesTest, UnsplitNameWithSplitCount) {
  const std::string tmp = testing::MakeTempDir();
  WriteShard(tmp + "/m.gguf", 0, 2, 2, "a");
  auto m = ModelFiles::Open(tmp + "/m.gguf");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(),
            tmp + "/m.gguf: metadata key 'split.count' is 2 but the file name has no "
                  "-NNNNN-of-MMMMM.gguf suffix to find the other shards by");
}

TEST(ModelFilesTest, MissingFileAndDirectory) {
  auto missing = ModelFiles::Open("/nonexistent/model.gguf");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("/nonexistent/model.gguf: cannot open"));
  const std::string tmp = testing::MakeTempDir();
  auto dir = ModelFiles::Open(tmp);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dir.status().message(), tmp + ": not a regular file");
}

TEST(ModelFilesTest, HostileFileFailsThroughOpen) {
  const std::string tmp = testing::MakeTempDir();
  testing::GgufBytes b;
  b.Header(3, 1, 0).TensorInfo("w", {1024}, 0, 0).PadTo(32).Zeros(64);
  testing::WriteFileOrDie(tmp + "/h.gguf", b.bytes());
  auto m = ModelFiles::Open(tmp + "/h.gguf");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr(tmp + "/h.gguf: tensor 'w' data: offset 0 + n_bytes 4096"));
}

TEST(ModelFilesTest, EmptyFileIsTruncated) {
  const std::string tmp = testing::MakeTempDir();
  testing::WriteFileOrDie(tmp + "/empty.gguf", "");
  auto m = ModelFiles::Open(tmp + "/empty.gguf");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(m.status().message(),
            tmp + "/empty.gguf: header magic: file truncated: need 4 bytes at offset 0, "
                  "only 0 remain (file size 0)");
}

TEST(ModelFilesDeathTest, MappingIsReadOnly) {
  SLUICE_REQUIRE_GOLDENS(dir);
  auto m = ModelFiles::Open(dir + "/qwen3moe-micro-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.status();
  uint8_t* p = const_cast<uint8_t*>((*m)->tensors().entries()[0].data);
  EXPECT_DEATH(*reinterpret_cast<volatile uint8_t*>(p) = 1, "");
}

TEST(ModelFilesTest, FromFdsMatchesOpen) {
  SLUICE_REQUIRE_GOLDENS(dir);
  auto opened = ModelFiles::Open(Shard(dir + kSplitDir, 2));
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::vector<ShardFd> fds = (*opened)->fds();
  ASSERT_EQ(fds.size(), 3u);
  EXPECT_EQ(fds[0].name, Shard(dir + kSplitDir, 1));
  // The receiver gets its own descriptors, as SCM_RIGHTS would give it.
  for (ShardFd& f : fds) f.fd = dup(f.fd);
  auto received = ModelFiles::FromFds(fds);
  ASSERT_TRUE(received.ok()) << received.status();
  ASSERT_EQ((*received)->tensors().size(), (*opened)->tensors().size());
  for (size_t i = 0; i < (*opened)->tensors().size(); ++i) {
    const TensorEntry& a = (*opened)->tensors().entries()[i];
    const TensorEntry& b = (*received)->tensors().entries()[i];
    EXPECT_EQ(Describe(a), Describe(b));
    EXPECT_EQ(a.shard, b.shard);
    EXPECT_EQ(a.file_offset, b.file_offset);
    EXPECT_NE(a.data, b.data);  // a second mapping of the same bytes
  }
  EXPECT_EQ(std::memcmp((*received)->tensors().entries()[5].data,
                        (*opened)->tensors().entries()[5].data, 64), 0);
  // The originals stay open and owned by `opened`.
  EXPECT_NE(fcntl((*opened)->fds()[0].fd, F_GETFD), -1);
}

TEST(ModelFilesTest, FromFdsInWrongOrderFailsAndClosesFds) {
  SLUICE_REQUIRE_GOLDENS(dir);
  std::vector<ShardFd> fds;
  for (int i : {2, 1, 3}) {
    const std::string p = Shard(dir + kSplitDir, i);
    fds.push_back({p, open(p.c_str(), O_RDONLY | O_CLOEXEC)});
    ASSERT_GE(fds.back().fd, 0);
  }
  auto m = ModelFiles::FromFds(fds);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(), Shard(dir + kSplitDir, 2) +
                                      ": metadata key 'split.no' is 1 but the file is "
                                      "shard 1 of 3 (split.no counts from 0)");
  for (const ShardFd& f : fds) {
    EXPECT_EQ(fcntl(f.fd, F_GETFD), -1) << "fd " << f.fd << " left open";
    EXPECT_EQ(errno, EBADF);
  }
}

TEST(ModelFilesTest, FromFdsWithTooFewShards) {
  SLUICE_REQUIRE_GOLDENS(dir);
  const std::string p = Shard(dir + kSplitDir, 1);
  auto m = ModelFiles::FromFds({{p, open(p.c_str(), O_RDONLY | O_CLOEXEC)}});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(),
            p + ": metadata key 'split.count' is 3 but the set has 1 shards");
}

}  // namespace
}  // namespace sluice
