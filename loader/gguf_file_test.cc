// Hostile-file cases for the GGUF parser: each asserts the status code and
// the message naming the file, the field and the offending value.
#include "loader/gguf_file.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/testing/gguf_bytes.h"

namespace sluice {
namespace {

using ::sluice::testing::GgufBytes;
using ::testing::HasSubstr;

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ8_0 = 8;
constexpr uint32_t kF64 = 28;

absl::StatusOr<std::unique_ptr<GgufFile>> ParseBytes(const GgufBytes& b) {
  return GgufFile::Parse("bad.gguf", b.data(), b.size());
}

void ExpectError(const GgufBytes& b, absl::StatusCode code,
                 const std::string& substr) {
  auto f = ParseBytes(b);
  ASSERT_FALSE(f.ok()) << "parsed although it should fail with: " << substr;
  EXPECT_EQ(f.status().code(), code) << f.status();
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("bad.gguf: "));
  EXPECT_THAT(std::string(f.status().message()), HasSubstr(substr));
}

// One F32 tensor of `ne` at offset 0 with its data, default alignment.
GgufBytes OneTensor(std::vector<uint64_t> ne, uint32_t type, uint64_t data_bytes) {
  GgufBytes b;
  b.Header(3, 1, 0).TensorInfo("w", ne, type, 0).PadTo(32).Zeros(data_bytes);
  return b;
}

TEST(GgufFileTest, ParsesMinimalFile) {
  GgufBytes b = OneTensor({8, 2}, kF32, 64);
  auto f = ParseBytes(b);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->alignment(), 32u);
  EXPECT_EQ((*f)->data_offset(), 96u);  // 24-byte header + 41-byte info, aligned
  ASSERT_EQ((*f)->tensors().size(), 1u);
  const TensorInfo& t = (*f)->tensors()[0];
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.n_dims, 2u);
  EXPECT_EQ(t.ne, (std::array<uint64_t, 4>{8, 2, 1, 1}));
  EXPECT_EQ(t.n_bytes, 64u);
}

TEST(GgufFileTest, AcceptsVersion2) {
  GgufBytes b;
  b.Header(2, 0, 1).Kv("a", GgufValue::Scalar<uint32_t>(7));
  auto f = ParseBytes(b);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 2u);
  EXPECT_EQ(*(*f)->GetU64("a"), 7u);
}

TEST(GgufFileTest, RejectsBadMagic) {
  GgufBytes b;
  b.U32(0x4C4D4747).U32(3).U64(0).U64(0);
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "header magic: expected 'GGUF': not a GGUF file");
}

TEST(GgufFileTest, RejectsVersion1) {
  GgufBytes b;
  b.Header(1, 0, 0);
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "header version: 1 is not supported");
}

TEST(GgufFileTest, RejectsUnknownVersionAndHintsBigEndian) {
  GgufBytes b;
  b.Header(0x03000000, 0, 0);
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "header version: 50331648 is not supported (v2 and v3 are) (a big-endian");
}

TEST(GgufFileTest, RejectsTruncatedHeader) {
  GgufBytes b;
  b.U32(kGgufMagic).U32(3).U32(0);  // tensor_count cut in half
  ExpectError(b, absl::StatusCode::kDataLoss,
              "header tensor_count: file truncated: need 8 bytes at offset 8, only 4 remain");
}

TEST(GgufFileTest, RejectsEmptyFile) {
  auto f = GgufFile::Parse("empty.gguf", nullptr, 0);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(f.status().message()),
              HasSubstr("empty.gguf: header magic: file truncated"));
}

TEST(GgufFileTest, RejectsStringLengthBeyondFile) {
  GgufBytes b;
  b.Header(3, 0, 1).U64(1000000).Raw("abc", 3).Zeros(10);
  ExpectError(b, absl::StatusCode::kDataLoss,
              "metadata entry 0 key: string length 1000000 at offset 24 exceeds the 13 "
              "bytes remaining");
}

TEST(GgufFileTest, RejectsStringValueBeyondFile) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("general.name").U32(8).U64(UINT64_MAX);
  ExpectError(b, absl::StatusCode::kDataLoss,
              "metadata key 'general.name': string length 18446744073709551615");
}

TEST(GgufFileTest, RejectsArrayCountBeyondFile) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("tokenizer.ggml.token_type").U32(9).U32(5).U64(1u << 30);
  ExpectError(b, absl::StatusCode::kDataLoss,
              "metadata key 'tokenizer.ggml.token_type' array: count 1073741824 at "
              "offset 65 needs at least 4 bytes each but only 0 bytes remain");
}

