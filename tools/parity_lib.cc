#include "tools/parity_lib.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "loader/model_files.h"
#include "model/engine.h"
#include "model/model.h"
#include "nlohmann/json.hpp"
#include "tools/plan_experts.h"

namespace sluice::parity {
namespace {

constexpr int kDecodeSteps = 32;
// The reference ran with n_ctx 256; the state is sized the same (or larger
// when a prompt needs it).
constexpr int kReferenceContext = 256;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<std::vector<float>> ReadF32(const std::string& path,
                                           int64_t expected) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  if (bytes.size() != static_cast<size_t>(expected) * sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": size ", bytes.size(), " bytes, expected ",
                     expected * sizeof(float)));
  }
  std::vector<float> v(expected);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

absl::StatusOr<nlohmann::json> ReadJson(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  }
  return j;
}

absl::StatusOr<std::vector<int32_t>> IdArray(const nlohmann::json& j,
                                             const std::string& where) {
  if (!j.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not an array"));
  }
  std::vector<int32_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": element is not an integer"));
    }
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

std::string Stem(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 5 && base.substr(base.size() - 5) == ".gguf") {
    base.resize(base.size() - 5);
  }
  return base;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

struct PromptRun {
  std::vector<float> logits;  // (n_prompt + kDecodeSteps) rows
  double prefill_s = 0;
  double decode_s = 0;
};

// Teacher-forced logits of one prompt: every row of the prompt evaluated as
// one batch, then the reference decode tokens fed one at a time.
absl::StatusOr<PromptRun> RunPrompt(const Model& model,
                                    const std::vector<int32_t>& ids,
                                    const std::vector<int32_t>& decode_tokens) {
  const int64_t v = model.info().n_vocab;
  const int capacity = std::max<int>(
      kReferenceContext, static_cast<int>(ids.size()) + kDecodeSteps);
  ASSIGN_OR_RETURN(std::unique_ptr<SequenceState> state,
                   model.CreateState(capacity));
  PromptRun run;
  std::vector<float> logits;
  auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(model.Forward(ids, *state, LogitRows::kAll, &logits));
  run.prefill_s = Seconds(start);
  run.logits = logits;
  start = std::chrono::steady_clock::now();
  for (int k = 0; k < kDecodeSteps; ++k) {
    const int32_t tok = decode_tokens[k];
    RETURN_IF_ERROR(model.Forward(absl::MakeConstSpan(&tok, 1), *state,
                                  LogitRows::kLast, &logits));
    run.logits.insert(run.logits.end(), logits.begin(), logits.begin() + v);
  }
  run.decode_s = Seconds(start);
  return run;
}

// The batched runs' other sequences are drawn from this seed, so a run is
// the same every time.
constexpr uint32_t kBatchSeed = 19;

// A sequence beside the golden prompt: its chunk of every pass (the first
// its prompt), evaluated in order.
struct OtherSequence {
  std::unique_ptr<SequenceState> state;
  std::vector<int32_t> tokens;
  std::vector<int> chunk_len;  // per pass
  LogitRows rows = LogitRows::kNone;
  int done = 0;  // tokens evaluated so far
};

int64_t RowsOf(const BatchChunk& c) {
  if (c.rows == LogitRows::kAll) return static_cast<int64_t>(c.tokens.size());
  return c.rows == LogitRows::kLast ? 1 : 0;
}

