// Replays the committed seed corpus through the fuzz entry point (without
// libFuzzer) and checks each seed's parse outcome: valid_* seeds parse, every
// other seed is rejected with the error its name describes.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "loader/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace sluice {
namespace {

// Seed name -> a fragment of the message its rejection must carry.
const std::map<std::string, std::string>& ExpectedErrors() {
  static const auto* m = new std::map<std::string, std::string>{
      {"alignment_48", "48 is not a nonzero power of two"},
      {"array_too_long", "array: count 1073741824"},
      {"bad_magic", "header magic"},
      {"block_remainder", "is not a multiple of the q8_0 block size 32"},
      {"byte_overflow", "overflows 64 bits"},
      {"duplicate_key", "duplicate key"},
      {"duplicate_tensor", "duplicate tensor name"},
      {"element_overflow", "overflows int64"},
      {"five_dims", "n_dims: 5"},
      {"lying_dims_overlap", "overlap tensor 'b'"},
      {"misaligned", "is not a multiple of the alignment 32"},
      {"nested_too_deep", "arrays nested 9 deep"},
      {"outside_file", "runs past the end of the file"},
      {"string_too_long", "string length 1000000"},
      {"truncated_header", "file truncated"},
      {"unknown_type", "unknown ggml type id 99"},
      {"version1", "header version: 1 is not supported"},
      {"zero_dim", "ne[1]: 0"},
  };
  return *m;
}

TEST(FuzzCorpusTest, SeedsParseAsNamed) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator("fuzz/corpus")) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    EXPECT_LT(bytes.size(), 4096u) << entry.path();
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    const std::string name = entry.path().stem().string();
    auto file = GgufFile::Parse(name, data, bytes.size());
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_TRUE(file.ok()) << name << ": " << file.status();
    } else {
      ASSERT_FALSE(file.ok()) << name;
      ASSERT_EQ(ExpectedErrors().count(name), 1u) << "no expectation for seed " << name;
      EXPECT_NE(std::string(file.status().message()).find(ExpectedErrors().at(name)),
                std::string::npos)
          << name << ": " << file.status();
    }
    EXPECT_EQ(LLVMFuzzerTestOneInput(data, bytes.size()), 0);
    ++seen;
  }
  EXPECT_EQ(seen, 20);
}

}  // namespace
}  // namespace sluice
