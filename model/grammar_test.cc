#include "model/grammar.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/grammar_json.h"
#include "nlohmann/json.hpp"

namespace sluice {
namespace {

std::shared_ptr<const Grammar> MustParse(const std::string& text) {
  auto g = Grammar::Parse(text);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << text;
  return g.ok() ? *g : nullptr;
}

std::string ParseError(const std::string& text) {
  auto g = Grammar::Parse(text);
  EXPECT_FALSE(g.ok()) << text;
  return g.ok() ? "" : std::string(g.status().message());
}

TEST(GrammarParseTest, LiteralsClassesAndRepetition) {
  auto g = MustParse(R"(root ::= "a" [0-9]+ ("x" | "yz")? [^a-c]{2,3}  # comment
  )");
  EXPECT_TRUE(g->Matches("a1dd"));
  EXPECT_TRUE(g->Matches("a123xdd"));
  EXPECT_TRUE(g->Matches("a1yzddd"));
  EXPECT_FALSE(g->Matches("a1yzdddd"));
  EXPECT_FALSE(g->Matches("a1yzad"));
  EXPECT_FALSE(g->Matches("a"));
  EXPECT_TRUE(g->MatchesPrefix("a12"));
  EXPECT_FALSE(g->MatchesPrefix("b"));
}

TEST(GrammarParseTest, RulesSpanLinesUntilTheNextDefinition) {
  auto g = MustParse("root ::= item\n  | item \",\" root\nitem ::=\n  \"x\"\n");
  EXPECT_TRUE(g->Matches("x,x,x"));
  EXPECT_FALSE(g->Matches("x,"));
}

TEST(GrammarParseTest, Utf8ClassesMatchWholeCharacters) {
  auto g = MustParse(R"(root ::= [^a]* "é" [α-ω] .)");
  EXPECT_TRUE(g->Matches("xyéβ€"));
  EXPECT_TRUE(g->Matches("日本éλ😀"));
  EXPECT_FALSE(g->Matches("aéβx"));
  // A lone continuation byte or a truncated character is not a character.
  EXPECT_FALSE(g->MatchesPrefix("\x80"));
  EXPECT_FALSE(g->Matches("é\xce"));
  EXPECT_TRUE(g->MatchesPrefix("é\xce"));
  // Escapes.
  auto e = MustParse(R"(root ::= "\x41\u00e9\n\"" [\x00-\x1f\]])");
  EXPECT_TRUE(e->Matches("A\xc3\xa9\n\"]"));
  EXPECT_TRUE(e->Matches("A\xc3\xa9\n\"\x01"));
}

TEST(GrammarParseTest, ErrorsNameTheProblem) {
  EXPECT_NE(ParseError("item ::= \"x\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(ParseError("root ::= foo").find("rule 'foo' is used but not defined"),
            std::string::npos);
  EXPECT_NE(ParseError("root ::= root \"x\" | \"y\"").find("'root' is left-recursive"),
            std::string::npos);
  EXPECT_NE(ParseError("root ::= a\na ::= b? a \"x\" | \"z\"\nb ::= \"y\"").find("left-recursive"),
            std::string::npos);
  EXPECT_NE(ParseError("root ::= \"x\" root").find("derives no finite text"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"abc").find("line 1 column 10: unterminated string"),
            std::string::npos);
  EXPECT_NE(ParseError("root ::= [b-a]").find("backwards"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\"{5000}").find("count up to 4096"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(ParseError("root ::= (\"a\"").find("unbalanced '('"), std::string::npos);
}

TEST(JsonGrammarTest, AcceptsJsonAndRefusesTheRest) {
  auto g = MustParse(JsonGrammar(false));
  for (const char* ok : {"{}", "[]", "0", "-1.5e10", "\"a\\n\\u00e9\"", "true", "null",
                         "{\"a\": [1, 2, {\"b\": null}], \"c\": \"d\"}", "[\n  1,\n  2\n]",
                         "\"日本\""}) {
    EXPECT_TRUE(g->Matches(ok)) << ok;
    EXPECT_TRUE(nlohmann::json::accept(ok)) << ok;
  }
  for (const char* bad : {"{", "[1,]", "01", "\"\x01\"", "{a: 1}", "tru", "1.", "\"\\x\"",
                          " {}", "{} "}) {
    EXPECT_FALSE(g->Matches(bad)) << bad;
  }
  auto object = MustParse(JsonGrammar(true));
  EXPECT_TRUE(object->Matches("{\"a\": 1}"));
  EXPECT_FALSE(object->Matches("[1]"));
}

std::shared_ptr<const Grammar> Schema(const std::string& schema) {
  auto text = JsonSchemaToGrammar(schema);
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return nullptr;
  return MustParse(*text);
}

std::string SchemaError(const std::string& schema) {
  auto text = JsonSchemaToGrammar(schema);
  EXPECT_FALSE(text.ok()) << schema;
  return text.ok() ? "" : std::string(text.status().message());
}

TEST(JsonSchemaTest, ObjectsWithRequiredAndOptionalProperties) {
  auto g = Schema(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"type": "string"}}},
      "required": ["name"], "additionalProperties": false})");
  EXPECT_TRUE(g->Matches(R"({"name": "x"})"));
  EXPECT_TRUE(g->Matches(R"({"name": "x", "age": 3})"));
  EXPECT_TRUE(g->Matches(R"({"name":"x","tags":["a","b"]})"));
  EXPECT_TRUE(g->Matches(R"({"name": "x", "age": -3, "tags": []})"));
  EXPECT_FALSE(g->Matches(R"({})"));
  EXPECT_FALSE(g->Matches(R"({"age": 3})"));
  EXPECT_FALSE(g->Matches(R"({"name": "x", "age": 3.5})"));
  EXPECT_FALSE(g->Matches(R"({"name": "x",})"));
  EXPECT_FALSE(g->Matches(R"({"name": "x", "other": 1})"));
  // Properties come in the schema's order.
  EXPECT_FALSE(g->Matches(R"({"age": 3, "name": "x"})"));
}