absl::StatusOr<std::vector<OtherSequence>> MakeOthers(const Model& model,
                                                      int count, int passes) {
  std::mt19937 rng(kBatchSeed);
  const LogitRows kinds[] = {LogitRows::kLast, LogitRows::kAll, LogitRows::kNone};
  std::vector<OtherSequence> others(count);
  for (int i = 0; i < count; ++i) {
    OtherSequence& o = others[i];
    o.rows = kinds[i % 3];
    o.chunk_len.push_back(1 + static_cast<int>(rng() % 24));
    // Every third one keeps prefilling a few tokens a pass beside the
    // decodes; the others decode one token a pass.
    for (int p = 1; p < passes; ++p) {
      o.chunk_len.push_back(i % 3 == 2 ? 1 + static_cast<int>(rng() % 4) : 1);
    }
    int total = 0;
    for (int n : o.chunk_len) total += n;
    for (int t = 0; t < total; ++t) {
      o.tokens.push_back(static_cast<int32_t>(rng() % model.info().n_vocab));
    }
    ASSIGN_OR_RETURN(o.state, model.CreateState(total));
  }
  return others;
}

// RunPrompt's rows with the prompt inside batches of `count` other
// sequences (in the middle of each batch): its prefill is one chunk of the
// first pass, each decode token one chunk of a later pass.
absl::StatusOr<PromptRun> RunPromptBatched(const Model& model,
                                           const std::vector<int32_t>& ids,
                                           const std::vector<int32_t>& decode_tokens,
                                           int count, BatchedPrompt* info) {
  const int64_t v = model.info().n_vocab;
  const int passes = 1 + kDecodeSteps;
  const int capacity = std::max<int>(
      kReferenceContext, static_cast<int>(ids.size()) + kDecodeSteps);
  ASSIGN_OR_RETURN(std::unique_ptr<SequenceState> golden, model.CreateState(capacity));
  ASSIGN_OR_RETURN(std::vector<OtherSequence> others, MakeOthers(model, count, passes));
  info->others = count;
  PromptRun run;
  std::vector<float> logits;
  std::vector<BatchChunk> batch;
  for (int p = 0; p < passes; ++p) {
    const BatchChunk mine =
        p == 0 ? BatchChunk{golden.get(), 0, ids, LogitRows::kAll}
               : BatchChunk{golden.get(), golden->position(),
                            absl::MakeConstSpan(&decode_tokens[p - 1], 1), LogitRows::kLast};
    batch.clear();
    int64_t my_row = 0;
    for (int i = 0; i <= count; ++i) {
      if (i == count / 2) {
        for (const BatchChunk& c : batch) my_row += RowsOf(c);
        batch.push_back(mine);
      }
      if (i == count) break;
      OtherSequence& o = others[i];
      batch.push_back({o.state.get(), o.done,
                       absl::MakeConstSpan(o.tokens).subspan(o.done, o.chunk_len[p]), o.rows});
      o.done += o.chunk_len[p];
    }
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(const BatchForwardStats stats, model.ForwardBatch(batch, &logits));
    (p == 0 ? run.prefill_s : run.decode_s) += Seconds(start);
    const int64_t mine_rows = RowsOf(mine);
    run.logits.insert(run.logits.end(), logits.begin() + my_row * v,
                      logits.begin() + (my_row + mine_rows) * v);
    ++info->passes;
    for (const BatchChunk& c : batch) info->rows += static_cast<int64_t>(c.tokens.size());
    info->experts_acquired += stats.experts_acquired();
    for (int32_t n : stats.experts_per_layer) {
      if (n == 0) continue;  // no routed experts in that block
      info->min_layer_experts =
          info->min_layer_experts == 0 ? n : std::min(info->min_layer_experts, n);
      info->max_layer_experts = std::max(info->max_layer_experts, n);
    }
  }
  return run;
}

// Per-row statistics of `ours` against `ref`, both rows x v.
std::vector<RowStats> CompareRows(const std::vector<float>& ours,
                                  const std::vector<float>& ref, int64_t v) {
  std::vector<RowStats> rows;
  for (size_t r = 0; r * v < ours.size(); ++r) {
    rows.push_back(CompareRow(&ours[r * v], &ref[r * v], v));
  }
  return rows;
}

int64_t ArgMax(const float* x, int64_t n) {
  return std::max_element(x, x + n) - x;  // first maximum: lowest id on ties
}


}  // namespace