TEST(GgufFileTest, RejectsStringArrayCountBeyondFile) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("t").U32(9).U32(8).U64(UINT64_MAX / 4).Zeros(16);
  ExpectError(b, absl::StatusCode::kDataLoss,
              "metadata key 't' array: count 4611686018427387903");
}

TEST(GgufFileTest, RejectsAbsurdKvCount) {
  GgufBytes b;
  b.Header(3, 0, UINT64_MAX);
  ExpectError(b, absl::StatusCode::kDataLoss,
              "header metadata_kv_count: count 18446744073709551615 at offset 16");
}

TEST(GgufFileTest, RejectsAbsurdTensorCount) {
  GgufBytes b;
  b.Header(3, 1ull << 40, 0).Zeros(64);
  ExpectError(b, absl::StatusCode::kDataLoss,
              "header tensor_count: count 1099511627776 at offset 8");
}

TEST(GgufFileTest, ParsesNestedArrays) {
  GgufValue inner1 = GgufValue::Array<int32_t>({1, -2});
  GgufValue inner2 = GgufValue::StringArray({"x", "yz"});
  GgufValue nested = GgufValue::NestedArray(
      {inner1, inner2, GgufValue::NestedArray({GgufValue::Array<double>({0.5})})});
  GgufBytes b;
  b.Header(3, 0, 1).Kv("n", nested);
  auto f = ParseBytes(b);
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufValue* v = (*f)->Find("n");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->element_type(), GgufType::kArray);
  ASSERT_EQ(v->array_size(), 3u);
  EXPECT_EQ(*v->arrays()[0].Element(1).AsI64(), -2);
  EXPECT_EQ(v->arrays()[1].strings()[1], "yz");
  EXPECT_EQ(*v->arrays()[2].arrays()[0].Element(0).AsF64(), 0.5);
  EXPECT_EQ(v->DebugString(), "[[1, -2] (2 INT32), [\"x\", \"yz\"] (2 STRING), "
                              "[[0.5] (1 FLOAT64)] (1 ARRAY)] (3 ARRAY)");
}

TEST(GgufFileTest, RejectsArraysNestedTooDeep) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("deep").U32(9);
  for (int i = 0; i < kMaxArrayDepth; ++i) b.U32(9).U64(1);
  b.U32(0).U64(0);
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "metadata key 'deep'[0][0][0][0][0][0][0][0]: arrays nested 9 deep exceed "
              "the limit of 8");
}

TEST(GgufFileTest, RejectsUnknownValueType) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("k").U32(13).U32(0);
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "metadata key 'k' value type: unknown GGUF value type id 13 at offset 33");
}

TEST(GgufFileTest, RejectsBoolOtherThanZeroOrOne) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("flag").U32(7).U8(2);
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "metadata key 'flag': BOOL value 2 at offset 40 is neither 0 nor 1");
}

TEST(GgufFileTest, RejectsDuplicateKeys) {
  GgufBytes b;
  b.Header(3, 0, 2)
      .Kv("general.name", GgufValue::String("a"))
      .Kv("general.name", GgufValue::String("b"));
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "metadata key 'general.name': duplicate key (entry 1 repeats entry 0)");
}

TEST(GgufFileTest, RejectsTooManyDims) {
  ExpectError(OneTensor({2, 2, 2, 2, 2}, kF32, 128), absl::StatusCode::kInvalidArgument,
              "tensor 'w' n_dims: 5 is outside 1..4");
}

TEST(GgufFileTest, RejectsZeroDims) {
  ExpectError(OneTensor({}, kF32, 0), absl::StatusCode::kInvalidArgument,
              "tensor 'w' n_dims: 0 is outside 1..4");
}

TEST(GgufFileTest, RejectsZeroDimension) {
  ExpectError(OneTensor({8, 0}, kF32, 0), absl::StatusCode::kInvalidArgument,
              "tensor 'w' ne[1]: 0 (every dimension must be >= 1)");
}

TEST(GgufFileTest, RejectsDimensionAboveInt64) {
  ExpectError(OneTensor({1ull << 63}, kF32, 0), absl::StatusCode::kInvalidArgument,
              "tensor 'w' ne[0]: 9223372036854775808 exceeds INT64_MAX");
}

TEST(GgufFileTest, RejectsOverflowingElementCount) {
  ExpectError(OneTensor({1ull << 32, 1ull << 31, 2}, kF32, 0),
              absl::StatusCode::kInvalidArgument,
              "tensor 'w' ne: element count of [4294967296, 2147483648, 2] overflows int64");
}

TEST(GgufFileTest, RejectsRowNotMultipleOfBlockSize) {
  ExpectError(OneTensor({48, 2}, kQ8_0, 0), absl::StatusCode::kInvalidArgument,
              "tensor 'w' ne[0]: 48 is not a multiple of the q8_0 block size 32");
}

