#include "tools/dequant_lib.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/testing/goldens.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"

namespace sluice::tools {
namespace {

constexpr const char* kTypes[] = {
    "f16",    "bf16",    "q4_0",   "q4_1",    "q5_0",    "q5_1",  "q8_0",
    "q2_k",   "q3_k",    "q4_k",   "q5_k",    "q6_k",    "iq4_nl", "iq4_xs",
    "tq1_0",  "tq2_0",   "mxfp4",  "nvfp4",   "q1_0",    "q2_0",  "iq2_xxs",
    "iq2_xs", "iq2_s",   "iq3_xxs", "iq3_s",  "iq1_s",   "iq1_m"};

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

TEST(DequantToolTest, WritesLlamaCppValuesForEveryGoldenType) {
  SLUICE_REQUIRE_GOLDENS(dir);
  const std::string gguf = dir + "/quant/quant_types.gguf";
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string out = std::string(tmp ? tmp : "/tmp") + "/dequant_tool_test.f32";
  for (const char* type : kTypes) {
    SCOPED_TRACE(type);
    absl::StatusOr<int64_t> n = DequantizeTensorToFile(gguf, type, out);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, 8 * 512);
    const std::vector<char> got = ReadAll(out);
    const std::vector<char> want = ReadAll(dir + "/quant/" + type + ".dequant.f32");
    ASSERT_EQ(got.size(), want.size());
    int64_t differing = 0;
    for (size_t i = 0; i < got.size(); i += 4) differing += std::memcmp(&got[i], &want[i], 4) != 0;
    std::printf("%-8s %lld of %zu float32 differ from the golden file\n", type,
                static_cast<long long>(differing), got.size() / 4);
    EXPECT_EQ(differing, 0);
  }
}

TEST(DequantToolTest, F32TensorIsCopiedVerbatim) {
  SLUICE_REQUIRE_GOLDENS(dir);
  absl::StatusOr<std::vector<float>> v = DequantizeTensor(dir + "/quant/quant_types.gguf", "input");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 4096u);
  // llama.cpp's f16 tensor is the input rounded to fp16 (nearest even), so
  // rounding what the tool read for "input" must give its golden exactly.
  const std::vector<char> f16 = ReadAll(dir + "/quant/f16.dequant.f32");
  ASSERT_EQ(f16.size(), 4096u * 4);
  int differing = 0;
  for (size_t i = 0; i < v->size(); ++i) {
    const float rounded = kernels::Fp16ToF32(kernels::F32ToFp16((*v)[i]));
    differing += std::memcmp(&rounded, &f16[4 * i], 4) != 0;
  }
  EXPECT_EQ(differing, 0);
  EXPECT_NE((*v)[0], 0.f);
}

TEST(DequantToolTest, MissingTensorIsNotFound) {
  SLUICE_REQUIRE_GOLDENS(dir);
  const std::string gguf = dir + "/quant/quant_types.gguf";
  absl::StatusOr<std::vector<float>> v = DequantizeTensor(gguf, "no_such_tensor");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(v.status().message(), gguf + ": tensor 'no_such_tensor' not found");
}

TEST(DequantToolTest, MissingFileIsAnError) {
  absl::StatusOr<std::vector<float>> v = DequantizeTensor("/nonexistent/x.gguf", "t");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(v.status().message().find("/nonexistent/x.gguf"), absl::string_view::npos);
}

TEST(DequantToolTest, UnwritableOutputIsInternal) {
  SLUICE_REQUIRE_GOLDENS(dir);
  absl::StatusOr<int64_t> n =
      DequantizeTensorToFile(dir + "/quant/quant_types.gguf", "q8_0", "/nonexistent/dir/o.f32");
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(n.status().message(), "/nonexistent/dir/o.f32: No such file or directory");
}

}  // namespace
}  // namespace sluice::tools
