// Replays fixed inputs through the tokenizer's fuzz entry point (without
// libFuzzer): the entry point aborts on a violated property, so returning
// is the assertion.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int Feed(const std::string& in) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
}

TEST(TokenizerFuzzerTest, EntryPointHoldsItsPropertiesOnHandMadeInputs) {
  for (char mode : {'\0', '\1', '\2', '\3'}) {
    EXPECT_EQ(Feed(std::string(1, mode) + "the thing in the ring\n\n"), 0);
    EXPECT_EQ(Feed(std::string(1, mode) + "<|im_start|>user\nhi<|im_end|><tool>"), 0);
    EXPECT_EQ(Feed(std::string(1, mode) + "\xff\xfe broken \xc3"), 0);
    EXPECT_EQ(Feed(std::string(1, mode) + "\xe4\xbd\xa0\xe5\xa5\xbd 123 '' 's 're"), 0);
    EXPECT_EQ(Feed(std::string(1, mode) + std::string(5000, ' ')), 0);
    EXPECT_EQ(Feed(std::string(1, mode) + std::string("\0a\0", 3)), 0);
  }
  EXPECT_EQ(Feed(""), 0);
}

// The committed seeds (fuzz/make_text_seeds.sh) hold the same properties.
TEST(TokenizerFuzzerTest, SeedsHoldTheProperties) {
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator("fuzz/corpus_tokenizer")) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    EXPECT_EQ(Feed(bytes.str()), 0) << entry.path();
    ++seeds;
  }
  EXPECT_EQ(seeds, 5);
}

}  // namespace
