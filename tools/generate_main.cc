// generate: prompt text in, streamed text out, on the engine's CPU backend
// (the default) or, where CUDA is built, its CUDA backend (--backend cuda).
//
//   bazel run //tools:generate -- --model M.gguf --prompt "Hello"
//       [--chat] [--temperature 0.7 --top-k 40 --top-p 0.9 --min-p 0.05
//        --repeat-penalty 1.1 --seed 1] [--max-tokens 64] [--threads 2]
//       [--record_trace FILE] [--routing KIND] [--backend cuda [--device N]]
//
// Flags may be spelled with '-' or '_' (--top-k or --top_k). At the end it
// prints to stderr: prompt/generated tokens, the finish reason, time to
// first token, prefill and decode tokens/s, and the process's peak RSS
// (VmHWM) and anonymous RSS (RssAnon) read from /proc/self/status after
// decoding, next to the session's KV/state size.
//
// Benchmarks: --expert_slots / --expert_arena_fraction / --expert_policy /
// --host_tier_bytes / --expert_prefetch / --expert_miss_policy /
// --expert_host_threads (config/expert_flags.h, the same flags and meanings
// as sluiced's: on CUDA the fit planner runs first, as in the worker) set
// EngineOptions::experts;
// --warmup_tokens N runs one generation of N tokens first (not measured; the
// session is then reset, the expert cache keeps what it loaded); --json
// prints one JSON object on stdout instead of the text (tools/generate_report.h,
// fields in docs/BENCHMARKS.md); --routing trace:FILE | realistic | uniform | ...
// forces which experts each token uses (tools/routing_flag.h).
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "loader/model_files.h"
#include "model/chat_template.h"
#include "model/engine.h"
#include "tools/generate_report.h"
#include "tools/routing_flag.h"
#include "model/routing_trace_recorder.h"
#include "config/flag_alias.h"
#include "tools/engine_flags.h"
#include "tools/plan_experts.h"

ABSL_FLAG(std::string, model, "", "GGUF model (or any shard of a split set)");
ABSL_FLAG(std::string, prompt, "", "prompt text");
ABSL_FLAG(bool, chat, false,
          "wrap the prompt as a ChatML user turn plus the assistant header");
ABSL_FLAG(float, temperature, 0.0f, "0 = greedy");
ABSL_FLAG(int, top_k, 0, "0 = off");
ABSL_FLAG(float, top_p, 1.0f, "1 = off");
ABSL_FLAG(float, min_p, 0.0f, "0 = off");
ABSL_FLAG(float, repeat_penalty, 1.0f, "1 = off");
ABSL_FLAG(uint64_t, seed, 0, "sampler seed");
ABSL_FLAG(int, max_tokens, 64, "tokens to generate at most");
ABSL_FLAG(int, threads, 1, "CPU threads");
ABSL_FLAG(int, prompt_tokens, 0,
          "instead of --prompt: a synthetic prompt of this many token ids "
          "(id i = 1 + (i * 7919) mod (n_vocab - 1)), for prompt-length "
          "benchmarks");
ABSL_FLAG(bool, profile, false,
          "CUDA: time each section of the forward pass (no decode graph) "
          "and print milliseconds per call of prefill and decode");
ABSL_FLAG(int, context_length, sluice::EngineOptions{}.context_length,
          "tokens per sequence, prompt plus generated (the KV cache's size), as sluiced's");
ABSL_FLAG(int, ctx, sluice::EngineOptions{}.context_length, "deprecated: --context_length");
ABSL_FLAG(std::string, stop, "", "stop strings, separated by '|'");
ABSL_FLAG(bool, ignore_eos, false, "keep generating past end-of-generation");
ABSL_FLAG(int, warmup_tokens, 0,
          "first run one unmeasured generation of this many tokens");
ABSL_FLAG(int, time_decode_kernels, 0,
          "after generating, replay each op of the decode step alone this many "
          "times (median; caches flushed before each) and print its time, "
          "bytes and rate (CUDA); 0: off");
ABSL_FLAG(bool, json, false,
          "print one JSON object (timings, memory, expert counters) on stdout "
          "instead of the generated text");
ABSL_FLAG(std::string, record_trace, "",
          "write every MoE block's routing to this file (a routing trace for "
          "tools/slotsim; docs/SLOT_CACHE.md)");