Gates Tighten(const Gates& requested) {
  const Gates d;
  Gates g;
  g.f32_max = std::min(d.f32_max, requested.f32_max);
  g.quant_rms = std::min(d.quant_rms, requested.quant_rms);
  g.quant_median = std::min(d.quant_median, requested.quant_median);
  g.quant_top1 = std::max(d.quant_top1, requested.quant_top1);
  return g;
}

RowStats CompareRow(const float* ours, const float* ref, int64_t n) {
  RowStats s;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(ours[i]) - ref[i];
    s.max_abs = std::max(s.max_abs, std::fabs(d));
    s.sum_sq += d * d;
  }
  if (std::isnan(s.sum_sq)) s.max_abs = s.sum_sq;
  s.top1_agree = ArgMax(ours, n) == ArgMax(ref, n);
  return s;
}

double StdDev(absl::Span<const float> values) {
  if (values.empty()) return 0;
  double mean = 0;
  for (float v : values) mean += v;
  mean /= values.size();
  double var = 0;
  for (float v : values) var += (v - mean) * (v - mean);
  return std::sqrt(var / values.size());
}

PromptReport Summarize(std::string name, const std::vector<RowStats>& rows,
                       int64_t n, double std, bool all_f32,
                       const Gates& gates) {
  PromptReport p;
  p.name = std::move(name);
  p.rows = static_cast<int>(rows.size());
  p.std = std;
  double sum_sq = 0;
  std::vector<double> row_max;
  for (const RowStats& r : rows) {
    p.max = std::max(p.max, r.max_abs / std);
    if (std::isnan(r.max_abs)) p.max = r.max_abs;
    sum_sq += r.sum_sq;
    row_max.push_back(r.max_abs / std);
    p.top1 += r.top1_agree ? 1 : 0;
  }
  if (!rows.empty()) {
    p.rms = std::sqrt(sum_sq / (static_cast<double>(rows.size()) * n)) / std;
    std::sort(row_max.begin(), row_max.end());
    const size_t m = row_max.size();
    p.median = m % 2 == 1 ? row_max[m / 2]
                          : 0.5 * (row_max[m / 2 - 1] + row_max[m / 2]);
  }
  if (all_f32) {
    p.passed = p.max <= gates.f32_max && p.top1 == p.rows;
  } else {
    p.passed = p.rms <= gates.quant_rms && p.median <= gates.quant_median &&
               p.top1 >= gates.quant_top1 * p.rows;
  }
  if (rows.empty() || !(p.max == p.max)) p.passed = false;
  return p;
}

