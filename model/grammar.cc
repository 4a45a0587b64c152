#include "model/grammar.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace sluice {

using grammar_internal::ByteSet;
using grammar_internal::Elem;
using grammar_internal::ElemKind;
using grammar_internal::Has;
using grammar_internal::kBottom;
using grammar_internal::kBytes;
using grammar_internal::kEnd;
using grammar_internal::kFrameBottom;
using grammar_internal::kRule;
using grammar_internal::Node;
using grammar_internal::StateSet;

namespace {

constexpr uint32_t kNoPos = 0xFFFFFFFFu;
// Stacks one step may hold; past it further paths are dropped (a grammar
// this ambiguous is a mistake, and dropping keeps the output valid).
constexpr size_t kMaxTops = 1 << 14;
constexpr size_t kMaxResolved = 1 << 16;

}  // namespace

// The pushdown automaton's steps, shared by the matcher, the frame
// precomputation and Grammar::Matches.
struct GrammarEngine {
  const Grammar& g;
  std::vector<Node>& arena;
  std::vector<int32_t> popped_to;  // parents already returned to in this step

  GrammarEngine(const Grammar& grammar, std::vector<Node>& nodes) : g(grammar), arena(nodes) {}

  void Expand(uint32_t pos, int32_t parent, StateSet& out) {
    while (true) {
      const Elem e = g.elems_[pos];
      if (e.kind == kEnd) {
        if (parent < 0) {
          if (parent == kBottom) {
            out.complete = true;
          } else {
            out.popped = true;
          }
          return;
        }
        for (const int32_t p : popped_to) {
          if (p == parent) return;
        }
        popped_to.push_back(parent);
        const Node n = arena[parent];
        pos = n.pos;
        parent = n.parent;
        continue;
      }
      if (e.kind == kBytes) {
        if (out.tops.size() < kMaxTops) {
          arena.push_back({pos, parent});
          out.tops.push_back(static_cast<int32_t>(arena.size() - 1));
        }
        return;
      }
      int32_t ret = parent;
      if (g.elems_[pos + 1].kind != kEnd) {  // not a tail call
        arena.push_back({pos + 1, parent});
        ret = static_cast<int32_t>(arena.size() - 1);
      }
      const std::vector<uint32_t>& alts = g.alts_[e.arg];
      for (size_t i = 0; i + 1 < alts.size(); ++i) Expand(alts[i], ret, out);
      pos = alts.back();
      parent = ret;
    }
  }

  void Dedup(StateSet& s) {
    if (s.tops.size() < 2) return;
    auto less = [this](int32_t a, int32_t b) {
      const Node& x = arena[a];
      const Node& y = arena[b];
      return x.pos != y.pos ? x.pos < y.pos : x.parent < y.parent;
    };
    auto same = [this](int32_t a, int32_t b) {
      return arena[a].pos == arena[b].pos && arena[a].parent == arena[b].parent;
    };
    std::sort(s.tops.begin(), s.tops.end(), less);
    s.tops.erase(std::unique(s.tops.begin(), s.tops.end(), same), s.tops.end());
  }

  void Start(StateSet& out) {
    out.clear();
    popped_to.clear();
    for (const uint32_t alt : g.alts_[g.root_]) Expand(alt, kBottom, out);
    Dedup(out);
  }

  void Advance(const StateSet& in, uint8_t b, StateSet& out) {
    out.clear();
    popped_to.clear();
    for (const int32_t t : in.tops) {
      const Node n = arena[t];
      if (Has(g.sets_[g.elems_[n.pos].arg], b)) Expand(n.pos + 1, n.parent, out);
    }
    Dedup(out);
  }
};

bool Grammar::Matches(std::string_view text) const {
  std::vector<Node> arena;
  GrammarEngine e(*this, arena);
  StateSet a, b;
  e.Start(a);
  for (const char c : text) {
    e.Advance(a, static_cast<uint8_t>(c), b);
    if (!b.alive()) return false;
    std::swap(a, b);
  }
  return a.complete;
}