namespace {

// Value of a "Key:   123 kB" line of /proc/self/status, in kB (-1 if absent).
long StatusKb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  }
  return -1;
}

// The process's page faults so far.
sluice::tools::GenerateReport::Faults Faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {u.ru_minflt, u.ru_majflt};
}

// absl flags take '_' in names; accept the '-' spelling too.
std::vector<char*> NormalizeFlagNames(int argc, char** argv,
                                      std::vector<std::string>& storage) {
  storage.assign(argv, argv + argc);
  for (std::string& a : storage) {
    if (a.rfind("--", 0) != 0) continue;
    const size_t end = std::min(a.find('='), a.size());
    for (size_t i = 2; i < end; ++i) {
      if (a[i] == '-') a[i] = '_';
    }
  }
  std::vector<char*> out;
  for (std::string& a : storage) out.push_back(a.data());
  return out;
}

absl::StatusOr<sluice::GenerateParams> ParamsFromFlags(
    const sluice::Tokenizer& tok) {
  sluice::GenerateParams params;
  const std::string prompt = absl::GetFlag(FLAGS_prompt);
  if (absl::GetFlag(FLAGS_chat)) {
    const sluice::ChatMessage user{"user", prompt};
    auto ids = sluice::EncodeChatML(tok, absl::MakeConstSpan(&user, 1), true);
    if (!ids.ok()) return ids.status();
    params.prompt = *std::move(ids);
  } else if (const int n = absl::GetFlag(FLAGS_prompt_tokens); n > 0) {
    for (int i = 0; i < n; ++i) {
      params.prompt.push_back(static_cast<int32_t>(
          1 + (static_cast<int64_t>(i) * 7919) % (tok.n_vocab() - 1)));
    }
  } else {
    params.prompt = tok.Encode(prompt, /*parse_special=*/true);
  }
  params.sampler.temperature = absl::GetFlag(FLAGS_temperature);
  params.sampler.top_k = absl::GetFlag(FLAGS_top_k);
  params.sampler.top_p = absl::GetFlag(FLAGS_top_p);
  params.sampler.min_p = absl::GetFlag(FLAGS_min_p);
  params.sampler.repetition_penalty = absl::GetFlag(FLAGS_repeat_penalty);
  params.sampler.seed = absl::GetFlag(FLAGS_seed);
  params.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  params.stop_at_eos = !absl::GetFlag(FLAGS_ignore_eos);
  if (!absl::GetFlag(FLAGS_stop).empty()) {
    params.stop = absl::StrSplit(absl::GetFlag(FLAGS_stop), '|');
  }
  return params;
}

void Log(const std::string& line) { std::fprintf(stderr, "generate: %s\n", line.c_str()); }

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "generate: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