absl::StatusOr<ModelReport> RunParity(const std::string& model_path,
                                      const std::string& goldens_dir,
                                      const Options& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelFiles> files,
                   ModelFiles::Open(model_path));
  EngineOptions engine_options;
  engine_options.backend = options.backend;
  engine_options.device = options.device;
  engine_options.threads = options.threads;
  EngineOptions compare_options = engine_options;
  engine_options.experts = options.experts;
  engine_options.kv_on_demand = options.kv_on_demand;
  if (options.plan_experts) {
    RETURN_IF_ERROR(tools::PlanExperts(*files, &engine_options, [](const std::string& line) {
      std::fprintf(stderr, "parity: %s\n", line.c_str());
    }));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   LoadModel(*files, engine_options));
  // The compare arm maps the files again: a streaming arm registers its
  // expert pages with the driver, and a copy from a range that is partly
  // registered is refused.
  std::unique_ptr<ModelFiles> other_files;
  std::unique_ptr<Model> other;
  if (options.compare.has_value()) {
    EngineOptions o = compare_options;
    o.backend = *options.compare;
    ASSIGN_OR_RETURN(other_files, ModelFiles::Open(model_path));
    ASSIGN_OR_RETURN(other, LoadModel(*other_files, o));
  }
  const std::string golden_name =
      options.golden_name.empty() ? Stem(model_path) : options.golden_name;
  const std::string stem = goldens_dir + "/" + golden_name;
  ASSIGN_OR_RETURN(const nlohmann::json prompts,
                   ReadJson(stem + ".prompts.json"));
  if (!prompts.contains("prompts") || !prompts["prompts"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(stem, ".prompts.json: no \"prompts\" array"));
  }
  ModelReport report;
  report.model = Stem(model_path);
  report.info = model->info();
  report.all_f32 = model->info().all_f32;
  const int64_t v = model->info().n_vocab;
  for (const nlohmann::json& pj : prompts["prompts"]) {
    const std::string name = pj.value("name", "");
    const std::string base = absl::StrCat(stem, ".", name);
    ASSIGN_OR_RETURN(const std::vector<int32_t> ids,
                     IdArray(pj["ids"], base + " ids"));
    ASSIGN_OR_RETURN(const nlohmann::json dj,
                     ReadJson(base + ".decode_tokens.json"));
    ASSIGN_OR_RETURN(const std::vector<int32_t> dec,
                     IdArray(dj, base + ".decode_tokens.json"));
    if (dec.size() != kDecodeSteps) {
      return absl::InvalidArgumentError(absl::StrCat(
          base, ".decode_tokens.json: ", dec.size(), " ids, expected 32"));
    }
    ASSIGN_OR_RETURN(const std::vector<float> ref_prefill,
                     ReadF32(base + ".prefill_logits.f32", ids.size() * v));
    ASSIGN_OR_RETURN(const std::vector<float> ref_decode,
                     ReadF32(base + ".decode_logits.f32", kDecodeSteps * v));
    ASSIGN_OR_RETURN(PromptRun run, RunPrompt(*model, ids, dec));
    const double std = StdDev(ref_prefill);
    if (options.batch_with > 0) {
      // The gates below then judge the batched rows; the alone ones are
      // what they must equal.
      BatchedPrompt b;
      ASSIGN_OR_RETURN(PromptRun batched,
                       RunPromptBatched(*model, ids, dec, options.batch_with, &b));
      b.vs_alone = Summarize(absl::StrCat(report.model, ".", name, " batched vs alone"),
                             CompareRows(batched.logits, run.logits, v), v, std,
                             report.all_f32, options.gates);
      b.vs_alone.n_prompt = static_cast<int>(ids.size());
      report.batched.push_back(b);
      run = std::move(batched);
    }
    for (int r = 1; r < options.repeat && options.batch_with == 0; ++r) {
      ASSIGN_OR_RETURN(const PromptRun again, RunPrompt(*model, ids, dec));
      run.prefill_s = std::min(run.prefill_s, again.prefill_s);
      run.decode_s = std::min(run.decode_s, again.decode_s);
    }
    std::vector<float> ref = ref_prefill;
    ref.insert(ref.end(), ref_decode.begin(), ref_decode.end());
    PromptReport p = Summarize(absl::StrCat(report.model, ".", name),
                               CompareRows(run.logits, ref, v), v, std,
                               report.all_f32, options.gates);
    if (other != nullptr) {
      ASSIGN_OR_RETURN(const PromptRun theirs, RunPrompt(*other, ids, dec));
      PromptReport c = Summarize(
          absl::StrCat(report.model, ".", name, " ",
                       std::string(BackendName(options.backend)), " vs ",
                       std::string(BackendName(*options.compare))),
          CompareRows(run.logits, theirs.logits, v), v, std, report.all_f32,
          options.gates);
      c.n_prompt = static_cast<int>(ids.size());
      c.prefill_s = theirs.prefill_s;
      c.decode_s = theirs.decode_s;
      report.comparisons.push_back(c);
    }
    p.n_prompt = static_cast<int>(ids.size());
    p.prefill_s = run.prefill_s;
    p.decode_s = run.decode_s;
    report.prompts.push_back(p);
  }
  report.experts = model->Stats().experts;
  report.passed = !report.prompts.empty();
  for (const PromptReport& p : report.prompts) {
    report.passed = report.passed && p.passed;
  }
  return report;
}

