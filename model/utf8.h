// UTF-8 helpers shared by the tokenizer and the streaming detokenizer.
//
// Token pieces of a byte-level BPE vocabulary are arbitrary byte strings: one
// multi-byte character is often split over two or more tokens. Text that
// leaves the model (gRPC string fields must be valid UTF-8) therefore goes
// through Utf8StreamDecoder, which releases only complete, well-formed
// characters and holds back a trailing incomplete one until more bytes come.
//
// "Well-formed" is Unicode's definition (Table 3-7 of the Unicode Standard):
// no overlong forms, no surrogates, nothing above U+10FFFF. Each maximal
// ill-formed subpart is replaced by one U+FFFD, the practice the Unicode
// Standard recommends (and browsers follow), so the output is always valid.
#ifndef SLUICE_MODEL_UTF8_H_
#define SLUICE_MODEL_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice {

inline constexpr uint32_t kReplacementCharacter = 0xFFFD;

// Appends the UTF-8 form of `cp`. Precondition: cp <= 0x10FFFF (surrogates
// are encoded like any other code point).
void AppendUtf8(uint32_t cp, std::string& out);

// What starts at the front of a byte string.
struct Utf8Sequence {
  enum class Kind {
    kValid,      // `length` bytes form one well-formed character
    kTruncated,  // all of the input is a proper prefix of a well-formed one
    kInvalid,    // the first `length` bytes are a maximal ill-formed subpart
  };
  Kind kind;
  size_t length;
};

// Classifies the sequence at the front of `bytes`. Precondition: !bytes.empty().
Utf8Sequence ScanUtf8(std::string_view bytes);

// `bytes` with every ill-formed subpart (including a truncated tail) replaced
// by U+FFFD.
std::string SanitizeUtf8(std::string_view bytes);

// Turns a stream of byte chunks into a stream of valid UTF-8 text.
//
// Push() returns every complete character buffered so far (ill-formed bytes
// as U+FFFD) and keeps a trailing truncated sequence (at most 3 bytes) for
// the next call; Flush() ends the stream, returning that tail as U+FFFD, and
// leaves the decoder empty for reuse. Concatenating all outputs equals
// SanitizeUtf8 of the concatenated inputs.
//
// Thread-safety: none; one decoder per stream.
class Utf8StreamDecoder {
 public:
  std::string Push(std::string_view bytes);
  std::string Flush();
  // Bytes held back by the last Push().
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string pending_;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_UTF8_H_