TEST(JsonSchemaTest, ScalarsEnumsConstAnyOfAndRefs) {
  auto g = Schema(R"({"type": "object", "properties": {
      "kind": {"enum": ["a", "b c", 3, null]},
      "v": {"const": {"x": [1]}},
      "n": {"type": ["number", "null"]},
      "b": {"type": "boolean"},
      "u": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/point"}]},
      "s": {"type": "string", "minLength": 2, "maxLength": 3}},
      "required": ["kind", "v", "n", "b", "u", "s"],
      "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}},
                          "required": ["x"]}}})");
  EXPECT_TRUE(g->Matches(R"({"kind": "b c", "v": {"x":[1]}, "n": null, "b": true, "u": {"x": 1.5}, "s": "ab"})"));
  EXPECT_TRUE(g->Matches(R"({"kind": 3, "v": {"x":[1]}, "n": 2e5, "b": false, "u": 7, "s": "a\"b"})"));
  EXPECT_FALSE(g->Matches(R"({"kind": "c", "v": {"x":[1]}, "n": null, "b": true, "u": 7, "s": "ab"})"));
  EXPECT_FALSE(g->Matches(R"({"kind": 3, "v": {"x":[2]}, "n": null, "b": true, "u": 7, "s": "ab"})"));
  EXPECT_FALSE(g->Matches(R"({"kind": 3, "v": {"x":[1]}, "n": null, "b": true, "u": 7, "s": "abcd"})"));
  EXPECT_FALSE(g->Matches(R"({"kind": 3, "v": {"x":[1]}, "n": null, "b": true, "u": "7", "s": "ab"})"));
}

