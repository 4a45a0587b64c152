#include "loader/gguf_writer.h"

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/gguf_file.h"
#include "loader/testing/gguf_bytes.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<std::unique_ptr<GgufFile>> ParseFile(const std::string& path,
                                                    std::string& bytes) {
  bytes = ReadAll(path);
  return GgufFile::Parse(path, reinterpret_cast<const uint8_t*>(bytes.data()),
                         bytes.size());
}

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

// Writes one key of every value type, an F32 tensor "a" and a Q8_0 tensor
// "b" (streamed in uneven pieces) with alignment 64.
void WriteEveryValueType(const std::string& path, const std::vector<uint8_t>& a,
                         const std::vector<uint8_t>& b) {
  auto w = GgufWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status();
  GgufWriter& g = **w;
  ASSERT_TRUE(g.Add("general.alignment", GgufValue::Scalar<uint32_t>(64)).ok());
  ASSERT_TRUE(g.Add("u8", GgufValue::Scalar<uint8_t>(255)).ok());
  ASSERT_TRUE(g.Add("i8", GgufValue::Scalar<int8_t>(-128)).ok());
  ASSERT_TRUE(g.Add("u16", GgufValue::Scalar<uint16_t>(65535)).ok());
  ASSERT_TRUE(g.Add("i16", GgufValue::Scalar<int16_t>(-32768)).ok());
  ASSERT_TRUE(g.Add("u32", GgufValue::Scalar<uint32_t>(4000000000u)).ok());
  ASSERT_TRUE(g.Add("i32", GgufValue::Scalar<int32_t>(-2000000000)).ok());
  ASSERT_TRUE(g.Add("f32", GgufValue::Scalar<float>(1e-6f)).ok());
  ASSERT_TRUE(g.Add("bool", GgufValue::Scalar<bool>(true)).ok());
  ASSERT_TRUE(g.Add("str", GgufValue::String(std::string("a\0b", 3))).ok());
  ASSERT_TRUE(g.Add("u64", GgufValue::Scalar<uint64_t>(UINT64_MAX)).ok());
  ASSERT_TRUE(g.Add("i64", GgufValue::Scalar<int64_t>(INT64_MIN)).ok());
  ASSERT_TRUE(g.Add("f64", GgufValue::Scalar<double>(1e300)).ok());
  ASSERT_TRUE(g.Add("arr_str", GgufValue::StringArray({"Ġthe", "", "<|im_end|>"})).ok());
  ASSERT_TRUE(g.Add("arr_bool", GgufValue::Array<bool>({true, false})).ok());
  ASSERT_TRUE(g.Add("arr_nested", GgufValue::NestedArray({GgufValue::Array<int64_t>({-1}),
                                                           GgufValue::StringArray({"z"})}))
                  .ok());
  ASSERT_TRUE(g.AddTensorInfo("a", GgmlType::kF32, {8, 3}).ok());
  ASSERT_TRUE(g.AddTensorInfo("b", GgmlType::kQ8_0, {64, 2, 3}).ok());
  EXPECT_EQ(g.TensorBytes("b"), 2u * 34 * 2 * 3);
  ASSERT_TRUE(g.WriteTensor("a", a).ok());
  // Stream b in uneven pieces, as a larger-than-memory writer would.
  ASSERT_TRUE(g.AppendTensorData(absl::MakeConstSpan(b).subspan(0, 100)).ok());
  ASSERT_TRUE(g.AppendTensorData(absl::MakeConstSpan(b).subspan(100)).ok());
  ASSERT_TRUE(g.Finish().ok());
}