bool Grammar::MatchesPrefix(std::string_view text) const {
  std::vector<Node> arena;
  GrammarEngine e(*this, arena);
  StateSet a, b;
  e.Start(a);
  for (const char c : text) {
    e.Advance(a, static_cast<uint8_t>(c), b);
    if (!b.alive()) return false;
    std::swap(a, b);
  }
  return true;
}

// ------------------------------------------------------------- vocabulary

namespace {

bool IsEndOfGenerationToken(const Tokenizer& tok, int32_t id) {
  if (id == tok.eos()) return true;
  if (!tok.IsControl(id)) return false;
  const std::string& text = tok.TokenText(id);
  return text == "<|im_end|>" || text == "<|endoftext|>" || text == "<|eot_id|>";
}

}  // namespace

std::shared_ptr<const TokenVocab> TokenVocab::Create(const Tokenizer& tokenizer) {
  std::vector<std::string> pieces(tokenizer.n_vocab());
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    if (IsEndOfGenerationToken(tokenizer, id)) {
      eog.push_back(id);
      continue;
    }
    if (tokenizer.IsControl(id)) continue;
    pieces[id] = tokenizer.TokenPiece(id, /*render_special=*/false);
  }
  return FromPieces(std::move(pieces), std::move(eog));
}

std::shared_ptr<const TokenVocab> TokenVocab::FromPieces(std::vector<std::string> pieces,
                                                         std::vector<int32_t> eog) {
  std::shared_ptr<TokenVocab> v(new TokenVocab());
  v->pieces_ = std::move(pieces);
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  for (const int32_t id : eog) {
    if (id >= 0 && id < v->n_vocab()) {
      v->eog_.push_back(id);
      v->pieces_[id].clear();  // an end token is never text
    }
  }
  v->Build();
  return v;
}

bool TokenVocab::is_eog(int32_t id) const {
  return std::binary_search(eog_.begin(), eog_.end(), id);
}

void TokenVocab::Build() {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n_vocab(); ++id) {
    if (!pieces_[id].empty()) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end(), [this](int32_t a, int32_t b) {
    const int c = pieces_[a].compare(pieces_[b]);  // std::string compares as unsigned char
    return c != 0 ? c < 0 : a < b;
  });
  nodes_.clear();
  order_.clear();
  nodes_.push_back({0, 0, 0, 0, 0});
  std::vector<uint32_t> path = {0};  // node per depth
  std::string_view prev;
  auto close = [this](uint32_t node) {
    nodes_[node].end = static_cast<uint32_t>(nodes_.size());
    nodes_[node].tok_end = static_cast<uint32_t>(order_.size());
  };
  for (const int32_t id : ids) {
    const std::string& s = pieces_[id];
    size_t common = 0;
    while (common < prev.size() && common < s.size() && prev[common] == s[common]) ++common;
    while (path.size() > common + 1) {
      close(path.back());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      const uint32_t here = static_cast<uint32_t>(order_.size());
      nodes_.push_back({static_cast<uint8_t>(s[d]), 0, here, here, here});
      path.push_back(static_cast<uint32_t>(nodes_.size() - 1));
    }
    order_.push_back(id);
    nodes_[path.back()].tok_here = static_cast<uint32_t>(order_.size());
    prev = s;
  }
  while (!path.empty()) {
    close(path.back());
    path.pop_back();
  }
}

// ----------------------------------------------------------- token masks

struct FrameWalk {
  const Grammar& g;
  const TokenVocab& v;
  std::vector<Node> arena;
  std::vector<StateSet> levels;
  ByteSet follow{};
  std::vector<int32_t> accepted, uncertain;

  void Tokens(uint32_t begin, uint32_t end, std::vector<int32_t>& to) {
    to.insert(to.end(), v.order_.begin() + begin, v.order_.begin() + end);
  }