TEST(JsonSchemaTest, RecursionArraysBoundsAndFormats) {
  auto tree = Schema(R"({"type": "object", "properties": {"children": {"type": "array",
      "items": {"$ref": "#"}, "maxItems": 2}}, "required": ["children"]})");
  EXPECT_TRUE(tree->Matches(R"({"children": [{"children": []}, {"children": [{"children": []}]}]})"));
  EXPECT_FALSE(tree->Matches(R"({"children": [{"children": []}, {"children": []}, {"children": []}]})"));
  // zod's .int(): the safe-integer range, honoured with 15 digits.
  auto safe = Schema(R"({"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991})");
  EXPECT_TRUE(safe->Matches("-123456789012345"));
  EXPECT_FALSE(safe->Matches("1234567890123456"));
  auto arr = Schema(R"({"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2})");
  EXPECT_TRUE(arr->Matches("[1, 2]"));
  EXPECT_FALSE(arr->Matches("[1]"));
  EXPECT_FALSE(arr->Matches("[1, -2]"));
  auto dates = Schema(R"({"type": "array", "items": {"anyOf": [
      {"type": "string", "format": "date-time"}, {"type": "string", "format": "uuid"}]}})");
  EXPECT_TRUE(dates->Matches(R"(["2026-01-31T12:30:00Z", "123e4567-e89b-12d3-a456-426614174000"])"));
  EXPECT_FALSE(dates->Matches(R"(["2026-13-31T12:30:00Z"])"));
  auto map = Schema(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(map->Matches(R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(map->Matches(R"({"a": "x"})"));
  auto any = Schema("{}");
  EXPECT_TRUE(any->Matches("[1, {\"a\": null}]"));
}

TEST(JsonSchemaTest, UnsupportedKeywordsAreRefusedByName) {
  EXPECT_EQ(SchemaError(R"({"type": "string", "pattern": "^a"})"),
            "json_schema: keyword 'pattern' is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type": "object", "properties": {"a": {"type": "integer", "maximum": 3}}})"),
            "json_schema: keyword 'maximum' is supported on integers only at 999999999999999 or "
            "above (at #/properties/a)");
  EXPECT_NE(SchemaError(R"({"type": "integer", "minimum": 5})").find("keyword 'minimum'"),
            std::string::npos);
  EXPECT_NE(SchemaError(R"({"oneOf": [{"type": "string"}]})").find("keyword 'oneOf'"),
            std::string::npos);
  EXPECT_NE(SchemaError(R"({"type": "string", "format": "email"})").find("format 'email'"),
            std::string::npos);
  EXPECT_NE(SchemaError(R"({"$ref": "http://x/y"})").find("$ref 'http://x/y' is not supported"),
            std::string::npos);
  EXPECT_NE(SchemaError(R"({"$ref": "#/$defs/missing"})").find("does not resolve"),
            std::string::npos);
  EXPECT_NE(SchemaError(R"({"type": "strin"})").find("type 'strin'"), std::string::npos);
  EXPECT_NE(SchemaError("[1]").find("must be an object"), std::string::npos);
  EXPECT_NE(SchemaError("{").find("not JSON"), std::string::npos);
  EXPECT_NE(SchemaError(R"({"type": "number", "minimum": 0})").find("only with type \"integer\""),
            std::string::npos);
}

// ---- token masks ----

// A vocabulary with multi-byte tokens that cross grammar boundaries.
std::shared_ptr<const TokenVocab> TestVocab() {
  std::vector<std::string> pieces = {"", "{", "}", "\"", "\":", "\",", "\"}", "{\"", "a", "ab",
                                     "name", " ", "\n", "  ", ":", ",", "1", "12", "-", ".5", "e",
                                     "true", "tr", "ue", "null", "[", "]", "[\"", "\"]", "x\"",
                                     "\\", "\\n", "é", "\xc3", "\xa9", "日本", "},", "}]", "0"};
  for (int b = 32; b < 127; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  return TokenVocab::FromPieces(std::move(pieces), {0});
}

bool Allowed(const std::vector<uint64_t>& bits, int32_t id) { return (bits[id >> 6] >> (id & 63)) & 1; }

// The mask against a brute-force check of every token, along random walks.
void CheckMasks(const std::string& grammar_text, int walks, uint64_t seed) {
  auto g = MustParse(grammar_text);
  ASSERT_NE(g, nullptr);
  auto vocab = TestVocab();
  auto tg = TokenGrammar::Create(g, vocab);
  std::mt19937_64 rng(seed);
  int completed = 0;
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(tg);
    std::string text;
    std::vector<uint64_t> bits;
    for (int step = 0; step < 60; ++step) {
      m.FillMask(&bits);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
        const bool want = vocab->is_eog(id) ? g->Matches(text)
                                            : !vocab->piece(id).empty() &&
                                                  g->MatchesPrefix(text + vocab->piece(id));
        ASSERT_EQ(Allowed(bits, id), want)
            << "token " << id << " '" << vocab->piece(id) << "' after '" << text << "'";
        if (want) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty()) << text;
      // Lean towards ending so that walks finish.
      int32_t pick = allowed[rng() % allowed.size()];
      if (m.CanEnd() && rng() % 4 == 0) pick = 0;
      ASSERT_TRUE(m.Accept(pick));
      if (pick == 0) {
        EXPECT_TRUE(g->Matches(text)) << text;
        EXPECT_TRUE(m.Finished());
        ++completed;
        break;
      }
      text += vocab->piece(pick);
    }
  }
  EXPECT_GT(completed, 0);
}

TEST(GrammarMaskTest, MasksEqualBruteForceForJson) { CheckMasks(JsonGrammar(false), 40, 1); }

TEST(GrammarMaskTest, MasksEqualBruteForceForASchema) {
  auto text = JsonSchemaToGrammar(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 4}, "n": {"type": "integer"},
      "list": {"type": "array", "items": {"enum": ["ab", "a"]}}}, "required": ["name"]})");
  ASSERT_TRUE(text.ok());
  CheckMasks(*text, 40, 2);
}

