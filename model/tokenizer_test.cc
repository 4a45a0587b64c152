#include "model/tokenizer.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "base/testing/goldens.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "model/tokenizer_gguf.h"
#include "model/tokenizer_unicode.h"
#include "nlohmann/json.hpp"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tokenizer_internal::PreTokenizer;
using tokenizer_internal::SplitWords;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<std::unique_ptr<GgufFile>> ParseFile(const std::string& path) {
  const std::string bytes = ReadFile(path);
  return GgufFile::Parse(path, reinterpret_cast<const uint8_t*>(bytes.data()),
                         bytes.size());
}

std::string Json(const auto& v) { return nlohmann::json(v).dump(); }

// ---- Goldens: llama.cpp's llama_tokenize / llama_detokenize ----

class GoldenTokenizerTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenTokenizerTest, ReproducesEveryCase) {
  SLUICE_REQUIRE_GOLDENS(dir);
  absl::StatusOr<std::unique_ptr<GgufFile>> file =
      ParseFile(dir + "/" + GetParam());
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = TokenizerFromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.n_vocab(), 1300);
  EXPECT_EQ(t.bos(), 1297);
  EXPECT_EQ(t.eos(), 1299);
  EXPECT_EQ(t.pad(), 1297);
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.TokenText(1298), "<|im_start|>");
  EXPECT_TRUE(t.IsControl(1298));
  EXPECT_FALSE(t.IsControl(97));
  EXPECT_EQ(t.TokenText(32), "\xC4\xA0");  // byte 0x20 spelled U+0120

  const nlohmann::json cases =
      nlohmann::json::parse(ReadFile(dir + "/tokenizer_cases.json"));
  ASSERT_GT(cases.size(), 100u);
  int id_mismatches = 0, text_mismatches = 0;
  for (const nlohmann::json& c : cases) {
    const std::string text = c["text"];
    const bool parse_special = c["parse_special"];
    const std::vector<int32_t> want = c["ids"];
    const std::vector<int32_t> got = t.Encode(text, parse_special);
    if (got != want) {
      ++id_mismatches;
      ADD_FAILURE() << "Encode(" << Json(text) << ", parse_special="
                    << parse_special << ") = " << Json(got) << ", want "
                    << Json(want);
    }
    const std::string decoded = t.Decode(want, /*render_special=*/true);
    if (decoded != c["detokenized"].get<std::string>()) {
      ++text_mismatches;
      ADD_FAILURE() << "Decode(" << Json(want) << ") = " << Json(decoded)
                    << ", want " << c["detokenized"].dump();
    }
  }
  std::printf("%s: %zu cases, %d id mismatches, %d text mismatches\n",
              GetParam(), cases.size(), id_mismatches, text_mismatches);
  EXPECT_EQ(id_mismatches, 0);
  EXPECT_EQ(text_mismatches, 0);
}

TEST_P(GoldenTokenizerTest, StreamingDecodeReleasesOnlyWholeCharacters) {
  SLUICE_REQUIRE_GOLDENS(dir);
  absl::StatusOr<std::unique_ptr<GgufFile>> file =
      ParseFile(dir + "/" + GetParam());
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = TokenizerFromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status();

  // U+1F642 is four byte tokens: nothing comes out until the last one.
  TokenStreamDecoder stream(**tok, /*render_special=*/true);
  EXPECT_EQ(stream.Push(240), "");
  EXPECT_EQ(stream.Push(159), "");
  EXPECT_EQ(stream.Push(153), "");
  EXPECT_EQ(stream.Push(130), "\xF0\x9F\x99\x82");
  EXPECT_EQ(stream.Push(1299), "<|im_end|>");
  EXPECT_EQ(stream.Flush(), "");

  const nlohmann::json cases =
      nlohmann::json::parse(ReadFile(dir + "/tokenizer_cases.json"));
  for (const nlohmann::json& c : cases) {
    const std::vector<int32_t> ids = c["ids"];
    std::string streamed;
    for (const int32_t id : ids) {
      const std::string piece = stream.Push(id);
      EXPECT_EQ(SanitizeUtf8(piece), piece) << "not valid UTF-8: " << Json(ids);
      streamed += piece;
    }
    streamed += stream.Flush();
    EXPECT_EQ(streamed, c["detokenized"].get<std::string>()) << Json(ids);
  }
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, GoldenTokenizerTest,
                         ::testing::Values("qwen3moe-micro-f32.gguf",
                                           "qwen35moe-micro-f32.gguf"));