  void Walk(GrammarEngine& e, uint32_t node, size_t depth, bool unsure) {
    const auto& nodes = v.nodes_;
    const bool alive = levels[depth].alive();
    if (nodes[node].tok_here > nodes[node].tok_begin) {
      if (alive) {
        Tokens(nodes[node].tok_begin, nodes[node].tok_here, accepted);
      } else if (unsure) {
        Tokens(nodes[node].tok_begin, nodes[node].tok_here, uncertain);
      }
    }
    if (levels.size() <= depth + 1) levels.resize(depth + 2);
    for (uint32_t c = node + 1; c < nodes[node].end; c = nodes[c].end) {
      const uint8_t b = nodes[c].byte;
      const bool child_unsure = unsure || (levels[depth].popped && Has(follow, b));
      const size_t mark = arena.size();
      e.Advance(levels[depth], b, levels[depth + 1]);
      if (levels[depth + 1].alive()) {
        Walk(e, c, depth + 1, child_unsure);
      } else if (child_unsure) {
        Tokens(nodes[c].tok_begin, nodes[c].tok_end, uncertain);
      }
      arena.resize(mark);
    }
  }
};

std::shared_ptr<const TokenGrammar> TokenGrammar::Create(std::shared_ptr<const Grammar> grammar,
                                                         std::shared_ptr<const TokenVocab> vocab) {
  return std::shared_ptr<const TokenGrammar>(new TokenGrammar(std::move(grammar), std::move(vocab)));
}

TokenGrammar::Stats TokenGrammar::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

const TokenGrammar::Frame& TokenGrammar::GetFrame(const FrameKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = frames_.find(key);
  if (it != frames_.end()) return *it->second;
  const Grammar& g = *grammar_;
  FrameWalk w{g, *vocab_, {}, {}, {}, {}, {}};
  GrammarEngine e(g, w.arena);
  int levels = 0;
  while (levels < kFrameDepth && key[levels] != kNoPos) ++levels;
  const bool truncated = key[kFrameDepth] != 0;
  int32_t parent = truncated ? kFrameBottom : kBottom;
  for (int i = levels - 1; i >= 0; --i) {
    w.arena.push_back({key[i], parent});
    parent = static_cast<int32_t>(w.arena.size() - 1);
  }
  if (truncated) w.follow = g.follow_[g.rule_of_pos_[key[levels - 1]]];
  w.levels.resize(16);
  w.levels[0].tops.push_back(parent);
  w.Walk(e, 0, 0, false);
  auto frame = std::make_unique<Frame>();
  const size_t n = static_cast<size_t>(vocab_->n_vocab());
  if (w.accepted.size() * 32 > n) {
    frame->bits.assign((n + 63) / 64, 0);
    for (const int32_t id : w.accepted) frame->bits[id >> 6] |= uint64_t{1} << (id & 63);
  } else {
    frame->list = std::move(w.accepted);
  }
  frame->uncertain = std::move(w.uncertain);
  ++stats_.frames;
  const Frame& ref = *frame;
  frames_.emplace(key, std::move(frame));
  return ref;
}

const std::vector<int32_t>& TokenGrammar::Resolve(const std::vector<uint32_t>& stack,
                                                  const Frame& frame) const {
  absl::MutexLock lock(&mu_);
  auto it = resolved_.find(stack);
  if (it != resolved_.end()) return *it->second;
  if (resolved_.size() >= kMaxResolved) resolved_.clear();
  const Grammar& g = *grammar_;
  std::vector<Node> arena;
  int32_t parent = kBottom;
  for (size_t i = stack.size(); i-- > 0;) {
    arena.push_back({stack[i], parent});
    parent = static_cast<int32_t>(arena.size() - 1);
  }
  const size_t base = arena.size();
  GrammarEngine e(g, arena);
  auto out = std::make_unique<std::vector<int32_t>>();
  StateSet a, b;
  for (const int32_t id : frame.uncertain) {
    a.clear();
    a.tops.push_back(parent);
    bool ok = true;
    for (const char c : vocab_->piece(id)) {
      e.Advance(a, static_cast<uint8_t>(c), b);
      if (!b.alive()) {
        ok = false;
        break;
      }
      std::swap(a, b);
    }
    if (ok) out->push_back(id);
    arena.resize(base);
  }
  stats_.uncertain_checks += frame.uncertain.size();
  ++stats_.resolved;
  const std::vector<int32_t>& ref = *out;
  resolved_.emplace(stack, std::move(out));
  return ref;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const TokenGrammar> grammar)
    : grammar_(std::move(grammar)) {
  GrammarEngine e(grammar_->grammar(), arena_);
  e.Start(state_);
}