TEST(GrammarMaskTest, MasksEqualBruteForceForAPlainGrammar) {
  CheckMasks(R"(root ::= ("tr" "ue" | "ab"+ | [0-9]{1,2} "." [5]) ("," root)?)", 40, 3);
}

TEST(GrammarMaskTest, AcceptRefusesWhatTheMaskRefuses) {
  auto tg = TokenGrammar::Create(MustParse(JsonGrammar(true)), TestVocab());
  GrammarMatcher m(tg);
  EXPECT_FALSE(m.Accept(8));  // "a"
  EXPECT_FALSE(m.Accept(0));  // the end, before any text
  EXPECT_TRUE(m.Accept(7));   // {"
  EXPECT_TRUE(m.Accept(9));   // ab
  EXPECT_TRUE(m.Accept(4));   // ":
  EXPECT_TRUE(m.Accept(16));  // 1
  EXPECT_FALSE(m.CanEnd());
  EXPECT_TRUE(m.Accept(2));   // }
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.Finished());
  std::vector<uint64_t> bits;
  m.FillMask(&bits);
  for (int32_t id = 1; id < tg->vocab().n_vocab(); ++id) EXPECT_FALSE(Allowed(bits, id)) << id;
  EXPECT_TRUE(Allowed(bits, 0));
  EXPECT_TRUE(m.Accept(0));
  EXPECT_FALSE(m.Accept(0));
}

TEST(GrammarMaskTest, CachesAreSharedAcrossSequences) {
  auto tg = TokenGrammar::Create(MustParse(JsonGrammar(false)), TestVocab());
  std::vector<uint64_t> bits;
  for (int i = 0; i < 3; ++i) {
    GrammarMatcher m(tg);
    ASSERT_TRUE(m.AcceptBytes("{\"abc"));
    m.FillMask(&bits);
  }
  const TokenGrammar::Stats s = tg->stats();
  EXPECT_GE(s.frames, 1u);
  GrammarMatcher m(tg);
  ASSERT_TRUE(m.AcceptBytes("{\"abc"));
  m.FillMask(&bits);
  EXPECT_EQ(tg->stats().frames, s.frames);
  EXPECT_EQ(tg->stats().resolved, s.resolved);
}

TEST(GrammarMaskTest, TrieHoldsEveryTokenOnce) {
  auto vocab = TestVocab();
  size_t with_bytes = 0;
  for (int32_t id = 0; id < vocab->n_vocab(); ++id) with_bytes += !vocab->piece(id).empty();
  EXPECT_GT(vocab->trie_nodes(), 1u);
  // Duplicated pieces (the printable ASCII run repeats some) are all kept.
  auto tg = TokenGrammar::Create(MustParse("root ::= [\\x00-\\xff]*"), vocab);
  (void)tg;
  auto any = MustParse(R"(root ::= ([\x00-\x7f] | [\x80-\U0010FFFF])*)");
  auto tga = TokenGrammar::Create(any, vocab);
  GrammarMatcher m(tga);
  std::vector<uint64_t> bits;
  m.FillMask(&bits);
  size_t allowed = 0;
  for (int32_t id = 0; id < vocab->n_vocab(); ++id) allowed += Allowed(bits, id);
  // Every token but the lone UTF-8 bytes (\xc3, \xa9: \xa9 cannot start a
  // character) and the end token's slot... \xc3 can start one.
  EXPECT_EQ(allowed, with_bytes - 1 + 1);  // minus \xa9, plus the end token
}

TEST(GrammarMaskTest, ASteadyStateReusesItsFrames) {
  auto text = JsonSchemaToGrammar(R"({"type": "object", "properties": {"name": {"type": "string"}},
                                      "required": ["name"]})");
  ASSERT_TRUE(text.ok());
  auto tg = TokenGrammar::Create(MustParse(*text), TestVocab());
  GrammarMatcher m(tg);
  ASSERT_TRUE(m.AcceptBytes("{\"name\": \"x"));
  std::vector<uint64_t> bits;
  m.FillMask(&bits);
  const TokenGrammar::Stats first = tg->stats();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(m.Accept(8));  // "a": the string goes on
    m.FillMask(&bits);
  }
  EXPECT_EQ(tg->stats().frames, first.frames);
  EXPECT_EQ(tg->stats().resolved, first.resolved);
}

}  // namespace
}  // namespace sluice