std::string FormatReport(const std::vector<ModelReport>& reports) {
  std::string out;
  double worst_max = 0, worst_rms = 0, worst_median = 0;
  int agree = 0, total = 0;
  for (const ModelReport& m : reports) {
    for (const PromptReport& p : m.prompts) {
      absl::StrAppendFormat(
          &out,
          "%s: rows=%d std=%.4f max=%.6f rms=%.6f median=%.6f top1=%d/%d %s "
          "(%s gate; prefill %d tok %.1f tok/s, decode %.1f tok/s)\n",
          p.name, p.rows, p.std, p.max, p.rms, p.median, p.top1, p.rows,
          p.passed ? "PASS" : "FAIL", m.all_f32 ? "f32" : "quantized",
          p.n_prompt, p.n_prompt / std::max(p.prefill_s, 1e-9),
          kDecodeSteps / std::max(p.decode_s, 1e-9));
      worst_max = std::max(worst_max, p.max);
      worst_rms = std::max(worst_rms, p.rms);
      worst_median = std::max(worst_median, p.median);
      agree += p.top1;
      total += p.rows;
    }
    for (const PromptReport& c : m.comparisons) {
      absl::StrAppendFormat(
          &out,
          "compare %s: rows=%d max=%.6f rms=%.6f median=%.6f top1=%d/%d %s "
          "(the other backend: prefill %.1f tok/s, decode %.1f tok/s)\n",
          c.name, c.rows, c.max, c.rms, c.median, c.top1, c.rows,
          c.max == 0 ? "IDENTICAL" : "DIFFERENT",
          c.n_prompt / std::max(c.prefill_s, 1e-9),
          kDecodeSteps / std::max(c.decode_s, 1e-9));
    }
  }
  for (const ModelReport& m : reports) {
    for (const BatchedPrompt& b : m.batched) {
      const PromptReport& c = b.vs_alone;
      absl::StrAppendFormat(
          &out,
          "batch %s: others=%d passes=%d batch_rows=%d experts_acquired=%d "
          "(per layer and pass %d..%d) rows=%d max=%.6f top1=%d/%d %s\n",
          c.name, b.others, b.passes, b.rows, b.experts_acquired,
          b.min_layer_experts, b.max_layer_experts, c.rows, c.max,
          c.top1, c.rows, c.max == 0 ? "IDENTICAL" : "DIFFERENT");
    }
  }
  for (const ModelReport& m : reports) {
    const ExpertStreamStats& x = m.experts;
    if (!x.streaming) continue;
    const memory::SlotCacheCounters& c = x.counters;
    absl::StrAppendFormat(
        &out,
        "experts %s: streaming policy=%s miss_policy=%s slots=%d/%d "
        "arena_bytes=%d lookups=%d hits=%d hit_rate=%.4f misses=%d "
        "forced=%d host_computed=%d exhausted=%d evictions=%d bytes_host=%d "
        "bytes_disk=%d prefetches=%d useful=%d late=%d\n",
        m.model, x.policy, x.miss_policy, x.slots_capacity, x.experts, x.arena_bytes,
        c.lookups, c.hits, c.hit_rate(), c.misses, c.forced, c.host_computed,
        c.exhausted, c.evictions,
        c.bytes_by_tier[static_cast<int>(memory::Tier::kHost)],
        c.bytes_by_tier[static_cast<int>(memory::Tier::kDisk)],
        c.prefetches_issued, c.prefetches_useful, c.prefetches_late);
  }
  absl::StrAppendFormat(&out,
                        "worst_max=%.6f worst_rms=%.6f worst_median=%.6f "
                        "top1_agree=%d/%d\n",
                        worst_max, worst_rms, worst_median, agree, total);
  return out;
}

}  // namespace sluice::parity
