// The grammar format's parser (model/grammar.h): text to rules, then the
// checks (defined, productive, not left-recursive) and the follow sets the
// mask precomputation needs.
#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "model/grammar.h"

namespace sluice {

using grammar_internal::ByteSet;
using grammar_internal::Elem;
using grammar_internal::kBytes;
using grammar_internal::kEnd;
using grammar_internal::kRule;

namespace {

constexpr int kMaxRepeat = 4096;

void SetBit(ByteSet& s, uint8_t b) { s[b >> 6] |= uint64_t{1} << (b & 63); }
void SetRange(ByteSet& s, int lo, int hi) {
  for (int b = lo; b <= hi; ++b) SetBit(s, static_cast<uint8_t>(b));
}
bool Empty(const ByteSet& s) { return (s[0] | s[1] | s[2] | s[3]) == 0; }
void Or(ByteSet& a, const ByteSet& b) {
  for (int i = 0; i < 4; ++i) a[i] |= b[i];
}

}  // namespace

// ---------------------------------------------------------------- parsing

namespace {

struct Item {
  std::vector<Elem> elems;
};

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  absl::Status Run() {
    SkipSpace();
    while (i_ < src_.size()) {
      const size_t at = i_;
      std::string name = Name();
      if (name.empty()) return Error(at, "expected a rule name");
      SkipSpace();
      if (src_.substr(i_, 3) != "::=") return Error(i_, absl::StrCat("expected ::= after '", name, "'"));
      i_ += 3;
      const uint32_t id = RuleId(name);
      if (defined_[id]) return Error(at, absl::StrCat("rule '", name, "' is defined twice"));
      defined_[id] = true;
      std::vector<std::vector<Elem>> alts;
      RETURN_IF_ERROR(Alternatives(/*nested=*/false, &alts));
      rules_[id] = std::move(alts);
      SkipSpace();
    }
    for (size_t r = 0; r < names_.size(); ++r) {
      if (!defined_[r]) {
        return absl::InvalidArgumentError(
            absl::StrCat("grammar: rule '", names_[r], "' is used but not defined"));
      }
    }
    auto root = ids_.find("root");
    if (root == ids_.end()) {
      return absl::InvalidArgumentError("grammar: there is no rule 'root' (the start rule)");
    }
    root_ = root->second;
    return absl::OkStatus();
  }

  std::vector<std::string> names_;
  std::vector<std::vector<std::vector<Elem>>> rules_;
  std::vector<ByteSet> sets_;
  uint32_t root_ = 0;

 private:
  absl::Status Error(size_t at, absl::string_view what) const {
    int line = 1, col = 1;
    for (size_t k = 0; k < at && k < src_.size(); ++k) {
      if (src_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("grammar: line ", line, " column ", col, ": ", what));
  }

  static bool NameChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  }

