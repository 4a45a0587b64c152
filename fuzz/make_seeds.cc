// Writes the seed corpus of fuzz/: small crafted GGUF files, valid and
// broken in each way the parser checks (each well under 4 KiB).
//   make_seeds OUT_DIR
#include <cstdio>
#include <string>
#include <vector>

#include "loader/gguf_file.h"
#include "loader/testing/gguf_bytes.h"

namespace {

using sluice::GgufValue;
using sluice::testing::GgufBytes;

// A valid file with one value of every type and three tensors.
GgufBytes Valid(uint32_t version) {
  GgufBytes b;
  b.Header(version, 3, 16)
      .Kv("general.architecture", GgufValue::String("qwen3moe"))
      .Kv("general.alignment", GgufValue::Scalar<uint32_t>(32))
      .Kv("u8", GgufValue::Scalar<uint8_t>(1))
      .Kv("i8", GgufValue::Scalar<int8_t>(-1))
      .Kv("u16", GgufValue::Scalar<uint16_t>(2))
      .Kv("i16", GgufValue::Scalar<int16_t>(-2))
      .Kv("u32", GgufValue::Scalar<uint32_t>(3))
      .Kv("i32", GgufValue::Scalar<int32_t>(-3))
      .Kv("f32", GgufValue::Scalar<float>(0.5f))
      .Kv("bool", GgufValue::Scalar<bool>(true))
      .Kv("u64", GgufValue::Scalar<uint64_t>(4))
      .Kv("i64", GgufValue::Scalar<int64_t>(-4))
      .Kv("f64", GgufValue::Scalar<double>(0.25))
      .Kv("tokens", GgufValue::StringArray({"a", "b", "\xC4\xA0the"}))
      .Kv("types", GgufValue::Array<int32_t>({1, 1, 3}))
      .Kv("nested", GgufValue::NestedArray({GgufValue::Array<uint16_t>({1, 2}),
                                            GgufValue::StringArray({"x"})}))
      .TensorInfo("token_embd.weight", {32, 2}, 0, 0)
      .TensorInfo("blk.0.ffn_up_exps.weight", {32, 1, 2}, 8, 256)
      .TensorInfo("output_norm.weight", {4}, 1, 384)
      .PadTo(32)
      .Zeros(416);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<std::pair<std::string, GgufBytes>> seeds;
  seeds.push_back({"valid_v3", Valid(3)});
  seeds.push_back({"valid_v2", Valid(2)});
  {
    GgufBytes b;
    b.U32(0x12345678).U32(3).U64(0).U64(0);
    seeds.push_back({"bad_magic", b});
  }
  {
    GgufBytes b;
    b.Header(1, 0, 0);
    seeds.push_back({"version1", b});
  }
  {
    GgufBytes b;
    b.U32(sluice::kGgufMagic).U32(3).U32(0);
    seeds.push_back({"truncated_header", b});
  }
  {
    GgufBytes b;
    b.Header(3, 0, 1).U64(1000000).Raw("abc", 3).Zeros(10);
    seeds.push_back({"string_too_long", b});
  }
  {
    GgufBytes b;
    b.Header(3, 0, 1).Str("t").U32(9).U32(5).U64(1u << 30);
    seeds.push_back({"array_too_long", b});
  }
  {
    GgufBytes b;
    b.Header(3, 0, 1).Str("deep").U32(9);
    for (int i = 0; i < 9; ++i) b.U32(9).U64(1);
    b.U32(0).U64(0);
    seeds.push_back({"nested_too_deep", b});
  }
  auto one_tensor = [](std::vector<uint64_t> ne, uint32_t type, uint64_t offset,
                       size_t data) {
    GgufBytes b;
    b.Header(3, 1, 0).TensorInfo("w", ne, type, offset).PadTo(32).Zeros(data);
    return b;
  };
  seeds.push_back({"five_dims", one_tensor({2, 2, 2, 2, 2}, 0, 0, 128)});
  seeds.push_back({"zero_dim", one_tensor({8, 0}, 0, 0, 64)});
  seeds.push_back({"element_overflow", one_tensor({1ull << 32, 1ull << 31, 2}, 0, 0, 64)});
  seeds.push_back({"byte_overflow", one_tensor({1ull << 61, 2}, 28, 0, 64)});
  seeds.push_back({"block_remainder", one_tensor({48, 2}, 8, 0, 128)});
  seeds.push_back({"unknown_type", one_tensor({32}, 99, 0, 128)});
  seeds.push_back({"outside_file", one_tensor({64}, 0, 0, 255)});
  seeds.push_back({"misaligned", one_tensor({8}, 0, 16, 64)});
  {
    GgufBytes b;
    b.Header(3, 0, 1).Kv("general.alignment", GgufValue::Scalar<uint32_t>(48));
    seeds.push_back({"alignment_48", b});
  }
  {
    GgufBytes b;
    b.Header(3, 2, 0).TensorInfo("a", {64}, 0, 0).TensorInfo("b", {8}, 0, 32)
        .PadTo(32).Zeros(320);
    seeds.push_back({"lying_dims_overlap", b});
  }
  {
    GgufBytes b;
    b.Header(3, 2, 0).TensorInfo("w", {8}, 0, 0).TensorInfo("w", {8}, 0, 32)
        .PadTo(32).Zeros(64);
    seeds.push_back({"duplicate_tensor", b});
  }
  {
    GgufBytes b;
    b.Header(3, 0, 2).Kv("k", GgufValue::Scalar<uint8_t>(1))
        .Kv("k", GgufValue::Scalar<uint8_t>(2));
    seeds.push_back({"duplicate_key", b});
  }
  for (const auto& [name, b] : seeds) {
    const std::string path = dir + "/" + name + ".gguf";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(b.data(), 1, b.size(), f) != b.size() ||
        std::fclose(f) != 0) {
      std::perror(path.c_str());
      return 1;
    }
  }
  std::printf("%zu seeds written to %s\n", seeds.size(), dir.c_str());
  return 0;
}