// ---- A hand-made vocabulary ----

// GPT-2's spelling of a byte string (printable Latin-1 kept, the rest moved
// to U+0100..), written independently of the tokenizer's table.
std::string Spell(std::string_view bytes) {
  std::string out;
  for (const char ch : bytes) {
    const int b = static_cast<uint8_t>(ch);
    int cp = b, shifted = 0;
    for (int x = 0; x < 256; ++x) {
      const bool printable = (x >= 0x21 && x <= 0x7E) ||
                             (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
      if (x == b) {
        if (!printable) cp = 0x100 + shifted;
        break;
      }
      if (!printable) ++shifted;
    }
    AppendUtf8(cp, out);
  }
  return out;
}

// Ids 0..255: the bytes; then merges "a b" -> "ab" etc.; then specials.
VocabData SmallVocab() {
  VocabData v;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(Spell(std::string(1, static_cast<char>(b))));
  }
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"l", "o"}, {"h", "e"}, {"lo", "w"}, {"he", "l"}, {Spell(" "), "low"}};
  for (const auto& [l, r] : merges) {
    v.merges.push_back(l + " " + r);
    v.tokens.push_back(l + r);  // ids 256..260
  }
  v.tokens.push_back("<ctl>");    // 261 CONTROL
  v.tokens.push_back("<user>");   // 262 USER_DEFINED
  v.tokens.push_back("<ctl>x");   // 263 CONTROL, longer: wins over <ctl>
  v.token_types.assign(v.tokens.size(), 1);
  v.token_types[261] = 3;
  v.token_types[262] = 4;
  v.token_types[263] = 3;
  v.bos = 261;
  v.eos = 261;
  return v;
}

std::unique_ptr<Tokenizer> SmallTokenizer() {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t =
      Tokenizer::Create(SmallVocab());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(TokenizerTest, MergesByRankNotByPosition) {
  const auto t = SmallTokenizer();
  ASSERT_NE(t, nullptr);
  // "hello": (l o) has the lowest rank and merges first although (h e) is
  // further left; then (h e), then (he l): [hel, lo].
  EXPECT_THAT(t->Encode("hello", false), ElementsAre(259, 256));
  // " low": " " and "low" merge last (rank 4).
  EXPECT_THAT(t->Encode(" low", false), ElementsAre(260));
  EXPECT_THAT(t->Encode("lowlow", false), ElementsAre(258, 258));
}

TEST(TokenizerTest, SpecialTokensOnlyWhenAsked) {
  const auto t = SmallTokenizer();
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("a<ctl>b", true), ElementsAre('a', 261, 'b'));
  EXPECT_THAT(t->Encode("<ctl>x<ctl>", true), ElementsAre(263, 261));
  EXPECT_THAT(t->Encode("<ctl>", false), ElementsAre('<', 'c', 't', 'l', '>'));
  // User-defined tokens are never split, parse_special or not.
  EXPECT_THAT(t->Encode("<user>", false), ElementsAre(262));
  EXPECT_THAT(t->Encode("<user>", true), ElementsAre(262));
}

TEST(TokenizerTest, DecodeRendersControlTokensOnlyWhenAsked) {
  const auto t = SmallTokenizer();
  ASSERT_NE(t, nullptr);
  const std::vector<int32_t> ids = {261, 259, 256, 262, 10, 9999, -1};
  EXPECT_EQ(t->Decode(ids, true), "<ctl>hello<user>\n");
  EXPECT_EQ(t->Decode(ids, false), "hello<user>\n");
  EXPECT_EQ(t->TokenPiece(32), " ");
  EXPECT_EQ(t->TokenText(32), "\xC4\xA0");
  EXPECT_EQ(t->GetTokenType(262), TokenType::kUserDefined);
  EXPECT_EQ(t->GetTokenType(9999), TokenType::kUndefined);
  EXPECT_TRUE(t->IsControl(261));
  EXPECT_FALSE(t->IsControl(262));
}

