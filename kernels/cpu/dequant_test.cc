#include "kernels/cpu/dequant.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "base/testing/goldens.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::kernels {
namespace {

using ::testing::HasSubstr;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(F32ToFp16(1.0f), 0x3C00);
  EXPECT_EQ(F32ToFp16(-2.0f), 0xC000);
  EXPECT_EQ(F32ToFp16(65504.0f), 0x7BFF);
  EXPECT_EQ(F32ToFp16(65519.99f), 0x7BFF);
  EXPECT_EQ(F32ToFp16(65520.0f), 0x7C00);  // halfway to 65536: ties to even = inf
  EXPECT_EQ(F32ToFp16(0x1p-24f), 0x0001);
  EXPECT_EQ(F32ToFp16(0x1p-25f), 0x0000);        // tie between 0 and 1 ulp: even
  EXPECT_EQ(F32ToFp16(0x1.8p-24f), 0x0002);      // tie between 1 and 2: even
  EXPECT_EQ(F32ToFp16(1.0f + 0x1p-11f), 0x3C00);  // tie: even mantissa
  EXPECT_EQ(F32ToFp16(1.0f + 0x3p-11f), 0x3C02);
  EXPECT_EQ(F32ToFp16(0x1.ffcp-15f), 0x0400);  // subnormal rounds up to min normal
  EXPECT_EQ(F32ToFp16(-0.0f), 0x8000);
  EXPECT_EQ(F32ToFp16(INFINITY), 0x7C00);
  EXPECT_EQ(F32ToFp16(NAN) & 0x7FFF, 0x7E00);
  EXPECT_EQ(Fp16ToF32(0x0001), 0x1p-24f);
  EXPECT_EQ(Fp16ToF32(0x3555), 0x1.554p-2f);
  EXPECT_TRUE(std::isnan(Fp16ToF32(0x7E01)));
}

TEST(Fp16Test, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7FFF) > 0x7C00) continue;  // NaN payloads are not kept
    ASSERT_EQ(F32ToFp16(Fp16ToF32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Bf16Test, KnownValues) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(F32ToBf16(1.0f + 0x1p-8f), 0x3F80);   // tie: even
  EXPECT_EQ(F32ToBf16(1.0f + 0x3p-8f), 0x3F82);   // tie: even (up)
  EXPECT_EQ(F32ToBf16(1.0f + 0x1p-9f), 0x3F80);
  EXPECT_EQ(F32ToBf16(-3.0f), 0xC040);
  EXPECT_EQ(F32ToBf16(NAN) & 0x7FC0, 0x7FC0);
  EXPECT_EQ(Bf16ToF32(0x3F80), 1.0f);
}

TEST(DequantizeRowTest, RejectsBadLength) {
  std::vector<uint8_t> src(1024);
  std::vector<float> dst(512);
  absl::Status s = DequantizeRow(GgmlType::kQ4_K, src.data(), 100, dst.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "q4_k: n=100 is not a multiple of the block size 256");
  s = DequantizeRow(GgmlType::kQ8_0, src.data(), -32, dst.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("n=-32"));
}

TEST(DequantizeRowTest, RejectsIntegerTypes) {
  std::vector<uint8_t> src(64);
  std::vector<float> dst(16);
  absl::Status s = DequantizeRow(GgmlType::kI32, src.data(), 16, dst.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "i32: dequantization not supported");
  EXPECT_FALSE(IsDequantizable(GgmlType::kI8));
  EXPECT_FALSE(IsDequantizable(GgmlType::kF64));
  EXPECT_TRUE(IsDequantizable(GgmlType::kIQ1_M));
}

TEST(DequantizeRowTest, Q8_0HandBuiltBlock) {
  uint8_t block[34] = {};
  const uint16_t d = F32ToFp16(0.5f);
  std::memcpy(block, &d, 2);
  for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<uint8_t>(j - 16);
  float out[32];
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ8_0, block, 32, out).ok());
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j - 16)) << j;
}

