// batch_decode: aggregate decode throughput of B sequences stepped together
// (issue 19), the engine's batched forward pass without the daemon.
//
//   batch_decode --model M.gguf --backend cuda --sequences 1,8,32
//       --prompt_tokens 128 --decode_tokens 64 [expert flags] [--json]
//
// For each B of --sequences: B sequences each prefill their own prompt of
// --prompt_tokens (alone, one pass each), then --warmup_steps and
// --decode_tokens steps each evaluate one token of every sequence as ONE
// Model::ForwardBatch. A sequence's next token is drawn from a seeded
// generator (as sampling at a very high temperature would), so the routing
// is what the model gives random text. Prints per B: aggregate decode tok/s
// (B x steps / time), the median and p99 step, distinct experts acquired per
// step and MoE layer, and the expert cache's misses over the timed steps;
// one JSON object per B with --json.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "loader/model_files.h"
#include "model/engine.h"
#include "model/model.h"
#include "nlohmann/json.hpp"
#include "tools/engine_flags.h"
#include "tools/plan_experts.h"
#include "tools/routing_flag.h"

ABSL_FLAG(std::string, model, "", "GGUF model (or any shard of a split set)");
ABSL_FLAG(std::string, sequences, "1,8", "batch sizes to measure, comma-separated");
ABSL_FLAG(int, prompt_tokens, 128, "prompt tokens of each sequence");
ABSL_FLAG(int, decode_tokens, 64, "timed decode steps");
ABSL_FLAG(int, warmup_steps, 4, "untimed decode steps first");
ABSL_FLAG(int, threads, 1, "CPU threads");
ABSL_FLAG(uint64_t, seed, 1, "token generator seed");
ABSL_FLAG(bool, json, false, "one JSON object per batch size on stdout");
ABSL_FLAG(bool, profile, false,
          "time the sections of each batch pass (CUDA; no decode graph) and print their "
          "sums per pass at the end");

