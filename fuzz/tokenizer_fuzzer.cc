// libFuzzer target for the tokenizer (model/tokenizer.h), built outside
// Bazel by fuzz/run.sh SECONDS tokenizer; tokenizer_fuzzer_test replays fixed inputs.
//
// A small byte-level BPE vocabulary (all 256 bytes, a few merges, control and
// user-defined tokens) is built once for each pre-tokenizer. The first input
// byte picks the pre-tokenizer and parse_special; the rest is the text.
// Properties: Encode never crashes and returns ids inside the vocabulary, and
// for valid UTF-8 without special parsing, decoding the ids gives the text
// back byte for byte.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer.h"
#include "model/utf8.h"

namespace {

// GPT-2's byte-level spelling: printable Latin-1 bytes stand for themselves,
// the others map in order to U+0100 and up.
std::string ByteLevel(unsigned char b) {
  auto printable = [](int x) {
    return (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
  };
  uint32_t cp = b;
  if (!printable(b)) {
    int rank = 0;
    for (int x = 0; x < b; ++x) rank += printable(x) ? 0 : 1;
    cp = 0x100 + rank;
  }
  std::string out;
  sluice::AppendUtf8(cp, out);
  return out;
}

std::unique_ptr<sluice::Tokenizer> Build(const std::string& pre) {
  sluice::VocabData v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(ByteLevel(static_cast<unsigned char>(b)));
  const std::string space = ByteLevel(' ');
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"t", "h"}, {"th", "e"}, {space, "the"}, {"i", "n"}, {"in", "g"}, {space, "a"},
      {"e", "r"}, {ByteLevel('\n'), ByteLevel('\n')}};
  for (const auto& [l, r] : merges) {
    v.merges.push_back(l + " " + r);
    v.tokens.push_back(l + r);
  }
  v.tokens.push_back("<|im_start|>");
  v.tokens.push_back("<|im_end|>");
  v.tokens.push_back("<tool>");
  v.token_types.assign(v.tokens.size(), 1);
  v.token_types[v.tokens.size() - 3] = 3;
  v.token_types[v.tokens.size() - 2] = 3;
  v.token_types[v.tokens.size() - 1] = 4;
  v.eos = static_cast<int32_t>(v.tokens.size() - 2);
  v.pre = pre;
  auto t = sluice::Tokenizer::Create(std::move(v));
  if (!t.ok()) abort();
  return *std::move(t);
}

bool ValidUtf8(std::string_view s) { return sluice::SanitizeUtf8(s) == s; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const sluice::Tokenizer* const qwen2 = Build("qwen2").release();
  static const sluice::Tokenizer* const qwen35 = Build("qwen35").release();
  if (size == 0) return 0;
  const sluice::Tokenizer& t = (data[0] & 1) ? *qwen35 : *qwen2;
  const bool parse_special = (data[0] & 2) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<int32_t> ids = t.Encode(text, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= t.n_vocab()) abort();
  }
  const std::string decoded = t.Decode(ids, /*render_special=*/true);
  if (!parse_special && ValidUtf8(text) && decoded != text) abort();
  return 0;
}