void GrammarMatcher::FillMask(std::vector<uint64_t>* bits) {
  const TokenVocab& v = grammar_->vocab();
  const size_t words = (static_cast<size_t>(v.n_vocab()) + 63) / 64;
  bits->assign(words, 0);
  if (ended_) return;
  uint64_t* out = bits->data();
  std::vector<uint32_t> stack;
  std::vector<std::vector<uint32_t>> seen;
  for (const int32_t top : state_.tops) {
    stack.clear();
    for (int32_t x = top; x >= 0; x = arena_[x].parent) stack.push_back(arena_[x].pos);
    if (state_.tops.size() > 1) {
      if (std::find(seen.begin(), seen.end(), stack) != seen.end()) continue;
      seen.push_back(stack);
    }
    TokenGrammar::FrameKey key;
    key.fill(kNoPos);
    for (size_t i = 0; i < stack.size() && i < TokenGrammar::kFrameDepth; ++i) key[i] = stack[i];
    key[TokenGrammar::kFrameDepth] = stack.size() > TokenGrammar::kFrameDepth ? 1 : 0;
    const TokenGrammar::Frame& f = grammar_->GetFrame(key);
    if (!f.bits.empty()) {
      const uint64_t* in = f.bits.data();
      for (size_t i = 0; i < words; ++i) out[i] |= in[i];
    } else {
      for (const int32_t id : f.list) out[id >> 6] |= uint64_t{1} << (id & 63);
    }
    if (!f.uncertain.empty()) {
      for (const int32_t id : grammar_->Resolve(stack, f)) out[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }
  if (state_.complete) {
    for (const int32_t id : v.eog()) out[id >> 6] |= uint64_t{1} << (id & 63);
  }
}

bool GrammarMatcher::Accept(int32_t token) {
  const TokenVocab& v = grammar_->vocab();
  if (ended_ || token < 0 || token >= v.n_vocab()) return false;
  if (v.is_eog(token)) {
    if (!state_.complete) return false;
    ended_ = true;
    return true;
  }
  const std::string& piece = v.piece(token);
  if (piece.empty()) return false;
  return AcceptBytes(piece);
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (ended_) return false;
  const size_t mark = arena_.size();
  GrammarEngine e(grammar_->grammar(), arena_);
  StateSet cur = state_;
  for (const char c : bytes) {
    e.Advance(cur, static_cast<uint8_t>(c), scratch_);
    if (!scratch_.alive()) {
      arena_.resize(mark);
      return false;
    }
    std::swap(cur, scratch_);
  }
  state_ = std::move(cur);
  // Drop the nodes no stack reaches any more, now and then.
  if (arena_.size() > compact_at_) {
    std::vector<Node> compact;
    absl::flat_hash_map<int32_t, int32_t> remap;
    std::function<int32_t(int32_t)> copy = [&](int32_t x) -> int32_t {
      if (x < 0) return x;
      auto it = remap.find(x);
      if (it != remap.end()) return it->second;
      const Node n = arena_[x];
      const int32_t parent = copy(n.parent);
      compact.push_back({n.pos, parent});
      const int32_t id = static_cast<int32_t>(compact.size() - 1);
      remap[x] = id;
      return id;
    };
    for (int32_t& t : state_.tops) t = copy(t);
    arena_ = std::move(compact);
    compact_at_ = std::max<size_t>(8192, 4 * arena_.size());
  }
  return true;
}

}  // namespace sluice
