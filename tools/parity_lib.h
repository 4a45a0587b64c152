// Logit parity of the CPU engine against the llama.cpp goldens.
//
// For each prompt of <goldens>/<model>.prompts.json the whole prompt is
// evaluated as ONE batch (logits of every row), then the 32 reference decode
// tokens are fed one at a time (teacher forcing), so n_prompt + 32 rows are
// compared with <model>.<p>.prefill_logits.f32 and .decode_logits.f32.
//
// Metrics, per prompt, all divided by `std` = the population standard
// deviation of that prompt's reference PREFILL logits (n_prompt x n_vocab
// values; this reproduces margins.json's logit_std):
//   max     = max over all compared values of |ours - ref| / std
//   rms     = sqrt(mean over all compared values of (ours - ref)^2) / std
//   median  = median over rows of the row's max |ours - ref| / std
//   top1    = rows whose argmax (lowest id on ties) equals the reference's
// With Options::batch_with = N, each prompt is computed instead inside a
// batch of N other sequences (seeded random prompts and chunks): its
// prefill as one chunk of a Model::ForwardBatch beside their prompts, each
// decode token as one chunk of a pass beside their next chunks (one token,
// or a few). Those rows are gated against the goldens as above, and also
// compared with the prompt computed alone (BatchedPrompt::vs_alone).
//
// Gates (a prompt passes when all hold):
//   all-F32 model: max <= 0.005 and top-1 agreement on every row;
//   otherwise:     rms <= 0.03, median <= 0.15, top-1 on >= 95% of rows.
#ifndef SLUICE_TOOLS_PARITY_LIB_H_
#define SLUICE_TOOLS_PARITY_LIB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "config/expert_config.h"
#include "model/engine.h"

namespace sluice::parity {

struct Gates {
  double f32_max = 0.005;
  double quant_rms = 0.03;
  double quant_median = 0.15;
  double quant_top1 = 0.95;
};

// Gates tightened by the flags' values: each field is the minimum of the
// default and the requested value (a looser request is ignored).
Gates Tighten(const Gates& requested);

struct RowStats {
  double max_abs = 0;  // max |d| over the row (not divided by std)
  double sum_sq = 0;   // sum of d^2 over the row
  bool top1_agree = false;
};

// Compares one row of n logits.
RowStats CompareRow(const float* ours, const float* ref, int64_t n);

// Population standard deviation of `values`.
double StdDev(absl::Span<const float> values);

struct PromptReport {
  std::string name;
  int rows = 0;
  int n_prompt = 0;
  double std = 0;
  double max = 0;     // / std
  double rms = 0;     // / std
  double median = 0;  // / std
  int top1 = 0;
  bool passed = false;
  double prefill_s = 0;  // wall time of the one-batch prefill
  double decode_s = 0;   // wall time of the 32 decode steps
};

// Aggregates per-row stats (n values per row) into a prompt report and
// applies the gates.
PromptReport Summarize(std::string name, const std::vector<RowStats>& rows,
                       int64_t n, double std, bool all_f32, const Gates& gates);

// One prompt computed inside a batch (Options::batch_with).
struct BatchedPrompt {
  // Its rows in the batch against the same prompt alone (statistics as a
  // PromptReport, the goldens' std): max == 0 means bit-identical.
  PromptReport vs_alone;
  int others = 0;    // sequences beside it in every pass
  int passes = 0;    // ForwardBatch calls: the prefill, then one per token
  int64_t rows = 0;  // rows of every sequence in those passes
  // BatchForwardStats::experts_acquired summed over the passes, and the
  // fewest and most experts one MoE layer acquired in one pass (all 0
  // where the backend does not count).
  int64_t experts_acquired = 0;
  int32_t min_layer_experts = 0;
  int32_t max_layer_experts = 0;
};

struct ModelReport {
  std::string model;
  ModelInfo info;
  bool all_f32 = false;
  std::vector<PromptReport> prompts;
  // With Options::compare: per prompt, this backend's logits against the
  // other's (same statistics, the goldens' std; informational, the gates of
  // `passed` are those against the goldens).
  std::vector<PromptReport> comparisons;
  // With Options::batch_with: per prompt, how it ran in the batch; the
  // prompts' gates above are then those of its batched rows.
  std::vector<BatchedPrompt> batched;
  bool passed = false;
  // The --device arm's routed-expert streaming figures after every prompt
  // (streaming false when all experts are resident).
  ExpertStreamStats experts;
};

struct Options {
  Backend backend = Backend::kCpu;
  int device = 0;
  // Also runs the model on this backend and compares the two, row by row.
  std::optional<Backend> compare;
  // Where the --device arm keeps routed experts (the compare arm keeps the
  // defaults: all resident). With compare == backend == kCuda this checks
  // that streaming experts through the slot cache leaves the logits
  // bit-identical.
  config::ExpertConfig experts;
  // The --device arm's KV in memory backed on demand (EngineOptions::
  // kv_on_demand; the compare arm allocates it whole).
  bool kv_on_demand = false;
  // Runs the fit planner on `experts` first, as the CUDA worker does
  // (tools/plan_experts.h; the CUDA arm only), logging its table to stderr.
  bool plan_experts = false;
  int threads = 1;
  Gates gates;
  // Times each prompt's prefill and decode this many times (>= 1) and
  // reports the fastest run; logits are compared on the first. Not with
  // batch_with: the times are then those of the batched passes (every
  // sequence's rows), once.
  int repeat = 1;
  // > 0: each prompt is computed inside a batch of this many other
  // sequences (see the top of this file).
  int batch_with = 0;
  // Name of the goldens to compare with; empty: the model's file name minus
  // ".gguf" (a split set's shard 1 can thus be checked against the goldens
  // of the unsplit file).
  std::string golden_name;
};

// Runs every prompt of the model. `model_path` is a .gguf file (or shard 1
// of a split set); the goldens are found by its file name minus ".gguf" in
// `goldens_dir`. Errors: NotFound / InvalidArgument naming the missing or
// malformed golden file; the engine's errors.
absl::StatusOr<ModelReport> RunParity(const std::string& model_path,
                                      const std::string& goldens_dir,
                                      const Options& options);

// "<name>: rows=.. max=.. rms=.. median=.. top1=a/b PASS|FAIL ..." lines and
// the final "worst_max=X worst_rms=Y worst_median=Z top1_agree=A/B" line.
std::string FormatReport(const std::vector<ModelReport>& reports);

}  // namespace sluice::parity

#endif  // SLUICE_TOOLS_PARITY_LIB_H_
