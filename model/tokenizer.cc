#include "model/tokenizer.h"

#include <algorithm>
#include <array>
#include <queue>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace sluice {
namespace {

using tokenizer_internal::PreTokenizer;

// GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves,
// the other 68 bytes are moved to U+0100.. in byte order, so every byte has
// a visible, non-space spelling.
bool IsPrintableLatin1(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
         (b >= 0xAE && b <= 0xFF);
}

struct ByteAlphabet {
  std::array<std::string, 256> spelling;  // byte -> UTF-8 of its code point
  std::array<int16_t, 0x200> byte_of;     // code point -> byte, or -1

  ByteAlphabet() {
    byte_of.fill(-1);
    int next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = IsPrintableLatin1(b) ? b : next++;
      AppendUtf8(cp, spelling[b]);
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& Alphabet() {
  static const ByteAlphabet* alphabet = new ByteAlphabet();
  return *alphabet;
}

// Bytes a byte-level spelled token stands for. A code point outside the
// alphabet cannot come from a converted vocabulary; it is shown marked, as
// llama.cpp does, rather than dropped.
std::string UnspellBytes(std::string_view text) {
  const ByteAlphabet& alphabet = Alphabet();
  std::string out;
  for (const uint32_t cp : tokenizer_internal::DecodeLenient(text)) {
    if (cp < alphabet.byte_of.size() && alphabet.byte_of[cp] >= 0) {
      out.push_back(static_cast<char>(alphabet.byte_of[cp]));
      continue;
    }
    std::string utf8;
    AppendUtf8(cp, utf8);
    absl::StrAppend(&out, "[UNK_BYTE_0x");
    for (const char c : utf8) {
      absl::StrAppendFormat(&out, "%02x", static_cast<uint8_t>(c));
    }
    out.append(text);
    out.push_back(']');
  }
  return out;
}

bool IsSpecialType(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUnknown;
}

absl::Status CheckOptionalId(const char* field, int32_t id, size_t n_vocab) {
  if (id < -1 || id >= static_cast<int64_t>(n_vocab)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer: %s = %d is outside the vocabulary [0, %d)", field, id,
        n_vocab));
  }
  return absl::OkStatus();
}

// One symbol of a word during merging: a byte range of the spelled word,
// linked to its neighbours. A symbol merged into its left neighbour has
// length 0.
struct Symbol {
  size_t start;
  size_t length;
  int prev;
  int next;
};

struct Bigram {
  int32_t rank;
  int left;
  int right;
  size_t length;  // left + right length when queued; detects stale entries
};

// Lowest rank first, leftmost first among equal ranks.
struct LaterBigram {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

size_t Utf8Length(char lead) {
  const uint8_t b = static_cast<uint8_t>(lead);
  if (b < 0xC0) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

absl::StatusOr<PreTokenizer> ParsePreTokenizer(const std::string& pre) {
  if (pre == "qwen2") return PreTokenizer::kQwen2;
  if (pre == "qwen35") return PreTokenizer::kQwen35;
  return absl::InvalidArgumentError(absl::StrFormat(
      "unsupported pre-tokenizer \"%s\" (tokenizer.ggml.pre); supported: "
      "\"qwen2\", \"qwen35\"",
      pre));
}

absl::Status CheckShape(const VocabData& vocab) {
  if (vocab.model != "gpt2") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unsupported tokenizer model \"%s\" (tokenizer.ggml.model); only "
        "\"gpt2\" (byte-level BPE) is supported",
        vocab.model));
  }
  const size_t n = vocab.tokens.size();
  if (n == 0 || n > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer.ggml.tokens has %d entries; need 1 to 2^31-1", n));
  }
  if (!vocab.token_types.empty() && vocab.token_types.size() != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer.ggml.token_type has %d entries but tokenizer.ggml.tokens "
        "has %d",
        vocab.token_types.size(), n));
  }
  RETURN_IF_ERROR(CheckOptionalId("bos", vocab.bos, n));
  RETURN_IF_ERROR(CheckOptionalId("eos", vocab.eos, n));
  return CheckOptionalId("pad", vocab.pad, n);
}

absl::StatusOr<std::vector<TokenType>> ParseTypes(
    const std::vector<int32_t>& raw, size_t n) {
  std::vector<TokenType> types(n, TokenType::kNormal);
  for (size_t id = 0; id < raw.size(); ++id) {
    if (raw[id] < 0 || raw[id] > static_cast<int32_t>(TokenType::kByte)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tokenizer.ggml.token_type[%d] = %d is not a token type (0..6)", id,
          raw[id]));
    }
    types[id] = static_cast<TokenType>(raw[id]);
  }
  return types;
}

}  // namespace

absl::Status Tokenizer::IndexMerges(const std::vector<std::string>& merges) {
  ranks_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& merge = merges[rank];
    // The separator is the first space after the first byte, so a left
    // side that is itself a space still parses.
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tokenizer.ggml.merges[%d] = \"%s\" has no space between its two "
          "parts",
          rank, absl::CEscape(merge)));
    }
    // A repeated pair keeps its first (best) rank.
    ranks_.try_emplace(merge, static_cast<int32_t>(rank));
  }
  return absl::OkStatus();
}

