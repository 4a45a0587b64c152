// What constrained decoding adds to a sampling step (issue 21): the
// unconstrained Sampler::Sample against FillMask and a constrained Sample,
// on the bench models' 1300-token vocabulary (mkmodel) and on a synthetic
// vocabulary of the target's size (248,320 tokens). Masks are measured warm
// (the frame caches filled, as for every token after a grammar's first few)
// and cold (a fresh TokenGrammar: what a new schema's first tokens pay).
//
//   bazel run -c opt //bench:grammar_bench -- --benchmark_min_time=0.2
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "model/grammar.h"
#include "model/grammar_json.h"
#include "model/sampler.h"
#include "model/testing/mkmodel.h"

namespace sluice {
namespace {

constexpr int kMkmodel = 0, kTarget = 1;

// GPT-2 byte-level spelling back to bytes for the mkmodel vocabulary.
std::string Unspell(const std::string& spelled) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    for (int b = 0; b < 256; ++b) t[b] = mkmodel::ByteToUnicode(static_cast<uint8_t>(b));
    return t;
  }();
  std::string out;
  for (size_t i = 0; i < spelled.size();) {
    bool found = false;
    for (int b = 0; b < 256 && !found; ++b) {
      if (spelled.compare(i, table[b].size(), table[b]) == 0) {
        out.push_back(static_cast<char>(b));
        i += table[b].size();
        found = true;
      }
    }
    if (!found) return "";
  }
  return out;
}

// A vocabulary shaped like a large BPE one: the 256 bytes, words with and
// without a leading space, numbers, CJK, white space runs and punctuation
// runs (some with quotes, as `",` and `":`), deduplicated, then the end.
std::vector<std::string> SyntheticPieces(size_t n) {
  std::mt19937_64 rng(7);
  std::vector<std::string> pieces;
  absl::flat_hash_set<std::string> seen;
  auto add = [&](std::string s) {
    if (!s.empty() && seen.insert(s).second) pieces.push_back(std::move(s));
  };
  for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  const std::string punct = "\"{}[]:,.;()<>=+-*/\\'!?#@&|_~`$%^";
  while (pieces.size() + 1 < n) {
    const int kind = static_cast<int>(rng() % 100);
    std::string s;
    if (kind < 70) {
      if (rng() % 2) s += ' ';
      const int len = 2 + static_cast<int>(rng() % 9);
      for (int i = 0; i < len; ++i) s += static_cast<char>('a' + rng() % 26);
      if (rng() % 8 == 0) s[s[0] == ' ' ? 1 : 0] = static_cast<char>('A' + rng() % 26);
    } else if (kind < 78) {
      s = std::to_string(rng() % 1000);
    } else if (kind < 90) {
      const uint32_t cp = 0x4E00 + static_cast<uint32_t>(rng() % 0x5000);
      const int chars = 1 + static_cast<int>(rng() % 2);
      for (int i = 0; i < chars; ++i) {
        const uint32_t c = cp + i;
        s += static_cast<char>(0xE0 | (c >> 12));
        s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (c & 0x3F));
      }
    } else if (kind < 93) {
      s = std::string(1 + rng() % 16, rng() % 3 ? ' ' : '\n');
    } else {
      const int len = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < len; ++i) s += punct[rng() % punct.size()];
      if (rng() % 2) s += static_cast<char>('a' + rng() % 26);
    }
    add(std::move(s));
  }
  pieces.push_back("");  // the end token
  return pieces;
}

std::shared_ptr<const TokenVocab> Vocab(int which) {
  static std::shared_ptr<const TokenVocab> cache[2];
  if (cache[which]) return cache[which];
  std::vector<std::string> pieces;
  if (which == kMkmodel) {
    auto v = mkmodel::BuildVocab(1300 - 259);
    for (size_t i = 0; i < v->tokens.size(); ++i) {
      pieces.push_back(v->token_types[i] == 3 ? "" : Unspell(v->tokens[i]));
    }
  } else {
    pieces = SyntheticPieces(248320);
  }
  const int32_t eog = static_cast<int32_t>(pieces.size() - 1);
  cache[which] = TokenVocab::FromPieces(std::move(pieces), {eog});
  return cache[which];
}

constexpr char kSchema[] = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "age": {"type": "integer"},
  "tags": {"type": "array", "items": {"type": "string"}},
  "address": {"type": "object", "properties": {"city": {"type": "string"}},
              "required": ["city"]}}, "required": ["name", "age", "tags", "address"]})";