namespace {

using Clock = std::chrono::steady_clock;
using SlotCounters = sluice::memory::SlotCacheCounters;

void Log(const std::string& line) { std::fprintf(stderr, "batch_decode: %s\n", line.c_str()); }

int Fail(const absl::Status& s) {
  Log(s.ToString());
  return 1;
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Result {
  int sequences = 0;
  int steps = 0;
  double decode_s = 0;
  double prefill_s = 0;
  double step_ms_median = 0;
  double step_ms_p99 = 0;
  double experts_per_layer_step = 0;  // mean distinct experts, MoE layers
  uint64_t misses = 0;
  uint64_t hits = 0;
};

absl::StatusOr<Result> Measure(const sluice::Engine& engine, int b, int context) {
  const sluice::Model& model = engine.model();
  const int64_t v = model.info().n_vocab;
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed) + static_cast<uint64_t>(b));
  const auto token = [&] { return static_cast<int32_t>(1 + rng() % (v - 1)); };
  std::vector<std::unique_ptr<sluice::SequenceState>> states;
  std::vector<float> logits;
  Result r;
  r.sequences = b;
  const auto p0 = Clock::now();
  for (int i = 0; i < b; ++i) {
    auto st = model.CreateState(context);
    if (!st.ok()) return st.status();
    std::vector<int32_t> prompt(absl::GetFlag(FLAGS_prompt_tokens));
    for (int32_t& t : prompt) t = token();
    if (absl::Status s = model.Forward(prompt, **st, sluice::LogitRows::kLast, &logits); !s.ok()) {
      return s;
    }
    states.push_back(*std::move(st));
  }
  r.prefill_s = Seconds(p0, Clock::now());
  std::vector<int32_t> next(b);
  std::vector<sluice::BatchChunk> chunks(b);
  const auto step = [&](sluice::BatchForwardStats* stats) -> absl::Status {
    for (int i = 0; i < b; ++i) {
      next[i] = token();
      chunks[i] = {states[i].get(), states[i]->position(), absl::MakeConstSpan(&next[i], 1),
                   sluice::LogitRows::kLast};
    }
    auto done = model.ForwardBatch(chunks, &logits);
    if (!done.ok()) return done.status();
    *stats = *std::move(done);
    return absl::OkStatus();
  };
  sluice::BatchForwardStats stats;
  for (int s = 0; s < absl::GetFlag(FLAGS_warmup_steps); ++s) {
    if (absl::Status st = step(&stats); !st.ok()) return st;
  }
  const SlotCounters before = model.ExpertStats().counters;
  std::vector<double> step_ms;
  int64_t acquired = 0, layer_steps = 0;
  const auto d0 = Clock::now();
  for (int s = 0; s < absl::GetFlag(FLAGS_decode_tokens); ++s) {
    const auto t0 = Clock::now();
    if (absl::Status st = step(&stats); !st.ok()) return st;
    step_ms.push_back(Seconds(t0, Clock::now()) * 1e3);
    for (int32_t n : stats.experts_per_layer) {
      if (n == 0) continue;
      acquired += n;
      ++layer_steps;
    }
  }
  r.decode_s = Seconds(d0, Clock::now());
  r.steps = static_cast<int>(step_ms.size());
  const SlotCounters after = model.ExpertStats().counters;
  r.misses = after.misses - before.misses;
  r.hits = after.hits - before.hits;
  if (!step_ms.empty()) {
    std::sort(step_ms.begin(), step_ms.end());
    r.step_ms_median = step_ms[step_ms.size() / 2];
    r.step_ms_p99 = step_ms[std::min(step_ms.size() - 1, step_ms.size() * 99 / 100)];
  }
  r.experts_per_layer_step = layer_steps > 0 ? static_cast<double>(acquired) / layer_steps : 0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("batch_decode --model M.gguf --sequences 1,8,32 [flags]");
  absl::ParseCommandLine(argc, argv);
  std::vector<int> sizes;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_sequences), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1 || n > static_cast<int>(sluice::Model::kMaxMicroBatch)) {
      return Fail(absl::InvalidArgumentError(
          "--sequences: \"" + std::string(part) + "\" is not a batch size in [1, 512]"));
    }
    sizes.push_back(n);
  }
  if (absl::GetFlag(FLAGS_prompt_tokens) < 1 || absl::GetFlag(FLAGS_decode_tokens) < 1 ||
      absl::GetFlag(FLAGS_warmup_steps) < 0) {
    return Fail(absl::InvalidArgumentError(
        "--prompt_tokens and --decode_tokens must be >= 1, --warmup_steps >= 0"));
  }
  auto files = sluice::ModelFiles::Open(absl::GetFlag(FLAGS_model));
  if (!files.ok()) return Fail(files.status());
  auto flags = sluice::tools::EngineFlagsFromFlags(Log);
  if (!flags.ok()) return Fail(flags.status());
  const int context = absl::GetFlag(FLAGS_prompt_tokens) + absl::GetFlag(FLAGS_warmup_steps) +
                      absl::GetFlag(FLAGS_decode_tokens);
  sluice::EngineOptions options;
  options.threads = absl::GetFlag(FLAGS_threads);
  options.context_length = context;
  options.backend = flags->backend;
  options.device = flags->device;
  options.experts = flags->experts;
  options.profile = absl::GetFlag(FLAGS_profile);
  if (absl::Status s = sluice::tools::PlanExperts(**files, &options, Log); !s.ok()) {
    return Fail(s);
  }
  int largest = 0;
  for (int b : sizes) largest = std::max(largest, b);
  auto routing = sluice::tools::RoutingFromFlags(**files, static_cast<int64_t>(largest) * context);
  if (!routing.ok()) return Fail(routing.status());
  options.routing_source = routing->get();
  auto engine = sluice::Engine::Create(**files, options);
  if (!engine.ok()) return Fail(engine.status());
  const std::string routing_name = sluice::tools::RoutingFlag();
  for (int b : sizes) {
    auto r = Measure(**engine, b, context);
    if (!r.ok()) return Fail(r.status());
    const double tok_s = r->decode_s > 0 ? r->sequences * r->steps / r->decode_s : 0;
    std::fprintf(stderr,
                 "sequences=%d steps=%d decode_tok_s=%.1f per_stream_tok_s=%.1f "
                 "step_ms_median=%.3f step_ms_p99=%.3f experts_per_layer_step=%.1f "
                 "misses=%llu hits=%llu prefill_s=%.2f routing=%s\n",
                 r->sequences, r->steps, tok_s, tok_s / r->sequences, r->step_ms_median,
                 r->step_ms_p99, r->experts_per_layer_step,
                 static_cast<unsigned long long>(r->misses),
                 static_cast<unsigned long long>(r->hits), r->prefill_s, routing_name.c_str());
    if (absl::GetFlag(FLAGS_json)) {
      std::printf(
          "{\"sequences\": %d, \"steps\": %d, \"decode_tok_s\": %.2f, \"step_ms_median\": %.4f, "
          "\"step_ms_p99\": %.4f, \"experts_per_layer_step\": %.2f, \"misses\": %llu, "
          "\"hits\": %llu, \"prefill_s\": %.3f, \"routing\": %s}\n",
          r->sequences, r->steps, tok_s, r->step_ms_median, r->step_ms_p99,
          r->experts_per_layer_step, static_cast<unsigned long long>(r->misses),
          static_cast<unsigned long long>(r->hits), r->prefill_s,
          nlohmann::json(routing_name).dump().c_str());
      std::fflush(stdout);
    }
  }
  if (options.profile) {
    // "<phase>.<section>" sums over every pass of all batch sizes.
    const sluice::BackendStats stats = (*engine)->model().Stats();
    double passes = 0;
    for (const auto& [key, v] : stats.profile) {
      if (key == "batch.calls") passes = v;
    }
    for (const auto& [key, ms] : stats.profile) {
      if (key.rfind("batch.", 0) != 0 || key == "batch.calls") continue;
      std::fprintf(stderr, "profile %-28s %9.3f ms/pass\n", key.c_str(),
                   passes > 0 ? ms / passes : 0.0);
    }
  }
  return 0;
}