void Tokenizer::IndexTokens() {
  const size_t n = tokens_.size();
  ids_.reserve(n);
  pieces_.resize(n);
  for (size_t id = 0; id < n; ++id) {
    // A repeated text maps to its last id, as in llama.cpp.
    ids_[tokens_[id]] = static_cast<int32_t>(id);
    const TokenType type = types_[id];
    if (IsSpecialType(type) || type == TokenType::kUserDefined) {
      pieces_[id] = tokens_[id];
      if (!tokens_[id].empty()) specials_.push_back(static_cast<int32_t>(id));
    } else if (type == TokenType::kNormal || type == TokenType::kByte) {
      pieces_[id] = UnspellBytes(tokens_[id]);
    }
  }
  std::stable_sort(specials_.begin(), specials_.end(),
                   [this](int32_t a, int32_t b) {
                     return tokens_[a].size() > tokens_[b].size();
                   });
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(VocabData vocab) {
  RETURN_IF_ERROR(CheckShape(vocab));
  auto t = absl::WrapUnique(new Tokenizer());
  ASSIGN_OR_RETURN(t->pre_, ParsePreTokenizer(vocab.pre));
  ASSIGN_OR_RETURN(t->types_,
                   ParseTypes(vocab.token_types, vocab.tokens.size()));
  RETURN_IF_ERROR(t->IndexMerges(vocab.merges));
  t->tokens_ = std::move(vocab.tokens);
  t->IndexTokens();
  t->bos_ = vocab.bos;
  t->eos_ = vocab.eos;
  t->pad_ = vocab.pad;
  t->add_bos_ = vocab.add_bos;
  return t;
}

int32_t Tokenizer::TokenId(std::string_view text) const {
  // Debian's Abseil has its own string_view type.
  const auto it = ids_.find(absl::string_view(text.data(), text.size()));
  return it == ids_.end() ? -1 : it->second;
}

int32_t Tokenizer::MergeRank(std::string_view left, std::string_view right,
                             std::string& key) const {
  key.assign(left);
  key.push_back(' ');
  key.append(right);
  const auto it = ranks_.find(absl::string_view(key));
  return it == ranks_.end() ? -1 : it->second;
}

void Tokenizer::EncodeWord(std::string_view word,
                           std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < word.size();) {
    const size_t length = std::min(Utf8Length(word[pos]), word.size() - pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, length, index - 1,
                       pos + length == word.size() ? -1 : index + 1});
    pos += length;
  }
  const auto text = [&](int i) {
    return word.substr(symbols[i].start, symbols[i].length);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, LaterBigram> queue;
  std::string key;
  const auto enqueue = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t rank = MergeRank(text(left), text(right), key);
    if (rank < 0) return;
    queue.push({rank, left, right,
                symbols[left].length + symbols[right].length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) enqueue(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Both sides unchanged since queued <=> neither is empty and the lengths
    // still add up (a side only ever grows, or empties into its left).
    if (left.length == 0 || right.length == 0 ||
        left.length + right.length != bigram.length) {
      continue;
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    enqueue(left.prev, bigram.left);
    enqueue(bigram.left, left.next);
  }

  for (int i = 0; i >= 0 && i < static_cast<int>(symbols.size());
       i = symbols[i].next) {
    const std::string_view piece = text(i);
    if (const int32_t id = TokenId(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not in the vocabulary: one token per byte, where the raw byte is a
    // token (the reference tokenizer's fallback).
    for (const char c : piece) {
      if (const int32_t id = TokenId(std::string_view(&c, 1)); id >= 0) {
        out.push_back(id);
      }
    }
  }
}

void Tokenizer::EncodeText(std::string_view text,
                           std::vector<int32_t>& out) const {
  const ByteAlphabet& alphabet = Alphabet();
  std::string spelled;
  for (const std::string& word : tokenizer_internal::SplitWords(text, pre_)) {
    spelled.clear();
    for (const char c : word) {
      spelled.append(alphabet.spelling[static_cast<uint8_t>(c)]);
    }
    EncodeWord(spelled, out);
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text,
                                       bool parse_special) const {
  // Fragments of `text`: raw byte ranges still to tokenize, or a special
  // token already found.
  struct Fragment {
    int32_t token;  // -1 for raw text
    size_t begin;
    size_t end;
  };
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (const int32_t special : specials_) {
    if (!parse_special && IsSpecialType(types_[special])) continue;
    const std::string& needle = tokens_[special];
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view raw = text.substr(0, f.end);
      size_t begin = f.begin;
      for (size_t match; (match = raw.find(needle, begin)) != raw.npos;) {
        if (match > begin) next.push_back({-1, begin, match});
        next.push_back({special, match, match + needle.size()});
        begin = match + needle.size();
      }
      if (begin < f.end) next.push_back({-1, begin, f.end});
    }
    fragments.swap(next);
  }
  std::vector<int32_t> ids;
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      ids.push_back(f.token);
    } else {
      EncodeText(text.substr(f.begin, f.end - f.begin), ids);
    }
  }
  return ids;
}

const std::string& Tokenizer::TokenPiece(int32_t id,
                                         bool render_special) const {
  static const std::string* const kEmpty = new std::string();
  if (id < 0 || id >= n_vocab()) return *kEmpty;
  if (!render_special && IsSpecialType(types_[id])) return *kEmpty;
  return pieces_[id];
}

std::string Tokenizer::Decode(absl::Span<const int32_t> ids,
                              bool render_special) const {
  std::string out;
  for (const int32_t id : ids) out.append(TokenPiece(id, render_special));
  return out;
}

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string* const kEmpty = new std::string();
  return (id >= 0 && id < n_vocab()) ? tokens_[id] : *kEmpty;
}

TokenType Tokenizer::GetTokenType(int32_t id) const {
  return (id >= 0 && id < n_vocab()) ? types_[id] : TokenType::kUndefined;
}

bool Tokenizer::IsControl(int32_t id) const {
  return IsSpecialType(GetTokenType(id));
}

std::string TokenStreamDecoder::Push(int32_t id) {
  return utf8_.Push(tokenizer_.TokenPiece(id, render_special_));
}

}  // namespace sluice