std::shared_ptr<const TokenGrammar> SchemaGrammar(int which) {
  auto text = JsonSchemaToGrammar(kSchema);
  return TokenGrammar::Create(*Grammar::Parse(*text), Vocab(which));
}

// The text before each measured state.
const char* const kStates[] = {
    "{\"name\": \"Ada Lov",                           // inside a string
    "{\"name\": \"Ada\", \"age\": 3",                  // inside a number
    "{\"name\": \"Ada\", \"age\": 36, \"tags\": [",    // array start
};

std::vector<float> Logits(int32_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> logits(n);
  for (float& x : logits) x = d(rng);
  return logits;
}

void BM_SampleUnconstrained(benchmark::State& state) {
  const auto vocab = Vocab(static_cast<int>(state.range(0)));
  SamplerParams p;
  p.temperature = state.range(1) ? 1.0f : 0.0f;
  p.top_k = state.range(1) ? 40 : 0;
  Sampler s(p);
  const std::vector<float> logits = Logits(vocab->n_vocab());
  for (auto _ : state) benchmark::DoNotOptimize(s.Sample(logits));
  state.SetLabel(absl::StrCat("n_vocab=", vocab->n_vocab(), state.range(1) ? " t=1 top_k=40" : " greedy"));
}
BENCHMARK(BM_SampleUnconstrained)->Args({kMkmodel, 0})->Args({kMkmodel, 1})
    ->Args({kTarget, 0})->Args({kTarget, 1})->Unit(benchmark::kMicrosecond);

void BM_FillMaskWarm(benchmark::State& state) {
  const auto g = SchemaGrammar(static_cast<int>(state.range(0)));
  GrammarMatcher m(g);
  if (!m.AcceptBytes(kStates[state.range(1)])) state.SkipWithError("state text refused");
  std::vector<uint64_t> bits;
  m.FillMask(&bits);  // warms the caches
  for (auto _ : state) {
    m.FillMask(&bits);
    benchmark::DoNotOptimize(bits.data());
  }
  size_t allowed = 0;
  for (const uint64_t w : bits) allowed += __builtin_popcountll(w);
  state.SetLabel(absl::StrCat("n_vocab=", g->vocab().n_vocab(), " allowed=", allowed,
                              " state=", state.range(1)));
}
BENCHMARK(BM_FillMaskWarm)->ArgsProduct({{kMkmodel, kTarget}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond);

// A fresh TokenGrammar each time: the trie walks of the state's frames.
void BM_FillMaskCold(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  std::vector<uint64_t> bits;
  size_t frames = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto g = SchemaGrammar(which);
    GrammarMatcher m(g);
    m.AcceptBytes(kStates[state.range(1)]);
    state.ResumeTiming();
    m.FillMask(&bits);
    frames = g->stats().frames;
  }
  state.SetLabel(absl::StrCat("frames=", frames, " state=", state.range(1)));
}
BENCHMARK(BM_FillMaskCold)->ArgsProduct({{kMkmodel, kTarget}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond);

// A constrained Sample in a steady state: inside a string, with the logits
// favouring a letter token, so that every step stays in the string.
void BM_SampleConstrainedInString(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const auto vocab = Vocab(which);
  SamplerParams p;
  p.temperature = state.range(1) ? 1.0f : 0.0f;
  p.top_k = state.range(1) ? 40 : 0;
  p.grammar = SchemaGrammar(which);
  Sampler s(p);
  std::vector<float> logits = Logits(vocab->n_vocab());
  int32_t letter = -1;
  for (int32_t id = 0; id < vocab->n_vocab() && letter < 0; ++id) {
    if (vocab->piece(id) == "e") letter = id;
  }
  logits[letter] = 100;
  // Into the string, one forced byte token at a time; the draws that follow
  // all pick `letter`.
  for (const char c : std::string("{\"name\": \"")) {
    std::vector<float> force(vocab->n_vocab(), -1e9f);
    for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
      if (vocab->piece(id) == std::string(1, c)) force[id] = 0;
    }
    s.Sample(force);
  }
  s.Sample(logits);  // the in-string frames, cold, outside the timing
  for (auto _ : state) benchmark::DoNotOptimize(s.Sample(logits));
  state.SetLabel(absl::StrCat("n_vocab=", vocab->n_vocab(), state.range(1) ? " t=1 top_k=40" : " greedy"));
}
BENCHMARK(BM_SampleConstrainedInString)->Args({kMkmodel, 0})->Args({kMkmodel, 1})
    ->Args({kTarget, 0})->Args({kTarget, 1})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sluice