// The decode step op by op (Model::TimeDecodeKernels), then the sum.
absl::Status PrintKernelTimes(const sluice::Model& model, sluice::SequenceState& state,
                              int reps) {
  auto times = model.TimeDecodeKernels(state, reps);
  if (!times.ok()) return times.status();
  double us = 0;
  uint64_t bytes = 0;
  int kernels = 0;
  for (const sluice::KernelTiming& t : *times) {
    std::fprintf(stderr, "kernel %-22s launches=%d us=%8.2f MB=%8.3f GB_s=%7.1f %s\n",
                 t.label.c_str(), t.kernels, t.us, t.bytes / 1e6,
                 t.us > 0 ? t.bytes / (t.us * 1e3) : 0.0, t.launch.c_str());
    us += t.us;
    bytes += t.bytes;
    kernels += t.kernels;
  }
  std::fprintf(stderr, "kernel_total ops=%zu launches=%d us=%.1f MB=%.2f GB_s=%.1f\n",
               times->size(), kernels, us, bytes / 1e6, us > 0 ? bytes / (us * 1e3) : 0.0);
  // The same times summed by label without its layer ("3.moe.down" counts
  // as "moe.down"), largest first.
  std::map<std::string, std::pair<double, int>> by_label;
  for (const sluice::KernelTiming& t : *times) {
    std::string label = t.label;
    const size_t dot = label.find('.');
    if (dot != std::string::npos && dot > 0 &&
        label.find_first_not_of("0123456789") == dot) {
      label = label.substr(dot + 1);
    }
    by_label[label].first += t.us;
    by_label[label].second += t.kernels;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> sums(by_label.begin(),
                                                                   by_label.end());
  std::sort(sums.begin(), sums.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  for (const auto& [label, sum] : sums) {
    std::fprintf(stderr, "kernel_sum %-28s launches=%d us=%8.2f\n", label.c_str(),
                 sum.second, sum.first);
  }
  return absl::OkStatus();
}

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("generate --model M.gguf --prompt TEXT [flags]");
  std::vector<std::string> storage;
  std::vector<char*> args = NormalizeFlagNames(argc, argv, storage);
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());

  auto files = sluice::ModelFiles::Open(absl::GetFlag(FLAGS_model));
  if (!files.ok()) return Fail(files.status());
  sluice::EngineOptions options;
  options.threads = absl::GetFlag(FLAGS_threads);
  auto context = sluice::config::ResolveRenamedFlag(FLAGS_context_length, FLAGS_ctx, Log);
  if (!context.ok()) return Fail(context.status());
  options.context_length = *context;
  auto flags = sluice::tools::EngineFlagsFromFlags(Log);
  if (!flags.ok()) return Fail(flags.status());
  options.backend = flags->backend;
  options.device = flags->device;
  options.profile = absl::GetFlag(FLAGS_profile);
  options.experts = flags->experts;
  if (absl::Status s = sluice::tools::PlanExperts(**files, &options, Log); !s.ok()) {
    return Fail(s);
  }
  std::unique_ptr<sluice::RoutingTraceRecorder> recorder;
  if (!absl::GetFlag(FLAGS_record_trace).empty()) {
    recorder = sluice::RoutingTraceRecorder::Create(absl::GetFlag(FLAGS_record_trace));
    options.routing_observer = recorder.get();
  }
  // A session holds at most context_length tokens; the warm-up's come on top.
  auto routing = sluice::tools::RoutingFromFlags(
      **files, options.context_length + absl::GetFlag(FLAGS_warmup_tokens));
  if (!routing.ok()) return Fail(routing.status());
  options.routing_source = routing->get();
  auto engine = sluice::Engine::Create(**files, options);
  if (!engine.ok()) return Fail(engine.status());
  if (recorder != nullptr) {
    if (absl::Status s = recorder->Start((*engine)->info()); !s.ok()) return Fail(s);
  }
  const sluice::Tokenizer& tok = (*engine)->tokenizer();

  auto params = ParamsFromFlags(tok);
  if (!params.ok()) return Fail(params.status());

  auto made = (*engine)->NewSession();
  if (!made.ok()) return Fail(made.status());
  std::unique_ptr<sluice::Session> session = *std::move(made);
  const bool json = absl::GetFlag(FLAGS_json);
  sluice::tools::GenerateReport report;
  if (const int warmup = absl::GetFlag(FLAGS_warmup_tokens); warmup > 0) {
    sluice::GenerateParams warm = *params;
    warm.max_tokens = warmup;
    auto done = sluice::Generate(*session, warm,
                                 [](int32_t, std::string_view) { return true; });
    if (!done.ok()) return Fail(done.status());
    session->Reset();
    report.warmup_tokens = warmup;
  }
  report.before_prefill = (*engine)->model().ExpertStats().counters;
  report.after_prefill = report.before_prefill;
  long anon_decoding_kb = -1;
  int calls = 0;
  const sluice::tools::GenerateReport::Faults start_faults = Faults();
  sluice::tools::GenerateReport::Faults first_token_faults = start_faults;
  auto result = sluice::Generate(
      *session, *params, [&](int32_t, std::string_view piece) {
        if (json) {
          // The first token comes right after prefill: the split point of
          // the expert counters (read once, so decode timing barely moves).
          if (calls == 0) {
            report.after_prefill = (*engine)->model().ExpertStats().counters;
            first_token_faults = Faults();
          }
        } else {
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
        }
        // Sampled, not read every token: the read would show in tok/s.
        if (calls++ % 8 == 0) {
          anon_decoding_kb = std::max(anon_decoding_kb, StatusKb("RssAnon"));
        }
        return true;
      });
  const sluice::tools::GenerateReport::Faults end_faults = Faults();
  report.prefill_faults = first_token_faults.Minus(start_faults);
  report.decode_faults = end_faults.Minus(first_token_faults);
  if (!json) std::printf("\n");
  if (!result.ok()) return Fail(result.status());
  if (recorder != nullptr) {
    if (absl::Status s = recorder->Close(); !s.ok()) return Fail(s);
  }
  std::fprintf(stderr,
               "prompt_tokens=%d generated_tokens=%d finish=%s ttft_ms=%.2f "
               "prefill_tok_s=%.1f decode_tok_s=%.1f\n",
               result->prompt_tokens, result->generated_tokens,
               std::string(sluice::FinishReasonName(result->finish_reason)).c_str(),
               result->ttft_s * 1e3, result->prefill_tok_per_s,
               result->decode_tok_per_s);
  std::fprintf(stderr,
               "peak_rss_kb=%ld rss_anon_kb=%ld (max while decoding %ld) "
               "kv_state_kb=%llu model_file_kb=%llu threads=%d\n",
               StatusKb("VmHWM"), StatusKb("RssAnon"), anon_decoding_kb,
               static_cast<unsigned long long>((*engine)->SessionStateBytes() / 1024),
               static_cast<unsigned long long>((*files)->total_file_bytes() / 1024),
               options.threads);
  const sluice::BackendStats stats = (*engine)->model().Stats();
  if (!stats.device_memory.empty()) {
    std::fprintf(stderr, "device=%s", std::string(sluice::BackendName(options.backend)).c_str());
    uint64_t total = 0;
    for (const auto& [kind, bytes] : stats.device_memory) {
      std::fprintf(stderr, " device_%s_kb=%llu", kind.c_str(),
                   static_cast<unsigned long long>(bytes / 1024));
      total += bytes;
    }
    std::fprintf(stderr,
                 " device_kv_state_kb=%llu device_total_kb=%llu "
                 "device_in_use_measured_kb=%llu launches_per_decode=%lld "
                 "decode_graph=%d\n",
                 static_cast<unsigned long long>((*engine)->SessionStateBytes() / 1024),
                 static_cast<unsigned long long>(
                     (total + (*engine)->SessionStateBytes()) / 1024),
                 static_cast<unsigned long long>(stats.device_in_use_measured / 1024),
                 static_cast<long long>(stats.launches_per_decode),
                 stats.decode_graph ? 1 : 0);
  }
  // "<phase>.<section>" sums, printed per call of their phase.
  double phase_calls[2] = {0, 0};
  for (const auto& [key, v] : stats.profile) {
    if (key == "prefill.calls") phase_calls[0] = v;
    if (key == "decode.calls") phase_calls[1] = v;
  }
  for (const auto& [key, ms] : stats.profile) {
    if (key.size() > 6 && key.substr(key.size() - 6) == ".calls") continue;
    const double n = key.rfind("prefill.", 0) == 0 ? phase_calls[0] : phase_calls[1];
    std::fprintf(stderr, "profile %-28s %9.3f ms/call\n", key.c_str(),
                 n > 0 ? ms / n : 0.0);
  }
  if (json) {
    report.model_path = absl::GetFlag(FLAGS_model);
    report.device = std::string(sluice::BackendName(options.backend));
    report.threads = options.threads;
    report.routing = sluice::tools::RoutingFlag();
    // As asked (the flags), not as planned: the plan is on stderr.
    report.expert_options = flags->experts;
    report.result = *result;
    report.peak_rss_kb = StatusKb("VmHWM");
    report.rss_anon_kb = StatusKb("RssAnon");
    report.rss_anon_decoding_max_kb = anon_decoding_kb;
    report.kv_state_bytes = (*engine)->SessionStateBytes();
    report.model_file_bytes = (*files)->total_file_bytes();
    report.stats = stats;
    std::printf("%s\n", sluice::tools::GenerateReportJson(report).c_str());
  }
  if (const int reps = absl::GetFlag(FLAGS_time_decode_kernels); reps > 0) {
    if (absl::Status s = PrintKernelTimes((*engine)->model(), session->state(), reps); !s.ok()) {
      return Fail(s);
    }
  }
  if (recorder != nullptr) {
    std::fprintf(stderr, "routing_trace=%s records=%llu\n",
                 absl::GetFlag(FLAGS_record_trace).c_str(),
                 static_cast<unsigned long long>(recorder->records()));
  }
  return 0;
}