TEST(GgufWriterTest, RoundTripsEveryValueTypeAndTensorBytes) {
  const std::string path = testing::MakeTempDir() + "/all.gguf";
  const std::vector<uint8_t> a = Pattern(96, 1), b = Pattern(408, 2);
  ASSERT_NO_FATAL_FAILURE(WriteEveryValueType(path, a, b));

  std::string bytes;
  auto f = ParseFile(path, bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& file = **f;
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 64u);
  ASSERT_EQ(file.metadata().size(), 16u);
  EXPECT_EQ(file.metadata()[1].key, "u8");
  EXPECT_EQ(*file.GetU64("u8"), 255u);
  EXPECT_EQ(*file.GetI64("i8"), -128);
  EXPECT_EQ(*file.GetU64("u16"), 65535u);
  EXPECT_EQ(*file.GetI64("i16"), -32768);
  EXPECT_EQ(*file.GetU32("u32"), 4000000000u);
  EXPECT_EQ(*file.GetI64("i32"), -2000000000);
  EXPECT_EQ(*file.GetF32("f32"), 1e-6f);
  EXPECT_EQ(*file.GetBool("bool"), true);
  EXPECT_EQ(*file.GetString("str"), std::string("a\0b", 3));
  EXPECT_EQ(*file.GetU64("u64"), UINT64_MAX);
  EXPECT_EQ(*file.GetI64("i64"), INT64_MIN);
  EXPECT_EQ(*file.GetF64("f64"), 1e300);
  EXPECT_EQ(file.Find("u64")->type(), GgufType::kUint64);
  EXPECT_EQ(file.Find("i8")->type(), GgufType::kInt8);
  EXPECT_EQ(*file.GetArrayString("arr_str"),
            absl::MakeConstSpan(std::vector<std::string>{"Ġthe", "", "<|im_end|>"}));
  EXPECT_EQ(*file.GetArrayBool("arr_bool"), (std::vector<bool>{true, false}));
  EXPECT_EQ(file.Find("arr_nested")->DebugString(),
            "[[-1] (1 INT64), [\"z\"] (1 STRING)] (2 ARRAY)");

  ASSERT_EQ(file.tensors().size(), 2u);
  const TensorInfo& tb = file.tensors()[1];
  EXPECT_EQ(tb.type, GgmlType::kQ8_0);
  EXPECT_EQ(tb.ne, (std::array<uint64_t, 4>{64, 2, 3, 1}));
  EXPECT_EQ(tb.offset, 128u);  // 96 bytes of "a" padded to 64
  EXPECT_EQ(file.data_offset() % 64, 0u);
  EXPECT_EQ(bytes.substr(file.data_offset(), 96), std::string(a.begin(), a.end()));
  EXPECT_EQ(bytes.substr(file.data_offset() + tb.offset, b.size()),
            std::string(b.begin(), b.end()));
}

TEST(GgufWriterTest, WritesVersion2) {
  const std::string path = testing::MakeTempDir() + "/v2.gguf";
  auto w = GgufWriter::Create(path, 2);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Finish().ok());
  std::string bytes;
  auto f = ParseFile(path, bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 2u);
}

TEST(GgufWriterTest, RejectsMisuse) {
  const std::string path = testing::MakeTempDir() + "/x.gguf";
  auto w = GgufWriter::Create(path);
  ASSERT_TRUE(w.ok());
  GgufWriter& g = **w;
  ASSERT_TRUE(g.Add("k", GgufValue::Scalar<uint8_t>(1)).ok());
  EXPECT_THAT(std::string(g.Add("k", GgufValue::Scalar<uint8_t>(2)).message()),
              HasSubstr("metadata key 'k' added twice"));
  EXPECT_THAT(std::string(g.Add("general.alignment", GgufValue::Scalar<uint32_t>(3))
                              .message()),
              HasSubstr("must be a nonzero power of two"));
  EXPECT_THAT(std::string(g.AddTensorInfo("q", GgmlType::kQ8_0, {33}).message()),
              HasSubstr("tensor 'q': ne[0] = 33"));
  EXPECT_THAT(std::string(g.AddTensorInfo("q", GgmlType::kF32, {1, 2, 3, 4, 5}).message()),
              HasSubstr("n_dims 5 is outside 1..4"));
  ASSERT_TRUE(g.AddTensorInfo("t1", GgmlType::kF32, {4}).ok());
  ASSERT_TRUE(g.AddTensorInfo("t2", GgmlType::kF32, {4}).ok());
  EXPECT_EQ(g.AddTensorInfo("t1", GgmlType::kF32, {4}).code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<uint8_t> data(16, 0);
  absl::Status out_of_order = g.WriteTensor("t2", data);
  EXPECT_EQ(out_of_order.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out_of_order.message()),
              HasSubstr("tensor 't2' written out of order (next is 't1')"));
  EXPECT_THAT(std::string(g.WriteTensor("t1", absl::MakeConstSpan(data).subspan(4)).message()),
              HasSubstr("tensor 't1' given 12 bytes, its shape needs 16"));
  ASSERT_TRUE(g.WriteTensor("t1", data).ok());
  absl::Status incomplete = g.Finish();
  EXPECT_EQ(incomplete.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(incomplete.message()),
              HasSubstr("Finish with tensor 't2' (2 of 2) not fully written"));
}

TEST(GgufWriterTest, CreateFailsInMissingDirectory) {
  auto w = GgufWriter::Create("/nonexistent-dir/x.gguf");
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr("/nonexistent-dir/x.gguf: cannot create"));
}

}  // namespace
}  // namespace sluice