TEST(RowBytesTest, Sizes) {
  EXPECT_EQ(*RowBytes(GgmlType::kQ4_K, 512), 288);
  EXPECT_EQ(*RowBytes(GgmlType::kF16, 3), 6);
  EXPECT_EQ(*RowBytes(GgmlType::kQ1_0, 256), 36);
  EXPECT_EQ(RowBytes(GgmlType::kQ1_0, 64).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- Goldens: llama.cpp's to_float of quant_types.gguf ----

// Minimal GGUF v3 reader for this test only (kernels/ has no GGUF code):
// returns name -> (type id, absolute byte offset) of every tensor.
class TinyGguf {
 public:
  explicit TinyGguf(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(f), {});
  }
  bool Parse(std::map<std::string, std::pair<uint32_t, uint64_t>>* tensors) {
    if (bytes_.size() < 24 || std::memcmp(bytes_.data(), "GGUF", 4) != 0) return false;
    pos_ = 8;
    const uint64_t n_tensors = U64(), n_kv = U64();
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < n_kv; ++i) {
      const std::string key = Str();
      const uint32_t type = U32();
      if (key == "general.alignment" && type == 4) {
        alignment = U32();
      } else {
        SkipValue(type);
      }
    }
    std::vector<std::pair<std::string, std::pair<uint32_t, uint64_t>>> infos;
    for (uint64_t i = 0; i < n_tensors; ++i) {
      std::string name = Str();
      const uint32_t n_dims = U32();
      for (uint32_t d = 0; d < n_dims; ++d) U64();
      const uint32_t type = U32();
      const uint64_t offset = U64();
      infos.push_back({name, {type, offset}});
    }
    const uint64_t data_start = (pos_ + alignment - 1) / alignment * alignment;
    for (auto& [name, info] : infos) (*tensors)[name] = {info.first, data_start + info.second};
    return pos_ <= bytes_.size();
  }
  const char* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  template <typename T>
  T Get() {
    T v{};
    if (pos_ + sizeof(T) <= bytes_.size()) std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t U32() { return Get<uint32_t>(); }
  uint64_t U64() { return Get<uint64_t>(); }
  std::string Str() {
    const uint64_t n = U64();
    std::string s = pos_ + n <= bytes_.size() ? std::string(bytes_.data() + pos_, n) : "";
    pos_ += n;
    return s;
  }
  void SkipValue(uint32_t type) {
    static const int kSizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
      Str();
    } else if (type == 9) {
      const uint32_t elem = U32();
      const uint64_t n = U64();
      for (uint64_t i = 0; i < n && pos_ <= bytes_.size(); ++i) SkipValue(elem);
    } else if (type < 13) {
      pos_ += kSizes[type];
    }
  }
  std::vector<char> bytes_;
  size_t pos_ = 0;
};

TEST(DequantizeGoldenTest, EveryTypeMatchesLlamaCppBitForBit) {
  SLUICE_REQUIRE_GOLDENS(dir);
  TinyGguf gguf(dir + "/quant/quant_types.gguf");
  std::map<std::string, std::pair<uint32_t, uint64_t>> tensors;
  ASSERT_TRUE(gguf.Parse(&tensors)) << "cannot parse quant_types.gguf";
  constexpr int64_t kRows = 8, kCols = 512;
  int checked = 0;
  for (const auto& [name, info] : tensors) {
    if (name == "input") continue;
    SCOPED_TRACE(name);
    const std::optional<GgmlTypeTraits> traits = LookupGgmlType(info.first);
    ASSERT_TRUE(traits.has_value()) << "type id " << info.first;
    EXPECT_EQ(traits->name, name);
    const int64_t row_bytes = *RowBytes(traits->type, kCols);
    ASSERT_LE(info.second + kRows * row_bytes, gguf.size());
    std::ifstream g(dir + "/quant/" + name + ".dequant.f32", std::ios::binary);
    std::vector<char> gold(std::istreambuf_iterator<char>(g), {});
    ASSERT_EQ(gold.size(), kRows * kCols * 4);
    std::vector<float> out(kRows * kCols);
    for (int64_t r = 0; r < kRows; ++r) {
      ASSERT_TRUE(DequantizeRow(traits->type, gguf.data() + info.second + r * row_bytes, kCols,
                                out.data() + r * kCols)
                      .ok());
    }
    int64_t differing = 0, first = -1;
    for (int64_t i = 0; i < kRows * kCols; ++i) {
      uint32_t want;
      std::memcpy(&want, gold.data() + 4 * i, 4);
      if (Bits(out[i]) != want) {
        if (first < 0) first = i;
        ++differing;
      }
    }
    std::printf("%-8s %lld of %lld values differ from llama.cpp (first at %lld)\n",
                name.c_str(), static_cast<long long>(differing),
                static_cast<long long>(kRows * kCols), static_cast<long long>(first));
    EXPECT_EQ(differing, 0) << name << ": " << differing << " of " << kRows * kCols
                            << " values differ, first at index " << first;
    ++checked;
  }
  EXPECT_EQ(checked, 27);
}

}  // namespace
}  // namespace sluice::kernels
