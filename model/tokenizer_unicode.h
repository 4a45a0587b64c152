// Code point classes and the qwen2/qwen35 pre-tokenizers (internal to the
// tokenizer).
//
// Byte-level BPE first cuts text into "words" with a regular expression and
// merges only inside a word. Qwen2's expression, as written in its
// tokenizer.json, is
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
//    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Qwen3.5's ("qwen35") differs only in treating marks (\p{M}) as letters:
// [\p{L}\p{M}]+ for \p{L}+ and [^\s\p{L}\p{M}\p{N}] in the symbol run.
//
// SplitWords() is a hand-written scanner with the behaviour of the
// reference tokenizer (llama.cpp), including the ways that differs from a
// true regex engine: the case-insensitive contractions fold ASCII letters
// only, \s is the Unicode White_Space property (so U+00A0 and U+3000 are
// spaces, U+001C..U+001F are not), and an invalid UTF-8 byte becomes U+FFFD
// (three bytes) before merging.
//
// Thread-safety: all functions are pure.
#ifndef SLUICE_MODEL_TOKENIZER_UNICODE_H_
#define SLUICE_MODEL_TOKENIZER_UNICODE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::tokenizer_internal {

// Bit set returned by ClassifyCodePoint.
inline constexpr uint8_t kLetter = 1;      // general category L*
inline constexpr uint8_t kNumber = 2;      // general category N*
inline constexpr uint8_t kWhitespace = 4;  // property White_Space
inline constexpr uint8_t kMark = 8;        // general category M*

uint8_t ClassifyCodePoint(uint32_t cp);

// Decodes UTF-8 the way the reference tokenizer does: a lead byte announces
// the length and the following bytes must be continuation bytes, without
// the overlong/surrogate checks of strict UTF-8. A byte that does not start
// such a sequence becomes U+FFFD and decoding resumes at the next byte; a
// sequence decoding above U+10FFFF also becomes one U+FFFD.
std::vector<uint32_t> DecodeLenient(std::string_view text);

enum class PreTokenizer { kQwen2, kQwen35 };

// The words of `text`, in order; their concatenation is `text` with
// ill-formed bytes replaced as DecodeLenient does.
std::vector<std::string> SplitWords(std::string_view text, PreTokenizer pre);

}  // namespace sluice::tokenizer_internal

#endif  // SLUICE_MODEL_TOKENIZER_UNICODE_H_