// CVE-2026-27940 shape: the element count fits, the byte size wraps 64 bits
// (2^62 f64 elements = 2^65 bytes; wrapped it would be 0).
TEST(GgufFileTest, RejectsByteSizeOverflow) {
  ExpectError(OneTensor({1ull << 61, 2}, kF64, 0), absl::StatusCode::kInvalidArgument,
              "tensor 'w' n_bytes: byte size of [2305843009213693952, 2] f64 overflows "
              "64 bits");
}

TEST(GgufFileTest, RejectsUnknownTensorType) {
  ExpectError(OneTensor({32}, 99, 128), absl::StatusCode::kInvalidArgument,
              "tensor 'w' type: unknown ggml type id 99");
}

TEST(GgufFileTest, RejectsRetiredTensorType) {
  ExpectError(OneTensor({32}, 4 /* Q4_2 */, 128), absl::StatusCode::kInvalidArgument,
              "tensor 'w' type: unknown ggml type id 4");
}

TEST(GgufFileTest, RejectsTensorDataOutsideFile) {
  ExpectError(OneTensor({64}, kF32, 255), absl::StatusCode::kDataLoss,
              "tensor 'w' data: offset 0 + n_bytes 256 ([64] f32) from data section at 64 "
              "runs past the end of the file (size 319)");
}

TEST(GgufFileTest, RejectsTensorOffsetOverflow) {
  GgufBytes b;
  b.Header(3, 1, 0).TensorInfo("w", {8}, kF32, UINT64_MAX - 31).PadTo(32).Zeros(32);
  ExpectError(b, absl::StatusCode::kDataLoss,
              "tensor 'w' data: offset 18446744073709551584 + n_bytes 32");
}

TEST(GgufFileTest, RejectsMisalignedTensor) {
  GgufBytes b;
  b.Header(3, 1, 0).TensorInfo("w", {8}, kF32, 16).PadTo(32).Zeros(64);
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "tensor 'w' offset: 16 is not a multiple of the alignment 32");
}

TEST(GgufFileTest, HonoursGeneralAlignment) {
  GgufBytes b;
  b.Header(3, 1, 1)
      .Kv("general.alignment", GgufValue::Scalar<uint32_t>(64))
      .TensorInfo("w", {8}, kF32, 64)
      .PadTo(64)
      .Zeros(128);
  auto f = ParseBytes(b);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
  EXPECT_EQ((*f)->tensors()[0].offset, 64u);
}

TEST(GgufFileTest, RejectsAlignmentNotPowerOfTwo) {
  GgufBytes b;
  b.Header(3, 0, 1).Kv("general.alignment", GgufValue::Scalar<uint32_t>(48));
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "metadata key 'general.alignment': 48 is not a nonzero power of two");
}

TEST(GgufFileTest, RejectsZeroAlignment) {
  GgufBytes b;
  b.Header(3, 0, 1).Kv("general.alignment", GgufValue::Scalar<uint32_t>(0));
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "metadata key 'general.alignment': 0 is not a nonzero power of two");
}

TEST(GgufFileTest, RejectsAlignmentOfWrongType) {
  GgufBytes b;
  b.Header(3, 0, 1).Kv("general.alignment", GgufValue::String("32"));
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "metadata key 'general.alignment': expected a non-negative integer, found "
              "STRING \"32\"");
}

// CVE-2026-7482 shape: dims that claim more bytes than the next tensor leaves.
TEST(GgufFileTest, RejectsLyingDimsOverlappingNextTensor) {
  GgufBytes b;
  b.Header(3, 2, 0)
      .TensorInfo("a", {1024}, kF32, 0)
      .TensorInfo("b", {8}, kF32, 32)
      .PadTo(32)
      .Zeros(4096);
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "tensor 'a' data: bytes [0, 4096) of the data section overlap tensor 'b' at "
              "offset 32");
}

TEST(GgufFileTest, RejectsLyingDimsBeyondRemainingData) {
  GgufBytes b;
  b.Header(3, 2, 0)
      .TensorInfo("a", {8}, kF32, 0)
      .TensorInfo("b", {1 << 20}, kF32, 32)
      .PadTo(32)
      .Zeros(64);
  ExpectError(b, absl::StatusCode::kDataLoss,
              "tensor 'b' data: offset 32 + n_bytes 4194304 ([1048576] f32)");
}

TEST(GgufFileTest, RejectsDuplicateTensorNames) {
  GgufBytes b;
  b.Header(3, 2, 0)
      .TensorInfo("w", {8}, kF32, 0)
      .TensorInfo("w", {8}, kF32, 32)
      .PadTo(32)
      .Zeros(64);
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "tensor 'w': duplicate tensor name (tensor info 1 repeats an earlier one)");
}

