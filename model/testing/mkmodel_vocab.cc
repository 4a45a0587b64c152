// The byte-level BPE vocabulary of mkmodel models.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/testing/mkmodel.h"

namespace sluice::mkmodel {

namespace {

// Training text for the merges: plain prose with the usual English pairs, so
// the merges look like those of a real tokenizer ("Ġt", "he", "Ġthe", ...).
constexpr char kCorpus[] =
    "the quick brown fox jumps over the lazy dog. the model reads the weights "
    "from the file and the tokens from the prompt. this is a test of the "
    "tokenizer: it splits the text into words and then into pieces that it "
    "has seen before. there are many ways to write a sentence, and the one "
    "that is written here is not the only one. when the server starts, it "
    "opens the files once and maps them into memory; the worker receives the "
    "descriptors and builds the model on the device. experts that are used "
    "often stay in the cache, and the others are read from the disk when they "
    "are needed. the answer is in the question, and the question is in the "
    "answer. hello world! hello there, how are you doing today? I am doing "
    "well, thank you for asking. in the beginning there was the word, and the "
    "word was with the writer of the text. numbers like 1, 2, 3 and 2026 are "
    "also text. we test the parser with files that are broken on purpose, "
    "because the files that come from the network cannot be trusted.";

std::string Utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

bool PrintsAsItself(uint32_t b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

using Word = std::vector<std::string>;

// Words with GPT-2's leading-space convention: " the" -> {"Ġ","t","h","e"}.
std::map<Word, int> CorpusWords() {
  std::map<Word, int> words;
  Word w;
  auto flush = [&] {
    if (!w.empty()) ++words[w];
    w.clear();
  };
  for (const char* p = kCorpus; *p != '\0'; ++p) {
    const uint8_t c = static_cast<uint8_t>(*p);
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9');
    if (c == ' ') {
      flush();
      w.push_back(ByteToUnicode(c));
    } else if (!alnum) {
      flush();
      w.push_back(ByteToUnicode(c));
      flush();
    } else {
      w.push_back(ByteToUnicode(c));
    }
  }
  flush();
  return words;
}

}  // namespace

std::string ByteToUnicode(uint8_t b) {
  if (PrintsAsItself(b)) return Utf8(b);
  uint32_t n = 0;
  for (uint32_t x = 0; x < b; ++x) {
    if (!PrintsAsItself(x)) ++n;
  }
  return Utf8(256 + n);
}

absl::StatusOr<Vocab> BuildVocab(uint32_t n_merges) {
  Vocab v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(ByteToUnicode(static_cast<uint8_t>(b)));
  std::set<std::string> known(v.tokens.begin(), v.tokens.end());
  std::map<Word, int> words = CorpusWords();
  while (v.merges.size() < n_merges) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [w, n] : words) {
      for (size_t i = 0; i + 1 < w.size(); ++i) pairs[{w[i], w[i + 1]}] += n;
    }
    // Most frequent pair; std::map order breaks ties. A pair whose result is
    // already a token (reached through other pieces) would duplicate it.
    const std::pair<std::string, std::string>* best = nullptr;
    int best_n = 0;
    for (const auto& [p, n] : pairs) {
      if (n > best_n && known.count(p.first + p.second) == 0) {
        best = &p;
        best_n = n;
      }
    }
    if (best == nullptr) break;
    const std::string a = best->first, b = best->second;
    v.merges.push_back(a + " " + b);
    v.tokens.push_back(a + b);
    known.insert(a + b);
    std::map<Word, int> merged;
    for (const auto& [w, n] : words) {
      Word out;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
          out.push_back(a + b);
          ++i;
        } else {
          out.push_back(w[i]);
        }
      }
      merged[out] += n;
    }
    words = std::move(merged);
  }
  // Past what the text supports (the bench shapes' 1300 tokens), extend
  // learned tokens by a common letter: still valid merges of existing
  // tokens, so the vocabulary stays a proper BPE.
  const size_t learned = v.tokens.size();
  for (size_t t = 256; t < learned && v.merges.size() < n_merges; ++t) {
    for (const char* c : {"e", "t", "a", "o", "i", "n", "s", "r", "h", "l", "d", "u"}) {
      if (v.merges.size() == n_merges) break;
      const std::string token = v.tokens[t] + c;
      if (known.count(token)) continue;
      v.merges.push_back(v.tokens[t] + " " + c);
      v.tokens.push_back(token);
      known.insert(token);
    }
  }
  if (v.merges.size() < n_merges) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mkmodel vocabulary: the training text supports only ", v.merges.size(),
        " merges, ", n_merges, " requested"));
  }
  v.token_types.assign(v.tokens.size(), 1);
  for (const char* control : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.push_back(control);
    v.token_types.push_back(3);
  }
  return v;
}

}  // namespace sluice::mkmodel
