// Byte-level BPE tokenizer (GPT-2 style vocabularies with the qwen2 or
// qwen35 pre-tokenizer), detokenizer and a streaming detokenizer.
//
// Encode() reproduces llama.cpp's llama_tokenize(text, add_special=false,
// parse_special) for these vocabularies, and Decode(ids, true) its
// llama_detokenize(remove_special=false, unparse_special=true); the golden
// cases in shared/goldens/tokenizer_cases.json are the contract
// (model/tokenizer_test.cc).
//
// How text becomes ids:
//  1. Special tokens are cut out of the raw bytes first, longest text first.
//     CONTROL and UNKNOWN tokens are cut only when `parse_special` is true;
//     USER_DEFINED tokens always are (as in llama.cpp and Hugging Face
//     tokenizers, where added tokens are never split).
//  2. Each remaining stretch is cut into words by the qwen2 (or qwen35)
//     expression (model/tokenizer_unicode.h).
//  3. Each word's bytes are spelled with the GPT-2 byte-to-code-point map
//     and merged pairwise, always the adjacent pair with the lowest merge
//     rank first (leftmost on ties), until no pair has a rank.
//  4. Each resulting symbol is looked up; a symbol missing from the
//     vocabulary falls back to one token per byte where such a token exists.
//
// Thread-safety: a Tokenizer is immutable after Create(); all const methods
// may be called concurrently. TokenStreamDecoder is single-threaded.
#ifndef SLUICE_MODEL_TOKENIZER_H_
#define SLUICE_MODEL_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/tokenizer_unicode.h"
#include "model/utf8.h"

namespace sluice {

// Token types as stored in GGUF tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// The vocabulary as a GGUF file stores it (see VocabFromGguf in
// model/tokenizer_gguf.h). Ids absent from the file are -1.
struct VocabData {
  std::vector<std::string> tokens;     // id -> text, byte-level spelled
  std::vector<int32_t> token_types;    // id -> TokenType; empty = all normal
  std::vector<std::string> merges;     // rank -> "left right"
  int32_t bos = -1;
  int32_t eos = -1;
  int32_t pad = -1;
  bool add_bos = false;
  std::string model = "gpt2";  // tokenizer.ggml.model
  std::string pre = "qwen2";   // tokenizer.ggml.pre: "qwen2" or "qwen35"
};

class Tokenizer {
 public:
  // Validates and indexes `vocab`. InvalidArgument (naming the field and the
  // value) for: a model other than "gpt2", a pre-tokenizer other than
  // "qwen2"/"qwen35", an empty vocabulary, token_types of another length than tokens
  // or with a value outside 0..6, a merge without a separating space, a
  // bos/eos/pad id outside [-1, n_vocab).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(VocabData vocab);

  // Token ids of `text` (no BOS/EOS added; callers add them). Any bytes are
  // accepted; ill-formed UTF-8 is tokenized as U+FFFD.
  std::vector<int32_t> Encode(std::string_view text, bool parse_special) const;

  // Concatenated pieces of `ids`. CONTROL and UNKNOWN tokens render as their
  // text when `render_special`, else as nothing. Ids outside [0, n_vocab())
  // render as nothing. The result may split a UTF-8 character at either
  // end; use TokenStreamDecoder for text shown to people.
  std::string Decode(absl::Span<const int32_t> ids,
                     bool render_special = true) const;

  // The bytes token `id` contributes to Decode() (empty for invalid ids).
  const std::string& TokenPiece(int32_t id, bool render_special = true) const;
  // The id whose stored text is exactly `text` (byte-level spelled for
  // normal tokens, verbatim for special ones), or -1.
  int32_t TokenId(std::string_view text) const;
  // The stored vocabulary text (byte-level spelled); empty for invalid ids.
  const std::string& TokenText(int32_t id) const;
  TokenType GetTokenType(int32_t id) const;
  // CONTROL or UNKNOWN: such tokens never come out of Encode(text, false).
  bool IsControl(int32_t id) const;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t pad() const { return pad_; }
  bool add_bos() const { return add_bos_; }

 private:
  Tokenizer() = default;
  absl::Status IndexMerges(const std::vector<std::string>& merges);
  void IndexTokens();
  void EncodeWord(std::string_view word, std::vector<int32_t>& out) const;
  void EncodeText(std::string_view text, std::vector<int32_t>& out) const;
  // Rank of merging `left` and `right`, or -1; `key` is scratch space.
  int32_t MergeRank(std::string_view left, std::string_view right,
                    std::string& key) const;

  std::vector<std::string> tokens_;
  tokenizer_internal::PreTokenizer pre_;
  std::vector<TokenType> types_;
  std::vector<std::string> pieces_;  // decoded bytes, specials as text
  absl::flat_hash_map<std::string, int32_t> ids_;
  // "left right" -> rank. Symbols being merged are byte-level spelled and
  // never contain a space, so the joined key is unambiguous.
  absl::flat_hash_map<std::string, int32_t> ranks_;
  // Ids of CONTROL/UNKNOWN/USER_DEFINED tokens, longest text first.
  std::vector<int32_t> specials_;
  int32_t bos_ = -1, eos_ = -1, pad_ = -1;
  bool add_bos_ = false;
};

// Turns generated token ids into text as they arrive: each Push() returns
// only complete, valid UTF-8 (a character split over several tokens comes
// out with its last byte), Flush() ends the stream. The concatenation of all
// outputs is SanitizeUtf8(tokenizer.Decode(ids, render_special)).
//
// The Tokenizer must outlive the decoder. Thread-safety: none.
class TokenStreamDecoder {
 public:
  TokenStreamDecoder(const Tokenizer& tokenizer, bool render_special)
      : tokenizer_(tokenizer), render_special_(render_special) {}

  std::string Push(int32_t id);
  // Returns the held-back bytes (an incomplete character, as U+FFFD) and
  // resets the decoder for a new stream.
  std::string Flush() { return utf8_.Flush(); }

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  Utf8StreamDecoder utf8_;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_TOKENIZER_H_