TEST(GgufFileTest, EscapesUnprintableNamesInMessages) {
  GgufBytes b;
  b.Header(3, 1, 0).TensorInfo(std::string("w\n\x01", 3), {5}, 99, 0).PadTo(32);
  ExpectError(b, absl::StatusCode::kInvalidArgument,
              "tensor 'w\\n\\001' type: unknown ggml type id 99");
}

// ---- typed getters ----

class GgufGetterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GgufBytes b;
    b.Header(3, 0, 9)
        .Kv("u8", GgufValue::Scalar<uint8_t>(200))
        .Kv("neg", GgufValue::Scalar<int32_t>(-5))
        .Kv("big", GgufValue::Scalar<uint64_t>(1ull << 40))
        .Kv("f", GgufValue::Scalar<double>(0.25))
        .Kv("b", GgufValue::Scalar<bool>(true))
        .Kv("s", GgufValue::String("qwen3moe"))
        .Kv("ai", GgufValue::Array<int16_t>({1, -1, 3}))
        .Kv("af", GgufValue::Array<float>({1.5f, -2}))
        .Kv("as", GgufValue::StringArray({"a", "b"}));
    auto f = GgufFile::Parse("m.gguf", b.data(), b.size());
    ASSERT_TRUE(f.ok()) << f.status();
    file_ = std::move(*f);
  }
  std::unique_ptr<GgufFile> file_;
};

TEST_F(GgufGetterTest, ReadsValuesOfCompatibleTypes) {
  EXPECT_EQ(*file_->GetU64("u8"), 200u);
  EXPECT_EQ(*file_->GetU32("u8"), 200u);
  EXPECT_EQ(*file_->GetI64("neg"), -5);
  EXPECT_EQ(*file_->GetU64("big"), 1ull << 40);
  EXPECT_EQ(*file_->GetF32("f"), 0.25f);
  EXPECT_EQ(*file_->GetBool("b"), true);
  EXPECT_EQ(*file_->GetString("s"), "qwen3moe");
  EXPECT_EQ(*file_->GetArrayI32("ai"), (std::vector<int32_t>{1, -1, 3}));
  EXPECT_EQ(*file_->GetArrayF32("af"), (std::vector<float>{1.5f, -2}));
  ASSERT_EQ(file_->GetArrayString("as")->size(), 2u);
  EXPECT_EQ((*file_->GetArrayString("as"))[1], "b");
  ASSERT_EQ(file_->metadata().size(), 9u);
  EXPECT_EQ(file_->metadata()[3].key, "f");  // file order
}

TEST_F(GgufGetterTest, MissingKeyIsNotFound) {
  auto v = file_->GetU32("qwen3moe.block_count");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(v.status().message(), "m.gguf: metadata key 'qwen3moe.block_count' not found");
}

TEST_F(GgufGetterTest, OutOfRangeIntegerNamesValue) {
  auto v = file_->GetU32("big");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(v.status().message(),
            "m.gguf: metadata key 'big': value 1099511627776 does not fit uint32");
  auto n = file_->GetU64("neg");
  EXPECT_EQ(n.status().message(), "m.gguf: metadata key 'neg': value -5 does not fit uint64");
  auto a = file_->GetArrayU32("ai");
  EXPECT_EQ(a.status().message(), "m.gguf: metadata key 'ai'[1]: value -1 does not fit uint32");
}

TEST_F(GgufGetterTest, WrongTypeNamesFoundType) {
  auto v = file_->GetU64("s");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(v.status().message(),
            "m.gguf: metadata key 's': expected an integer (uint64), found STRING "
            "\"qwen3moe\"");
  EXPECT_EQ(file_->GetF32("u8").status().message(),
            "m.gguf: metadata key 'u8': expected FLOAT32 or FLOAT64, found UINT8 200");
  EXPECT_EQ(file_->GetArrayString("ai").status().message(),
            "m.gguf: metadata key 'ai': expected an array of STRING, found ARRAY of 3 INT16");
}

TEST_F(GgufGetterTest, OrVariantsDefaultOnlyWhenAbsent) {
  EXPECT_EQ(*file_->GetU32Or("absent", 7), 7u);
  EXPECT_EQ(*file_->GetU32Or("u8", 7), 200u);
  EXPECT_EQ(*file_->GetF32Or("absent", 1.5f), 1.5f);
  EXPECT_EQ(*file_->GetStringOr("absent", "x"), "x");
  EXPECT_EQ(*file_->GetBoolOr("absent", false), false);
  EXPECT_EQ(file_->GetU32Or("s", 7).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice
