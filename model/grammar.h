// Constrained decoding: a grammar over bytes, a token trie per vocabulary,
// and a per-sequence matcher that says, before every sampling step, which
// tokens may come next (a mask over the vocabulary).
//
//   ASSIGN_OR_RETURN(auto grammar, Grammar::Parse(gbnf_text));
//   auto vocab = TokenVocab::Create(tokenizer);          // once per model
//   auto constrained = TokenGrammar::Create(grammar, vocab);  // once per grammar
//   GrammarMatcher m(constrained);                        // once per sequence
//   m.FillMask(&bits);  ... sample among the set bits ...  m.Accept(token);
//
// The grammar format (docs/API.md, "Grammars") is GBNF-like:
//
//   root   ::= "{" ws pair ("," ws pair)* "}"     # `root` is the start rule
//   pair   ::= [a-z]+ ws ":" ws value
//   value  ::= "true" | "false" | [0-9]{1,3}
//   ws     ::= [ \t\n]*
//
// Terms: "literal" (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), [class]
// with ranges and ^ for the complement (code points, matched as their UTF-8
// bytes), `.` (any code point), rule names ([A-Za-z0-9_-]+), ( groups ),
// and the postfix operators * + ? {m} {m,} {m,n}. `#` starts a comment to
// the end of the line. Newlines are white space: a rule ends where the next
// `name ::=` begins. Left-recursive rules, rules that derive no finite text
// and undefined names are refused with InvalidArgument naming the rule.
//
// How a mask is computed (the cost model is in docs/STATUS.md): the matcher
// keeps the set of parser stacks that the text so far allows (an Earley-like
// pushdown automaton over bytes, as llama.cpp's grammar). A token is
// allowed iff its bytes can be consumed from one of those stacks. For each
// distinct top of stack (its position and the two return positions beneath,
// a "frame") the trie of the vocabulary is walked once and the tokens are
// split into accepted (whatever lies deeper in the stack), rejected, and
// uncertain (they leave the frame, e.g. `",` closing a string); only the
// uncertain ones are then checked against the whole stack, and that answer
// is cached for the whole stack. Both caches live in the TokenGrammar and are
// shared by every sequence that uses it, so a steady state costs an OR of a
// bitset per stack top.
//
// Thread-safety: Grammar and TokenVocab are immutable; TokenGrammar's caches
// are guarded by a mutex (any thread may use it); a GrammarMatcher belongs to
// one sequence and one thread at a time.
#ifndef SLUICE_MODEL_GRAMMAR_H_
#define SLUICE_MODEL_GRAMMAR_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "model/tokenizer.h"

namespace sluice {

namespace grammar_internal {

// One element of a rule's alternative: a byte set, a rule call, or the end
// of the alternative.
enum ElemKind : uint8_t { kEnd = 0, kBytes = 1, kRule = 2 };
struct Elem {
  ElemKind kind;
  uint32_t arg;  // kBytes: index into Grammar::sets_; kRule: the rule id
};
using ByteSet = std::array<uint64_t, 4>;

inline bool Has(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1; }

// A parser stack is a chain of nodes; the top's pos is a kBytes element, the
// others are return positions. parent < 0: kBottom (the stack ends: the
// grammar is complete once the top returns) or kFrameBottom (used while
// precomputing a frame: what lies beneath is not known).
struct Node {
  uint32_t pos;
  int32_t parent;
};
constexpr int32_t kBottom = -1;
constexpr int32_t kFrameBottom = -2;

struct StateSet {
  std::vector<int32_t> tops;  // node ids
  bool complete = false;      // some path returned from the root rule
  bool popped = false;        // some path returned past a frame's bottom
  bool alive() const { return !tops.empty() || complete || popped; }
  void clear() {
    tops.clear();
    complete = popped = false;
  }
};

}  // namespace grammar_internal

// A parsed grammar (independent of any vocabulary).
class Grammar {
 public:
  // Parses the format above; the start rule is `root`.
  static absl::StatusOr<std::shared_ptr<const Grammar>> Parse(std::string_view text);

  // Whether `text` is a whole sentence of the grammar, or the start of one.
  bool Matches(std::string_view text) const;
  bool MatchesPrefix(std::string_view text) const;

  size_t rule_count() const { return alts_.size(); }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }

 private:
  friend class GrammarBuilderAccess;
  friend class TokenGrammar;
  friend class GrammarMatcher;
  friend struct GrammarEngine;
  friend struct FrameWalk;
  Grammar() = default;