TEST(TokenizerTest, IllFormedUtf8IsTokenizedAsReplacementCharacter) {
  const auto t = SmallTokenizer();
  ASSERT_NE(t, nullptr);
  // 0xFF alone becomes U+FFFD = EF BF BD, three byte tokens.
  EXPECT_THAT(t->Encode("a\xFF", false), ElementsAre('a', 0xEF, 0xBF, 0xBD));
}

TEST(TokenizerTest, MissingSymbolFallsBackToRawByteTokens) {
  VocabData v = SmallVocab();
  // The merge (l o) stays but its token is gone: "lo" falls back to the
  // tokens of its bytes. Byte 0xA9's token is gone too: its spelling U+00A9
  // (C2 A9) has no byte tokens either, so it is dropped, as in llama.cpp.
  v.tokens[256] = "unused-lo";
  v.tokens[0xA9] = "unused-a9";
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(v);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT((*t)->Encode("lo", false), ElementsAre('l', 'o'));
  EXPECT_THAT((*t)->Encode("\xC3\xA9", false), ElementsAre(0xC3));
}

TEST(TokenizerTest, CreateRejectsBadVocabularies) {
  const auto expect_error = [](VocabData v, const std::string& message) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(v);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(message));
  };
  VocabData v = SmallVocab();
  v.model = "llama";
  expect_error(v, "unsupported tokenizer model \"llama\" (tokenizer.ggml.model)");
  v = SmallVocab();
  v.pre = "gpt-4o";
  expect_error(v, "unsupported pre-tokenizer \"gpt-4o\" (tokenizer.ggml.pre)");
  v = SmallVocab();
  v.token_types.pop_back();
  expect_error(v, "tokenizer.ggml.token_type has 263 entries but "
                  "tokenizer.ggml.tokens has 264");
  v = SmallVocab();
  v.token_types[5] = 7;
  expect_error(v, "tokenizer.ggml.token_type[5] = 7 is not a token type");
  v = SmallVocab();
  v.merges.push_back("nospace");
  expect_error(v, "tokenizer.ggml.merges[5] = \"nospace\" has no space");
  v = SmallVocab();
  v.eos = 264;
  expect_error(v, "eos = 264 is outside the vocabulary [0, 264)");
  v = SmallVocab();
  v.tokens.clear();
  v.token_types.clear();
  expect_error(v, "tokenizer.ggml.tokens has 0 entries");
}

// ---- Pre-tokenizer ----

TEST(SplitWordsTest, Qwen2Alternatives) {
  EXPECT_THAT(SplitWords("Hello   world  ", PreTokenizer::kQwen2),
              ElementsAre("Hello", "  ", " world", "  "));
  EXPECT_THAT(SplitWords("it's DON'T", PreTokenizer::kQwen2),
              ElementsAre("it", "'s", " DON", "'T"));
  EXPECT_THAT(SplitWords("x=123;\n\n  y", PreTokenizer::kQwen2),
              ElementsAre("x", "=", "1", "2", "3", ";\n\n", " ", " y"));
  EXPECT_THAT(SplitWords(" \t\n \nz", PreTokenizer::kQwen2),
              ElementsAre(" \t\n \n", "z"));
  // U+3000 (ideographic space) is white space; "(a" takes the '(' prefix.
  EXPECT_THAT(SplitWords("\xE3\x80\x80(a", PreTokenizer::kQwen2),
              ElementsAre("\xE3\x80\x80", "(a"));
}

TEST(SplitWordsTest, Qwen35KeepsCombiningMarksInWords) {
  const std::string e_acute = "e\xCC\x81t\xC3\xA9";  // e + U+0301, t, U+00E9
  EXPECT_THAT(SplitWords(e_acute, PreTokenizer::kQwen2),
              ElementsAre("e", "\xCC\x81t\xC3\xA9"));
  EXPECT_THAT(SplitWords(e_acute, PreTokenizer::kQwen35),
              ElementsAre(e_acute));
}

TEST(SplitWordsTest, IllFormedBytesBecomeReplacementCharacters) {
  EXPECT_THAT(SplitWords("a\xFF" "b", PreTokenizer::kQwen2),
              ElementsAre("a", "\xEF\xBF\xBD" "b"));
}

// ---- GGUF metadata ----

