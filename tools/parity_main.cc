// parity: logits of the CPU engine against llama.cpp goldens.
//
//   bazel run //tools:parity -- --model M.gguf --goldens DIR [--threads N]
//       [--batch_with N [--require_identical]]
//
// See tools/parity_lib.h for what is compared, the metrics (differences are
// divided by the std of the prompt's reference prefill logits) and the gates.
// The last line printed is always
//   worst_max=X worst_rms=Y worst_median=Z top1_agree=A/B
// Exit status 0 only when every prompt of every model passes its gate.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "tools/engine_flags.h"
#include "tools/parity_lib.h"

ABSL_FLAG(std::string, model, "",
          "GGUF model (or shard 1 of a split set); several comma-separated");
ABSL_FLAG(std::string, goldens, "",
          "directory holding <model>.prompts.json and the reference logits");
ABSL_FLAG(std::string, compare, "",
          "also run this backend (cpu or cuda) and print its logits' "
          "statistics against --backend's, row by row");
ABSL_FLAG(int, threads, 1, "threads for the CPU kernels");
ABSL_FLAG(bool, require_identical, false,
          "fail unless every --compare row is bit-identical (for checking "
          "that streaming experts leaves the logits unchanged) and, with "
          "--batch_with, every batched row equals the prompt alone");
ABSL_FLAG(int, batch_with, 0,
          "compute each prompt inside batches of this many other sequences "
          "(one ForwardBatch per step); the gates then apply to its batched "
          "rows, which are also compared with the prompt alone");
ABSL_FLAG(int, repeat, 1,
          "run each prompt this many times and report the fastest timings");
ABSL_FLAG(double, max_gate, 0.005,
          "all-F32 models: max |dlogit|/std allowed (can only tighten)");
ABSL_FLAG(double, rms_gate, 0.03,
          "quantized models: RMS |dlogit|/std allowed (can only tighten)");
ABSL_FLAG(double, median_gate, 0.15,
          "quantized models: median over rows of row max |dlogit|/std "
          "(can only tighten)");
ABSL_FLAG(double, top1_gate, 0.95,
          "quantized models: fraction of rows whose argmax must agree "
          "(can only tighten)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Compares the engine's logits with llama.cpp goldens: one-batch prefill "
      "of each prompt, then 32 teacher-forced decode steps. |dlogit| is "
      "divided by the population std of the prompt's reference prefill "
      "logits (margins.json's logit_std). Gates: all-F32 models max <= 0.005 "
      "and top-1 on every row; quantized models rms <= 0.03, median row max "
      "<= 0.15, top-1 on >= 95% of rows. Flags may tighten the gates only.");
  absl::ParseCommandLine(argc, argv);
  const std::string model_flag = absl::GetFlag(FLAGS_model);
  const std::string goldens = absl::GetFlag(FLAGS_goldens);
  if (model_flag.empty() || goldens.empty()) {
    std::fprintf(stderr, "parity: --model and --goldens are required\n");
    std::printf("worst_max=nan worst_rms=nan worst_median=nan top1_agree=0/0\n");
    return 2;
  }
  sluice::parity::Options options;
  auto flags = sluice::tools::EngineFlagsFromFlags(
      [](const std::string& line) { std::fprintf(stderr, "parity: %s\n", line.c_str()); });
  const std::string compare = absl::GetFlag(FLAGS_compare);
  const auto compare_backend = sluice::ParseBackend(compare);
  if (!flags.ok() || (!compare.empty() && !compare_backend)) {
    std::fprintf(stderr, "parity: %s\n",
                 !flags.ok() ? flags.status().ToString().c_str()
                             : ("--compare=" + compare + ": use cpu or cuda").c_str());
    std::printf("worst_max=nan worst_rms=nan worst_median=nan top1_agree=0/0\n");
    return 2;
  }
  options.backend = flags->backend;
  options.device = flags->device;
  if (!compare.empty()) options.compare = compare_backend;
  options.threads = absl::GetFlag(FLAGS_threads);
  options.experts = flags->experts;
  options.plan_experts = true;
  options.repeat = std::max(1, absl::GetFlag(FLAGS_repeat));
  options.batch_with = std::max(0, absl::GetFlag(FLAGS_batch_with));
  sluice::parity::Gates requested;
  requested.f32_max = absl::GetFlag(FLAGS_max_gate);
  requested.quant_rms = absl::GetFlag(FLAGS_rms_gate);
  requested.quant_median = absl::GetFlag(FLAGS_median_gate);
  requested.quant_top1 = absl::GetFlag(FLAGS_top1_gate);
  options.gates = sluice::parity::Tighten(requested);

  std::vector<sluice::parity::ModelReport> reports;
  bool ok = true;
  const std::vector<std::string> paths =
      absl::StrSplit(model_flag, ',', absl::SkipEmpty());
  for (const std::string& path : paths) {
    auto report = sluice::parity::RunParity(path, goldens, options);
    if (!report.ok()) {
      std::fprintf(stderr, "parity: %s: %s\n", path.c_str(),
                   std::string(report.status().message()).c_str());
      ok = false;
      continue;
    }
    ok = ok && report->passed;
    if (absl::GetFlag(FLAGS_require_identical)) {
      ok = ok && (!report->comparisons.empty() || !report->batched.empty());
      for (const auto& c : report->comparisons) ok = ok && c.max == 0;
      for (const auto& b : report->batched) ok = ok && b.vs_alone.max == 0;
    }
    reports.push_back(*std::move(report));
  }
  std::string text = sluice::parity::FormatReport(reports);
  if (!ok && reports.empty()) {
    text = "worst_max=nan worst_rms=nan worst_median=nan top1_agree=0/0\n";
  }
  std::fputs(text.c_str(), stdout);
  return ok ? 0 : 1;
}
