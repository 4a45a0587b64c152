#include "model/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(AppendUtf8Test, EncodesEachLength) {
  std::string s;
  AppendUtf8('A', s);
  AppendUtf8(0xE9, s);
  AppendUtf8(0x65E5, s);
  AppendUtf8(0x1F642, s);
  EXPECT_EQ(s, "A\xC3\xA9\xE6\x97\xA5\xF0\x9F\x99\x82");
}

TEST(ScanUtf8Test, ClassifiesSequences) {
  EXPECT_EQ(ScanUtf8("\xF0\x9F\x99\x82").kind, Utf8Sequence::Kind::kValid);
  EXPECT_EQ(ScanUtf8("\xF0\x9F\x99\x82").length, 4u);
  EXPECT_EQ(ScanUtf8("\xF0\x9F").kind, Utf8Sequence::Kind::kTruncated);
  EXPECT_EQ(ScanUtf8("\xF0\x9F").length, 2u);
  // Overlong (C0), surrogate (ED A0), above U+10FFFF (F4 90) and a lone
  // continuation byte are ill-formed.
  EXPECT_EQ(ScanUtf8("\xC0\x80").kind, Utf8Sequence::Kind::kInvalid);
  EXPECT_EQ(ScanUtf8("\xED\xA0\x80").kind, Utf8Sequence::Kind::kInvalid);
  EXPECT_EQ(ScanUtf8("\xF4\x90\x80\x80").kind, Utf8Sequence::Kind::kInvalid);
  EXPECT_EQ(ScanUtf8("\x80").kind, Utf8Sequence::Kind::kInvalid);
  // E6 97 followed by ASCII: the maximal subpart is two bytes.
  EXPECT_EQ(ScanUtf8("\xE6\x97" "A").kind, Utf8Sequence::Kind::kInvalid);
  EXPECT_EQ(ScanUtf8("\xE6\x97" "A").length, 2u);
}

TEST(SanitizeUtf8Test, ReplacesEachMaximalSubpart) {
  EXPECT_EQ(SanitizeUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(SanitizeUtf8("a\xE6\x97" "b"), "a" + kFffd + "b");
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), kFffd + kFffd);
  EXPECT_EQ(SanitizeUtf8("x\xF0\x9F\x99"), "x" + kFffd);
}

TEST(Utf8StreamDecoderTest, HoldsBackSplitCharacters) {
  Utf8StreamDecoder d;
  // U+1F642 split 1 + 2 + 1 bytes, then U+65E5 split 2 + 1.
  EXPECT_EQ(d.Push("a\xF0"), "a");
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.Push("\x9F\x99"), "");
  EXPECT_EQ(d.pending_bytes(), 3u);
  EXPECT_EQ(d.Push("\x82 "), "\xF0\x9F\x99\x82 ");
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.Push("\xE6\x97"), "");
  EXPECT_EQ(d.Push("\xA5"), "\xE6\x97\xA5");
  EXPECT_EQ(d.Flush(), "");
}

TEST(Utf8StreamDecoderTest, BrokenSequencesBecomeReplacementCharacters) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.Push("\xE6\x97"), "");
  // The next byte cannot continue the sequence: the held bytes are replaced
  // and the new byte is kept as the start of the next character.
  EXPECT_EQ(d.Push("\xC3"), kFffd);
  EXPECT_EQ(d.Push("\xA9\x80"), "\xC3\xA9" + kFffd);
  EXPECT_EQ(d.Push("\xF0\x9F"), "");
  EXPECT_EQ(d.Flush(), kFffd);
  // Flush resets: the decoder starts clean.
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.Push("z"), "z");
}

TEST(Utf8StreamDecoderTest, ByteByByteEqualsSanitizeOfWhole) {
  const std::string input =
      "h\xC3\xA9llo \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82 \xFF\xE6\x97 "
      "\xED\xA0\x80 end\xF0\x9F";
  Utf8StreamDecoder d;
  std::string streamed;
  for (const char c : input) streamed += d.Push(std::string(1, c));
  streamed += d.Flush();
  EXPECT_EQ(streamed, SanitizeUtf8(input));
  EXPECT_EQ(streamed, "h\xC3\xA9llo \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82 " +
                          kFffd + kFffd + " " + kFffd + kFffd + kFffd +
                          " end" + kFffd);
}

}  // namespace
}  // namespace sluice