  std::vector<grammar_internal::Elem> elems_;
  std::vector<std::vector<uint32_t>> alts_;  // rule -> start positions
  std::vector<std::string> names_;
  std::vector<grammar_internal::ByteSet> sets_;
  std::vector<uint32_t> rule_of_pos_;
  std::vector<grammar_internal::ByteSet> follow_;  // rule -> bytes that may follow it
  uint32_t root_ = 0;
};

// The vocabulary as the grammar sees it: each token's bytes (its decoded
// piece; control tokens have none), a trie over them, and the tokens that
// end a generation (allowed only where the grammar is complete).
class TokenVocab {
 public:
  static std::shared_ptr<const TokenVocab> Create(const Tokenizer& tokenizer);
  // For tests and benchmarks: tokens given as bytes (empty: never allowed),
  // with `eog` the end-of-generation ids.
  static std::shared_ptr<const TokenVocab> FromPieces(std::vector<std::string> pieces,
                                                      std::vector<int32_t> eog);

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[id]; }
  const std::vector<int32_t>& eog() const { return eog_; }
  bool is_eog(int32_t id) const;
  size_t trie_nodes() const { return nodes_.size(); }

 private:
  friend class TokenGrammar;
  friend struct GrammarEngine;
  friend struct FrameWalk;
  TokenVocab() = default;
  void Build();

  // Preorder trie: node i's subtree is [i, end); its tokens are
  // order_[tok_begin, tok_end), those ending at node i first (until tok_here).
  struct TrieNode {
    uint8_t byte;
    uint32_t end;
    uint32_t tok_begin, tok_here, tok_end;
  };
  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_;
  std::vector<TrieNode> nodes_;
  std::vector<int32_t> order_;
};

// A grammar bound to a vocabulary, with the mask caches every sequence
// using it shares.
class TokenGrammar {
 public:
  static std::shared_ptr<const TokenGrammar> Create(std::shared_ptr<const Grammar> grammar,
                                                    std::shared_ptr<const TokenVocab> vocab);

  const Grammar& grammar() const { return *grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }

  // Counters for benchmarks and tests.
  struct Stats {
    size_t frames = 0;          // frames precomputed (trie walks)
    size_t resolved = 0;        // whole-stack answers cached
    size_t uncertain_checks = 0;  // tokens checked against a whole stack
  };
  Stats stats() const;

 private:
  friend class GrammarMatcher;
  TokenGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab)
      : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {}

  static constexpr int kFrameDepth = 3;
  // Positions of the top kFrameDepth nodes (kNoPos past the bottom), and
  // whether the stack goes deeper.
  using FrameKey = std::array<uint32_t, kFrameDepth + 1>;
  struct Frame {
    // Accepted tokens: a bitset over the vocabulary when there are many,
    // else a list.
    std::vector<uint64_t> bits;
    std::vector<int32_t> list;
    std::vector<int32_t> uncertain;
  };
  const Frame& GetFrame(const FrameKey& key) const;
  // The uncertain tokens of `frame` that the whole stack `stack` (positions
  // from the top down) accepts.
  const std::vector<int32_t>& Resolve(const std::vector<uint32_t>& stack,
                                      const Frame& frame) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  mutable absl::Mutex mu_;
  mutable absl::flat_hash_map<FrameKey, std::unique_ptr<Frame>> frames_ ABSL_GUARDED_BY(mu_);
  mutable absl::flat_hash_map<std::vector<uint32_t>, std::unique_ptr<std::vector<int32_t>>>
      resolved_ ABSL_GUARDED_BY(mu_);
  mutable Stats stats_ ABSL_GUARDED_BY(mu_);
};

// One sequence's position in a grammar.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const TokenGrammar> grammar);

  // The tokens allowed next, as a bitset of n_vocab bits (bit i of word
  // i / 64); *bits is resized. End-of-generation tokens are set where the
  // text so far is a whole sentence.
  void FillMask(std::vector<uint64_t>* bits);
  // Advances over `token`; false (and no change) when the grammar does not
  // allow it. An end-of-generation token ends the sequence.
  bool Accept(int32_t token);
  // Advances over raw bytes (tests); false (and no change) when refused.
  bool AcceptBytes(std::string_view bytes);

  // The text so far is a whole sentence.
  bool CanEnd() const { return state_.complete; }
  // Nothing but the end may follow (or an end token was accepted).
  bool Finished() const { return ended_ || (state_.complete && state_.tops.empty()); }

 private:
  std::shared_ptr<const TokenGrammar> grammar_;
  std::vector<grammar_internal::Node> arena_;
  grammar_internal::StateSet state_;
  grammar_internal::StateSet scratch_;
  bool ended_ = false;
  size_t compact_at_ = 8192;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_GRAMMAR_H_
