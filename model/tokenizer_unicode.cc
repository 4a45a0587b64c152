#include "model/tokenizer_unicode.h"

#include <algorithm>
#include <iterator>

#include "model/utf8.h"

namespace sluice::tokenizer_internal {
namespace {

struct CodePointRange {
  uint32_t first;
  uint32_t last;
};

#include "model/tokenizer_unicode_tables.inc"

template <size_t N>
bool InRanges(const CodePointRange (&ranges)[N], uint32_t cp) {
  const CodePointRange* it = std::upper_bound(
      std::begin(ranges), std::end(ranges), cp,
      [](uint32_t value, const CodePointRange& r) { return value < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}

// Unicode's White_Space property (PropList.txt); a fixed, short list.
bool IsWhiteSpace(uint32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  switch (cp) {
    case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return false;
  }
}

uint32_t AsciiLower(uint32_t cp) {
  return (cp >= 'A' && cp <= 'Z') ? cp + ('a' - 'A') : cp;
}

bool IsNewline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

// Cuts a code point sequence into qwen2 (or qwen35) words (see the header). Each step
// tries the alternatives of the expression in order at `pos` and returns the
// end of the first one that matches.
class Qwen2Scanner {
 public:
  Qwen2Scanner(const std::vector<uint32_t>& cps, PreTokenizer pre)
      : cps_(cps), letter_(pre == PreTokenizer::kQwen35 ? kLetter | kMark
                                                        : kLetter) {}

  size_t NextEnd(size_t pos) const {
    const uint32_t cp = cps_[pos];
    const uint8_t cls = Class(pos);
    if (size_t end = Contraction(pos); end != 0) return end;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!IsNewline(cp) && !(cls & kNumber) &&
        ((cls & letter_) || (Class(pos + 1) & letter_))) {
      size_t end = pos + 1;
      while (Class(end) & letter_) ++end;
      return end;
    }
    // \p{N}
    if (cls & kNumber) return pos + 1;
    // " ?[^\s\p{L}\p{N}]+[\r\n]*". A space at the very end also lands here,
    // as a word of its own.
    const uint8_t kWordish = letter_ | kNumber | kWhitespace;
    const size_t start = pos + (cp == ' ' ? 1 : 0);
    if (!(Class(start) & kWordish)) {
      size_t end = start;
      while (end < cps_.size() && !(Class(end) & kWordish)) ++end;
      while (end < cps_.size() && IsNewline(cps_[end])) ++end;
      return end;
    }
    return WhitespaceEnd(pos);
  }

 private:
  uint8_t Class(size_t pos) const {
    return pos < cps_.size() ? ClassifyCodePoint(cps_[pos]) : kOutOfRange;
  }

  // (?i:'s|'t|'re|'ve|'m|'ll|'d); 0 when none matches.
  size_t Contraction(size_t pos) const {
    if (cps_[pos] != '\'' || pos + 1 >= cps_.size()) return 0;
    const uint32_t a = AsciiLower(cps_[pos + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    if (pos + 2 >= cps_.size()) return 0;
    const uint32_t b = AsciiLower(cps_[pos + 2]);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') ||
        (a == 'l' && b == 'l')) {
      return pos + 3;
    }
    return 0;
  }

  // \s*[\r\n]+ | \s+(?!\S) | \s+ | a single unmatched code point.
  size_t WhitespaceEnd(size_t pos) const {
    size_t end = pos;
    size_t after_last_newline = 0;
    while (Class(end) & kWhitespace) {
      if (IsNewline(cps_[end])) after_last_newline = end + 1;
      ++end;
    }
    if (after_last_newline != 0) return after_last_newline;
    // Leave the last space of a run to prefix the word that follows.
    if (end - pos > 1 && end < cps_.size()) return end - 1;
    return end > pos ? end : pos + 1;
  }

  // Past the end nothing matches any class; a code point never has this.
  static constexpr uint8_t kOutOfRange = 0x80;

  const std::vector<uint32_t>& cps_;
  const uint8_t letter_;  // the classes that count as \p{L}
};

}  // namespace

uint8_t ClassifyCodePoint(uint32_t cp) {
  if (cp < 0x80) {
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return kLetter;
    if (cp >= '0' && cp <= '9') return kNumber;
    return IsWhiteSpace(cp) ? kWhitespace : 0;
  }
  if (IsWhiteSpace(cp)) return kWhitespace;
  if (InRanges(kLetterRanges, cp)) return kLetter;
  if (InRanges(kNumberRanges, cp)) return kNumber;
  if (InRanges(kMarkRanges, cp)) return kMark;
  return 0;
}

std::vector<uint32_t> DecodeLenient(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t lead = static_cast<uint8_t>(text[i]);
    size_t length = 0;
    uint32_t cp = 0;
    if (lead < 0x80) {
      length = 1, cp = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2, cp = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, cp = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, cp = lead & 0x07;
    }
    bool ok = length != 0 && i + length <= text.size();
    for (size_t k = 1; ok && k < length; ++k) {
      const uint8_t b = static_cast<uint8_t>(text[i + k]);
      ok = (b & 0xC0) == 0x80;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (!ok) {
      cps.push_back(kReplacementCharacter);
      ++i;
      continue;
    }
    cps.push_back(cp > 0x10FFFF ? kReplacementCharacter : cp);
    i += length;
  }
  return cps;
}

std::vector<std::string> SplitWords(std::string_view text, PreTokenizer pre) {
  const std::vector<uint32_t> cps = DecodeLenient(text);
  const Qwen2Scanner scanner(cps, pre);
  std::vector<std::string> words;
  size_t pos = 0;
  while (pos < cps.size()) {
    const size_t end = scanner.NextEnd(pos);
    std::string word;
    for (size_t i = pos; i < end; ++i) AppendUtf8(cps[i], word);
    words.push_back(std::move(word));
    pos = end;
  }
  return words;
}

}  // namespace sluice::tokenizer_internal