  void SkipSpace() {
    while (i_ < src_.size()) {
      const char c = src_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i_;
      } else if (c == '#') {
        while (i_ < src_.size() && src_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string Name() {
    const size_t start = i_;
    while (i_ < src_.size() && NameChar(src_[i_])) ++i_;
    return std::string(src_.substr(start, i_ - start));
  }

  uint32_t RuleId(const std::string& name) {
    auto [it, inserted] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
    if (inserted) {
      names_.push_back(name);
      rules_.emplace_back();
      defined_.push_back(false);
    }
    return it->second;
  }

  uint32_t NewRule(std::vector<std::vector<Elem>> alts) {
    std::string name;
    do {
      name = absl::StrCat(current_, "-", ++synth_);
    } while (ids_.contains(name));
    const uint32_t id = RuleId(name);
    defined_[id] = true;
    rules_[id] = std::move(alts);
    return id;
  }

  uint32_t SetId(const ByteSet& s) {
    auto [it, inserted] = set_ids_.try_emplace(s, static_cast<uint32_t>(sets_.size()));
    if (inserted) sets_.push_back(s);
    return it->second;
  }

  // A name followed by ::= starts the next rule.
  bool AtRuleStart() {
    if (i_ >= src_.size() || !NameChar(src_[i_])) return false;
    size_t k = i_;
    while (k < src_.size() && NameChar(src_[k])) ++k;
    while (k < src_.size() && (src_[k] == ' ' || src_[k] == '\t' || src_[k] == '\n' || src_[k] == '\r')) ++k;
    return src_.substr(k, 3) == "::=";
  }

  absl::Status Alternatives(bool nested, std::vector<std::vector<Elem>>* alts) {
    while (true) {
      std::vector<Elem> seq;
      RETURN_IF_ERROR(Sequence(nested, &seq));
      alts->push_back(std::move(seq));
      SkipSpace();
      if (i_ < src_.size() && src_[i_] == '|') {
        ++i_;
        continue;
      }
      return absl::OkStatus();
    }
  }

  absl::Status Sequence(bool nested, std::vector<Elem>* seq) {
    while (true) {
      SkipSpace();
      if (i_ >= src_.size()) return absl::OkStatus();
      const char c = src_[i_];
      if (c == '|') return absl::OkStatus();
      if (c == ')') {
        if (nested) return absl::OkStatus();
        return Error(i_, "unbalanced ')'");
      }
      if (!nested && AtRuleStart()) return absl::OkStatus();
      Item item;
      RETURN_IF_ERROR(Primary(&item));
      RETURN_IF_ERROR(Postfix(&item));
      seq->insert(seq->end(), item.elems.begin(), item.elems.end());
    }
  }

  absl::Status Primary(Item* item) {
    const size_t at = i_;
    const char c = src_[i_];
    if (c == '"') {
      ++i_;
      std::string bytes;
      while (true) {
        if (i_ >= src_.size()) return Error(at, "unterminated string literal");
        if (src_[i_] == '"') {
          ++i_;
          break;
        }
        uint32_t cp;
        RETURN_IF_ERROR(Char(&cp));
        AppendUtf8(cp, &bytes);
      }
      for (const char b : bytes) {
        ByteSet s{};
        SetBit(s, static_cast<uint8_t>(b));
        item->elems.push_back({kBytes, SetId(s)});
      }
      return absl::OkStatus();
    }
    if (c == '[') return Class(item);
    if (c == '.') {
      ++i_;
      item->elems.push_back(CodepointRanges({{0, 0x10FFFF}}));
      return absl::OkStatus();
    }
    if (c == '(') {
      ++i_;
      std::vector<std::vector<Elem>> alts;
      RETURN_IF_ERROR(Alternatives(/*nested=*/true, &alts));
      SkipSpace();
      if (i_ >= src_.size() || src_[i_] != ')') return Error(at, "unbalanced '('");
      ++i_;
      if (alts.size() == 1) {
        item->elems = std::move(alts[0]);
      } else {
        item->elems.push_back({kRule, NewRule(std::move(alts))});
      }
      return absl::OkStatus();
    }
    if (NameChar(c)) {
      const std::string name = Name();
      item->elems.push_back({kRule, RuleId(name)});
      return absl::OkStatus();
    }
    return Error(at, absl::StrFormat("unexpected character '%c'", c));
  }

  absl::Status Postfix(Item* item) {
    if (i_ >= src_.size()) return absl::OkStatus();
    const char c = src_[i_];
    int min = 0, max = -1;  // -1: unbounded
    if (c == '*') {
      ++i_;
    } else if (c == '+') {
      ++i_;
      min = 1;
    } else if (c == '?') {
      ++i_;
      max = 1;
    } else if (c == '{') {
      const size_t at = i_++;
      auto number = [&](int* out) {
        const size_t start = i_;
        int v = 0;
        while (i_ < src_.size() && src_[i_] >= '0' && src_[i_] <= '9') {
          v = v * 10 + (src_[i_] - '0');
          if (v > kMaxRepeat) return false;
          ++i_;
        }
        *out = v;
        return i_ > start;
      };
      SkipInline();
      if (!number(&min)) return Error(at, absl::StrCat("expected a count up to ", kMaxRepeat, " in {}"));
      SkipInline();
      if (i_ < src_.size() && src_[i_] == ',') {
        ++i_;
        SkipInline();
        if (i_ < src_.size() && src_[i_] == '}') {
          max = -1;
        } else if (!number(&max)) {
          return Error(at, absl::StrCat("expected a count up to ", kMaxRepeat, " in {}"));
        }
        SkipInline();
      } else {
        max = min;
      }
      if (i_ >= src_.size() || src_[i_] != '}') return Error(at, "expected '}'");
      ++i_;
      if (max >= 0 && max < min) return Error(at, "{m,n} with n < m");
    } else {
      return absl::OkStatus();
    }
    // One element to repeat.
    Elem x;
    if (item->elems.size() == 1) {
      x = item->elems[0];
    } else {
      x = {kRule, NewRule({item->elems})};
    }
    std::vector<Elem> out(static_cast<size_t>(min), x);
    if (max < 0) {
      // star ::= x star | (empty)
      const uint32_t star = NewRule({});
      rules_[star] = {{x, {kRule, star}}, {}};
      out.push_back({kRule, star});
    } else if (max > min) {
      // opt_k ::= x opt_{k-1} | (empty), opt_1 ::= x | (empty)
      uint32_t inner = NewRule({{x}, {}});
      for (int k = 2; k <= max - min; ++k) inner = NewRule({{x, {kRule, inner}}, {}});
      out.push_back({kRule, inner});
    }
    item->elems = std::move(out);
    return Postfix(item);  // e.g. x{2}? is unusual but well defined
  }

  void SkipInline() {
    while (i_ < src_.size() && (src_[i_] == ' ' || src_[i_] == '\t')) ++i_;
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // One character of a literal or class (UTF-8 decoded, escapes applied).
  absl::Status Char(uint32_t* cp) {
    const size_t at = i_;
    const unsigned char c = static_cast<unsigned char>(src_[i_]);
    if (c == '\\') {
      if (i_ + 1 >= src_.size()) return Error(at, "unfinished escape");
      const char e = src_[i_ + 1];
      i_ += 2;
      switch (e) {
        case 'n': *cp = '\n'; return absl::OkStatus();
        case 'r': *cp = '\r'; return absl::OkStatus();
        case 't': *cp = '\t'; return absl::OkStatus();
        case '0': *cp = 0; return absl::OkStatus();
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/':
          *cp = static_cast<unsigned char>(e);
          return absl::OkStatus();
        case 'x': case 'u': case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t v = 0;
          for (int k = 0; k < n; ++k) {
            const int h = i_ < src_.size() ? Hex(src_[i_]) : -1;
            if (h < 0) return Error(at, absl::StrCat("\\", std::string(1, e), " needs ", n, " hex digits"));
            v = v * 16 + h;
            ++i_;
          }
          if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return Error(at, "not a Unicode scalar value");
          *cp = v;
          return absl::OkStatus();
        }
        default:
          return Error(at, absl::StrFormat("unknown escape \\%c", e));
      }
    }
    // UTF-8 decode.
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i_ + len > src_.size()) return Error(at, "the grammar is not valid UTF-8");
    uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(src_[i_ + k]);
      if ((cc & 0xC0) != 0x80) return Error(at, "the grammar is not valid UTF-8");
      v = (v << 6) | (cc & 0x3F);
    }
    i_ += len;
    *cp = v;
    return absl::OkStatus();
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  absl::Status Class(Item* item) {
    const size_t at = i_++;
    bool negate = false;
    if (i_ < src_.size() && src_[i_] == '^') {
      negate = true;
      ++i_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (true) {
      if (i_ >= src_.size()) return Error(at, "unterminated character class");
      if (src_[i_] == ']') {
        ++i_;
        break;
      }
      uint32_t lo, hi;
      RETURN_IF_ERROR(Char(&lo));
      hi = lo;
      if (i_ + 1 < src_.size() && src_[i_] == '-' && src_[i_ + 1] != ']') {
        ++i_;
        RETURN_IF_ERROR(Char(&hi));
        if (hi < lo) return Error(at, "a range in a class runs backwards");
      }
      ranges.push_back({lo, hi});
    }
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (const auto& r : ranges) {
      if (!merged.empty() && r.first <= merged.back().second + 1) {
        merged.back().second = std::max(merged.back().second, r.second);
      } else {
        merged.push_back(r);
      }
    }
    if (negate) {
      std::vector<std::pair<uint32_t, uint32_t>> comp;
      uint32_t next = 0;
      for (const auto& r : merged) {
        if (r.first > next) comp.push_back({next, r.first - 1});
        next = r.second + 1;
      }
      if (next <= 0x10FFFF) comp.push_back({next, 0x10FFFF});
      merged = std::move(comp);
    }
    if (merged.empty()) return Error(at, "the character class matches nothing");
    item->elems.push_back(CodepointRanges(merged));
    return absl::OkStatus();
  }

  // Code point ranges (surrogates dropped) as one byte set or as a rule of
  // UTF-8 byte sequences.
  Elem CodepointRanges(const std::vector<std::pair<uint32_t, uint32_t>>& in) {
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
    static const uint32_t kBounds[][2] = {
        {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
    for (const auto& r : in) {
      for (const auto& b : kBounds) {
        const uint32_t lo = std::max(r.first, b[0]), hi = std::min(r.second, b[1]);
        if (lo <= hi) Split(lo, hi, &seqs);
      }
    }
    ByteSet single{};
    std::vector<std::vector<Elem>> alts;
    for (const auto& s : seqs) {
      if (s.size() == 1) {
        SetRange(single, s[0].first, s[0].second);
        continue;
      }
      std::vector<Elem> alt;
      for (const auto& [lo, hi] : s) {
        ByteSet bs{};
        SetRange(bs, lo, hi);
        alt.push_back({kBytes, SetId(bs)});
      }
      alts.push_back(std::move(alt));
    }
    if (alts.empty()) return {kBytes, SetId(single)};
    if (!Empty(single)) alts.insert(alts.begin(), {{kBytes, SetId(single)}});
    return {kRule, NewRule(std::move(alts))};
  }

  static int Utf8Len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

  static std::vector<uint8_t> Encode(uint32_t cp) {
    std::string s;
    AppendUtf8(cp, &s);
    return std::vector<uint8_t>(s.begin(), s.end());
  }

  // [lo, hi] (same UTF-8 length) as sequences of byte ranges.
  static void Split(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>* out) {
    const int n = Utf8Len(lo);
    for (int i = 1; i < n; ++i) {
      const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
      if ((lo & ~m) != (hi & ~m)) {
        if ((lo & m) != 0) {
          Split(lo, lo | m, out);
          Split((lo | m) + 1, hi, out);
          return;
        }
        if ((hi & m) != m) {
          Split(lo, (hi & ~m) - 1, out);
          Split(hi & ~m, hi, out);
          return;
        }
      }
    }
    const std::vector<uint8_t> a = Encode(lo), b = Encode(hi);
    std::vector<std::pair<uint8_t, uint8_t>> seq;
    for (size_t k = 0; k < a.size(); ++k) seq.push_back({a[k], b[k]});
    out->push_back(std::move(seq));
  }

  struct SetHash {
    size_t operator()(const ByteSet& s) const {
      return absl::HashOf(s[0], s[1], s[2], s[3]);
    }
  };

  std::string_view src_;
  size_t i_ = 0;
  std::string current_ = "g";
  int synth_ = 0;
  absl::flat_hash_map<std::string, uint32_t> ids_;
  std::vector<bool> defined_;
  absl::flat_hash_map<ByteSet, uint32_t, SetHash> set_ids_;
};

}  // namespace

// Flattens the parsed rules and checks them: productive, not left-recursive;
// computes the follow sets.
class GrammarBuilderAccess {
 public:
  static absl::StatusOr<std::shared_ptr<const Grammar>> Build(Parser& p) {
    std::shared_ptr<Grammar> g(new Grammar());
    const size_t n = p.rules_.size();
    g->names_ = p.names_;
    g->sets_ = p.sets_;
    g->root_ = p.root_;
    g->alts_.resize(n);
    for (size_t r = 0; r < n; ++r) {
      for (const std::vector<Elem>& alt : p.rules_[r]) {
        g->alts_[r].push_back(static_cast<uint32_t>(g->elems_.size()));
        for (const Elem& e : alt) {
          g->elems_.push_back(e);
          g->rule_of_pos_.push_back(static_cast<uint32_t>(r));
        }
        g->elems_.push_back({kEnd, 0});
        g->rule_of_pos_.push_back(static_cast<uint32_t>(r));
      }
      if (g->alts_[r].empty()) {
        return absl::InvalidArgumentError(absl::StrCat("grammar: rule '", g->names_[r], "' is empty"));
      }
    }
    // Nullable and productive, by fixpoint.
    std::vector<bool> nullable(n, false), productive(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        for (const uint32_t start : g->alts_[r]) {
          bool null = true, prod = true;
          for (uint32_t q = start; g->elems_[q].kind != kEnd; ++q) {
            const Elem e = g->elems_[q];
            if (e.kind == kBytes) {
              null = false;
            } else {
              null = null && nullable[e.arg];
              prod = prod && productive[e.arg];
            }
          }
          if (null && !nullable[r]) nullable[r] = changed = true;
          if (prod && !productive[r]) productive[r] = changed = true;
        }
      }
    }
    for (size_t r = 0; r < n; ++r) {
      if (!productive[r]) {
        return absl::InvalidArgumentError(
            absl::StrCat("grammar: rule '", g->names_[r], "' derives no finite text"));
      }
    }
    // Left recursion: a rule reachable from itself without consuming a byte.
    std::vector<std::vector<uint32_t>> left(n);
    for (size_t r = 0; r < n; ++r) {
      for (const uint32_t start : g->alts_[r]) {
        for (uint32_t q = start; g->elems_[q].kind == kRule; ++q) {
          left[r].push_back(g->elems_[q].arg);
          if (!nullable[g->elems_[q].arg]) break;
        }
      }
    }
    std::vector<int> color(n, 0);
    std::string cycle;
    std::function<bool(uint32_t)> visit = [&](uint32_t r) {
      color[r] = 1;
      for (const uint32_t s : left[r]) {
        if (color[s] == 1) {
          cycle = g->names_[s];
          return true;
        }
        if (color[s] == 0 && visit(s)) return true;
      }
      color[r] = 2;
      return false;
    };
    for (size_t r = 0; r < n; ++r) {
      if (color[r] == 0 && visit(r)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "grammar: rule '", cycle, "' is left-recursive (it can call itself before reading a byte)"));
      }
    }
    // FIRST of each rule, then FOLLOW.
    std::vector<ByteSet> first(n, ByteSet{});
    auto first_of_seq = [&](uint32_t q, ByteSet* out) {  // returns nullable
      for (; g->elems_[q].kind != kEnd; ++q) {
        const Elem e = g->elems_[q];
        if (e.kind == kBytes) {
          Or(*out, g->sets_[e.arg]);
          return false;
        }
        Or(*out, first[e.arg]);
        if (!nullable[e.arg]) return false;
      }
      return true;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        ByteSet s = first[r];
        for (const uint32_t start : g->alts_[r]) first_of_seq(start, &s);
        if (s != first[r]) {
          first[r] = s;
          changed = true;
        }
      }
    }
    g->follow_.assign(n, ByteSet{});
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        for (const uint32_t start : g->alts_[r]) {
          for (uint32_t q = start; g->elems_[q].kind != kEnd; ++q) {
            if (g->elems_[q].kind != kRule) continue;
            const uint32_t callee = g->elems_[q].arg;
            ByteSet s = g->follow_[callee];
            if (first_of_seq(q + 1, &s)) Or(s, g->follow_[r]);
            if (s != g->follow_[callee]) {
              g->follow_[callee] = s;
              changed = true;
            }
          }
        }
      }
    }
    return std::shared_ptr<const Grammar>(std::move(g));
  }
};

absl::StatusOr<std::shared_ptr<const Grammar>> Grammar::Parse(std::string_view text) {
  Parser p(text);
  if (absl::Status s = p.Run(); !s.ok()) return s;
  return GrammarBuilderAccess::Build(p);
}

}  // namespace sluice