class VocabFromGgufTest : public ::testing::Test {
 protected:
  // Writes a tensor-less GGUF with the tokenizer keys of SmallVocab, with
  // `model` as tokenizer.ggml.model, minus `skip`, and parses it.
  std::unique_ptr<GgufFile> Write(const std::string& model,
                                  const std::string& skip = "",
                                  uint32_t eos = 263) {
    const std::string path = ::testing::TempDir() + "/vocab_" + model +
                             skip + std::to_string(eos) + ".gguf";
    const VocabData v = SmallVocab();
    auto writer = GgufWriter::Create(path);
    EXPECT_TRUE(writer.ok()) << writer.status();
    const auto add = [&](const std::string& key, GgufValue value) {
      if (key == skip) return;
      EXPECT_TRUE((*writer)->Add(key, std::move(value)).ok());
    };
    add("tokenizer.ggml.model", GgufValue::String(model));
    add("tokenizer.ggml.pre", GgufValue::String("qwen2"));
    add("tokenizer.ggml.tokens", GgufValue::StringArray(v.tokens));
    add("tokenizer.ggml.token_type", GgufValue::Array(v.token_types));
    add("tokenizer.ggml.merges", GgufValue::StringArray(v.merges));
    add("tokenizer.ggml.bos_token_id", GgufValue::Scalar<uint32_t>(261));
    add("tokenizer.ggml.eos_token_id", GgufValue::Scalar<uint32_t>(eos));
    add("tokenizer.ggml.add_bos_token", GgufValue::Scalar(true));
    EXPECT_TRUE((*writer)->Finish().ok());
    auto file = ParseFile(path);
    EXPECT_TRUE(file.ok()) << file.status();
    return file.ok() ? std::move(*file) : nullptr;
  }
};

TEST_F(VocabFromGgufTest, ReadsEveryKey) {
  const auto file = Write("gpt2");
  ASSERT_NE(file, nullptr);
  absl::StatusOr<VocabData> v = VocabFromGguf(*file);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->tokens, SmallVocab().tokens);
  EXPECT_EQ(v->token_types, SmallVocab().token_types);
  EXPECT_EQ(v->merges, SmallVocab().merges);
  EXPECT_EQ(v->bos, 261);
  EXPECT_EQ(v->eos, 263);
  EXPECT_EQ(v->pad, -1);
  EXPECT_TRUE(v->add_bos);
  EXPECT_EQ(v->pre, "qwen2");
}

TEST_F(VocabFromGgufTest, RejectsOtherModelsNamingKeyAndValue) {
  const auto file = Write("llama");
  ASSERT_NE(file, nullptr);
  absl::StatusOr<VocabData> v = VocabFromGguf(*file);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("vocab_llama263.gguf: unsupported tokenizer model "
                        "\"llama\" (tokenizer.ggml.model)"));
}

TEST_F(VocabFromGgufTest, MissingPreTokenizerIsRejected) {
  const auto file = Write("gpt2", "tokenizer.ggml.pre");
  ASSERT_NE(file, nullptr);
  absl::StatusOr<VocabData> v = VocabFromGguf(*file);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("unsupported pre-tokenizer \"default\""));
}

TEST_F(VocabFromGgufTest, MissingTokensIsNotFound) {
  const auto file = Write("gpt2", "tokenizer.ggml.tokens");
  ASSERT_NE(file, nullptr);
  absl::StatusOr<VocabData> v = VocabFromGguf(*file);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("tokenizer.ggml.tokens"));
}

TEST_F(VocabFromGgufTest, TokenizerFromGgufBuildsAWorkingTokenizer) {
  const auto file = Write("gpt2");
  ASSERT_NE(file, nullptr);
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = TokenizerFromGguf(*file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT((*t)->Encode(" low", false), ElementsAre(260));
  EXPECT_EQ((*t)->eos(), 263);
}

TEST_F(VocabFromGgufTest, TokenizerFromGgufErrorsNameTheFile) {
  const auto file = Write("gpt2", "", 999);
  ASSERT_NE(file, nullptr);
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = TokenizerFromGguf(*file);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("vocab_gpt2999.gguf: tokenizer: eos = 999 is outside "
                        "the vocabulary [0, 264)"));
}

}  // namespace
}  // namespace sluice
