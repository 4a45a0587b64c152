#include "clients/sluicectl.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <iomanip>
#include <iterator>
#include <memory>
#include <optional>
#include <thread>

#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "clients/plan.h"
#include "clients/sluicectl_flags.h"
#include "clients/top.h"
#include "clients/proto/health.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "proto/sluice/v1/sluice.grpc.pb.h"

namespace sluice::ctl {
namespace {

constexpr char kUsage[] = R"(usage: sluicectl [--addr=HOST:PORT] [--timeout=SECONDS] COMMAND ...

commands:
  health                       SERVING / NOT_SERVING (exit 1 unless serving)
  load PATH [--model_id=ID] [--threads=N] [--context_length=N]
                               progress on stderr while it loads (a bar on a
                               terminal, a line per phase and every 2 s otherwise)
  unload [MODEL_ID]
  models                       the loaded model and its state
  generate PROMPT... [--chat] [--system=TEXT] [--json] [--max_tokens=N]
           [--temperature=F] [--top_k=N] [--top_p=F] [--min_p=F]
           [--repetition_penalty=F] [--repetition_window=N] [--seed=N]
           [--stop=TEXT] [--ignore_eos] [--parse_special] [--model_id=ID]
                               streams text as it is generated; --json prints
                               one JSON object per streamed message;
           [--stats | --stats=token]
                               after the text, the request's expert slot cache
                               figures (hit rate, bytes per tier, prefetch
                               accuracy, per layer); =token: also per token
  tokenize TEXT... [--parse_special] [--json]
  metrics                      Prometheus text of the daemon's metrics
  top [--interval=SECONDS] [--iterations=N] [--plain]
                               a live view: requests running and waiting,
                               tokens/s, TTFT and inter-token latency, expert
                               hits per tier and per layer, GB/s moved, memory;
                               redrawn every interval (default 1) until ^C or N
                               frames; --plain: frames one after another, no
                               screen clearing (the default when not a terminal)
  plan MODEL [--device_memory=BYTES|auto] [--host_memory=BYTES|auto]
       [--context_length=N] [--sessions=N] [--kv_cache_tokens=N] [--expert_arena_fraction=F | --expert_slots=N]
       [--host_tier_bytes=BYTES] [--expert_tiers=inclusive|exclusive]
       [--expert_profile=FILE]
       [--disk_bytes_per_s=R] [--pcie_bytes_per_s=R] [--hbm_bytes_per_s=R]
                               where the model's bytes would go (device,
                               expert arena, host tier), without a daemon and
                               without loading it; exit 1 when refused. Then
                               the cold-start time and a decode tok/s upper
                               bound, uniform routing or FILE's counts; rates
                               in bytes/s, defaults the H200's: disk 1.5e9,
                               PCIe 55.2e9 (pinned), HBM 4.0e12
TLS: --tls_ca_file=CA.pem [--tls_cert_file=C.pem --tls_key_file=K.pem]
API key: --api_key_file=FILE (the key itself; sent as 'authorization: Bearer KEY')
defaults: --addr=127.0.0.1:50051, --timeout=0 (no deadline), plaintext
)";

const char* CodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {
      "OK",        "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",  "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",       "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : "UNKNOWN_CODE";
}

int Fail(std::ostream& err, const grpc::Status& s) {
  err << "sluicectl: " << CodeName(s.error_code()) << ": " << s.error_message() << "\n";
  return 1;
}

std::string Json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

class Command {
 public:
  Command(const Args& args, std::ostream& out, std::ostream& err)
      : args_(args), out_(out), err_(err) {}

  // The command's name first, so that an unknown command is reported before
  // any flag's value; then SetFlags, the channel and the call.
  int Dispatch();

 private:
  // TLS when --tls_ca_file is given (the CA that signed the daemon's
  // certificate), with a client certificate when --tls_cert_file/--tls_key_file.
  std::shared_ptr<grpc::ChannelCredentials> Credentials() {
    const std::string ca = absl::GetFlag(FLAGS_tls_ca_file);
    if (ca.empty()) return grpc::InsecureChannelCredentials();
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadFile(ca);
    const std::string cert = absl::GetFlag(FLAGS_tls_cert_file);
    const std::string key = absl::GetFlag(FLAGS_tls_key_file);
    if (!cert.empty()) options.pem_cert_chain = ReadFile(cert);
    if (!key.empty()) options.pem_private_key = ReadFile(key);
    return grpc::SslCredentials(options);
  }
  std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    if (!in) err_ << "sluicectl: cannot read " << path << "\n";
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void Prepare(grpc::ClientContext* ctx) {
    if (const std::string file = absl::GetFlag(FLAGS_api_key_file); !file.empty()) {
      const std::string key(absl::StripAsciiWhitespace(ReadFile(file)));
      ctx->AddMetadata("authorization", "Bearer " + key);
    }
    if (const std::optional<double> seconds = absl::GetFlag(FLAGS_timeout);
        seconds && *seconds > 0) {
      ctx->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(*seconds * 1000)));
    }
  }
  int Health();
  int Load();
  int Unload();
  int Models();
  int Generate();
  bool BuildGenerate(v1::GenerateRequest* request);
  // --stats: the request's expert cache figures, on stderr like the summary.
  void PrintExpertStats(const v1::GenerateDone& done);
  int Tokenize();
  int Metrics();
  int Top();
  // While a LoadModel call runs on another thread: its progress on stderr.
  void ShowLoadProgress(const std::atomic<bool>& done);
  void PrintModel(const v1::ModelInfo& m);

  const Args& args_;
  std::ostream& out_;
  std::ostream& err_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Sluice::Stub> stub_;
};

int Command::Dispatch() {
  static constexpr std::pair<const char*, int (Command::*)()> kCommands[] = {
      {"health", &Command::Health},     {"load", &Command::Load},
      {"unload", &Command::Unload},     {"models", &Command::Models},
      {"generate", &Command::Generate}, {"tokenize", &Command::Tokenize},
      {"metrics", &Command::Metrics},   {"top", &Command::Top}};
  const auto* command = std::find_if(std::begin(kCommands), std::end(kCommands),
                                     [&](const auto& c) { return args_.command == c.first; });
  if (command == std::end(kCommands)) {
    err_ << "sluicectl: unknown command '" << args_.command << "'\n" << kUsage;
    return 2;
  }
  if (absl::Status s = SetFlags(args_.flags); !s.ok()) {
    err_ << "sluicectl: " << s.message() << "\n";
    return 2;
  }
  channel_ = grpc::CreateChannel(absl::GetFlag(FLAGS_addr), Credentials());
  stub_ = v1::Sluice::NewStub(channel_);
  return (this->*command->second)();
}

int Command::Health() {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  Prepare(&ctx);
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = health->Check(&ctx, req, &resp);
  if (!s.ok()) return Fail(err_, s);
  out_ << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status()) << "\n";
  return resp.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

void Command::PrintModel(const v1::ModelInfo& m) {
  if (absl::GetFlag(FLAGS_json)) {
    out_ << Json(m) << "\n";
    return;
  }
  out_ << m.model_id() << "\t" << v1::ModelState_Name(m.state()) << "\t" << m.architecture()
       << "\tshards=" << m.shard_count() << "\ttensor_bytes=" << m.tensor_bytes()
       << "\tcontext=" << m.context_length() << "\tvocab=" << m.vocab_size() << "\t"
       << m.path();
  if (!m.last_error().empty()) out_ << "\tlast_error=" << m.last_error();
  out_ << "\n";
}

int Command::Load() {
  if (args_.positional.size() != 1) {
    err_ << "sluicectl: load takes one PATH\n";
    return 2;
  }
  v1::LoadModelRequest req;
  req.set_path(args_.positional[0]);
  req.set_model_id(absl::GetFlag(FLAGS_model_id));
  req.set_threads(absl::GetFlag(FLAGS_threads));
  req.set_context_length(absl::GetFlag(FLAGS_context_length).value_or(0));
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::LoadModelResponse resp;
  grpc::Status s;
  std::atomic<bool> done{false};
  std::thread call([&] {
    s = stub_->LoadModel(&ctx, req, &resp);
    done = true;
  });
  ShowLoadProgress(done);
  call.join();
  if (!s.ok()) return Fail(err_, s);
  PrintModel(resp.model());
  if (!resp.replacement().empty()) out_ << "replacement: " << resp.replacement() << "\n";
  return 0;
}

void Command::ShowLoadProgress(const std::atomic<bool>& done) {
  // On a terminal one line redrawn in place; otherwise a line per phase and
  // every 2 s, which a log keeps readable.
  const bool terminal = &err_ == &std::cerr && isatty(STDERR_FILENO);
  std::string last_phase;
  absl::Time last_line = absl::InfinitePast();
  bool drew = false;
  while (!done) {
    absl::SleepFor(absl::Milliseconds(200));
    grpc::ClientContext ctx;
    Prepare(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::ListModelsResponse models;
    if (done || !stub_->ListModels(&ctx, v1::ListModelsRequest(), &models).ok() ||
        !models.has_loading()) {
      continue;
    }
    const v1::LoadProgress& p = models.loading();
    if (terminal) {
      err_ << "\r\x1b[K" << LoadProgressLine(p, /*bar=*/true) << std::flush;
      drew = true;
    } else if (p.phase() != last_phase || absl::Now() - last_line >= absl::Seconds(2)) {
      err_ << "loading: " << LoadProgressLine(p, /*bar=*/false) << "\n" << std::flush;
      last_phase = p.phase();
      last_line = absl::Now();
    }
  }
  if (drew) err_ << "\r\x1b[K" << std::flush;
}

int Command::Unload() {
  v1::UnloadModelRequest req;
  if (!args_.positional.empty()) req.set_model_id(args_.positional[0]);
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::UnloadModelResponse resp;
  grpc::Status s = stub_->UnloadModel(&ctx, req, &resp);
  return s.ok() ? 0 : Fail(err_, s);
}

int Command::Models() {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::ListModelsResponse resp;
  grpc::Status s = stub_->ListModels(&ctx, v1::ListModelsRequest(), &resp);
  if (!s.ok()) return Fail(err_, s);
  if (resp.models().empty() && !absl::GetFlag(FLAGS_json)) out_ << "no model loaded\n";
  for (const v1::ModelInfo& m : resp.models()) PrintModel(m);
  return 0;
}

bool Command::BuildGenerate(v1::GenerateRequest* req) {
  const std::string text = absl::StrJoin(args_.positional, " ");
  req->set_model_id(absl::GetFlag(FLAGS_model_id));
  if (absl::GetFlag(FLAGS_chat)) {
    if (const std::string system = absl::GetFlag(FLAGS_system); !system.empty()) {
      v1::ChatMessage* m = req->mutable_chat()->add_messages();
      m->set_role("system");
      m->set_content(system);
    }
    v1::ChatMessage* m = req->mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(text);
  } else {
    req->set_prompt(text);
  }
  req->set_parse_special(absl::GetFlag(FLAGS_parse_special));
  req->set_ignore_eos(absl::GetFlag(FLAGS_ignore_eos));
  if (const std::string stop = absl::GetFlag(FLAGS_stop); !stop.empty()) req->add_stop(stop);
  req->set_max_tokens(absl::GetFlag(FLAGS_max_tokens));
  v1::SamplingParams* sp = req->mutable_sampling();
  if (auto v = absl::GetFlag(FLAGS_temperature)) sp->set_temperature(*v);
  if (auto v = absl::GetFlag(FLAGS_top_k)) sp->set_top_k(*v);
  if (auto v = absl::GetFlag(FLAGS_top_p)) sp->set_top_p(*v);
  if (auto v = absl::GetFlag(FLAGS_min_p)) sp->set_min_p(*v);
  if (auto v = absl::GetFlag(FLAGS_repetition_penalty)) sp->set_repetition_penalty(*v);
  if (auto v = absl::GetFlag(FLAGS_repetition_window)) sp->set_repetition_window(*v);
  if (auto v = absl::GetFlag(FLAGS_seed)) sp->set_seed(*v);
  const std::string stats = absl::GetFlag(FLAGS_stats);
  if (!stats.empty() && stats != "true" && stats != "token") {
    err_ << "sluicectl: --stats='" << stats << "': use --stats or --stats=token\n";
    return false;
  }
  req->set_expert_token_stats(stats == "token");
  return true;
}

void Command::PrintExpertStats(const v1::GenerateDone& d) {
  if (!d.has_experts()) {
    err_ << "[experts] not streaming (every expert resident, or read in place)\n";
    return;
  }
  const v1::ExpertRequestStats& e = d.experts();
  err_ << std::fixed << std::setprecision(3) << "[experts] lookups=" << e.lookups()
       << " hits=" << e.hits() << " misses=" << e.misses() << " hit_rate=" << e.hit_rate()
       << " forced=" << e.forced() << " host_computed=" << e.host_computed()
       << " evictions=" << e.evictions()
       << " exhausted=" << e.exhausted() << " bytes_host=" << e.bytes_host()
       << " bytes_disk=" << e.bytes_disk() << " prefetches=" << e.prefetches_issued()
       << " useful=" << e.prefetches_useful() << " late=" << e.prefetches_late()
       << " prefetch_accuracy=" << e.prefetch_accuracy() << "\n";
  if (e.layer_hit_rate_size() > 0) {
    err_ << "[experts] layer hit rate:";
    for (int l = 0; l < e.layer_hit_rate_size(); ++l) err_ << " " << l << "=" << e.layer_hit_rate(l);
    err_ << "\n";
  }
  for (int t = 0; t < e.tokens_size(); ++t) {
    err_ << "[experts] token " << t << ": hits=" << e.tokens(t).hits()
         << " misses=" << e.tokens(t).misses() << "\n";
  }
}

int Command::Generate() {
  if (args_.positional.empty()) {
    err_ << "sluicectl: generate needs a PROMPT\n";
    return 2;
  }
  v1::GenerateRequest req;
  if (!BuildGenerate(&req)) return 2;
  grpc::ClientContext ctx;
  Prepare(&ctx);
  auto reader = stub_->Generate(&ctx, req);
  v1::GenerateResponse resp;
  const bool json = absl::GetFlag(FLAGS_json);
  while (reader->Read(&resp)) {
    if (json) {
      out_ << Json(resp) << "\n" << std::flush;
    } else if (resp.has_chunk()) {
      out_ << resp.chunk().text() << std::flush;
    } else if (resp.has_done()) {
      const v1::GenerateDone& d = resp.done();
      out_ << "\n";
      err_ << "[" << v1::FinishReason_Name(d.finish_reason())
           << "] prompt_tokens=" << d.usage().prompt_tokens()
           << " completion_tokens=" << d.usage().completion_tokens() << std::fixed
           << std::setprecision(1) << " ttft_ms=" << d.timings().time_to_first_token_ms()
           << " decode_tok/s=" << d.timings().decode_tokens_per_second() << "\n";
      if (!absl::GetFlag(FLAGS_stats).empty()) PrintExpertStats(d);
    }
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) {
    if (!json) out_ << "\n";
    return Fail(err_, s);
  }
  return 0;
}

int Command::Tokenize() {
  v1::TokenizeRequest req;
  req.set_text(absl::StrJoin(args_.positional, " "));
  req.set_parse_special(absl::GetFlag(FLAGS_parse_special));
  req.set_model_id(absl::GetFlag(FLAGS_model_id));
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::TokenizeResponse resp;
  grpc::Status s = stub_->Tokenize(&ctx, req, &resp);
  if (!s.ok()) return Fail(err_, s);
  if (absl::GetFlag(FLAGS_json)) {
    out_ << Json(resp) << "\n";
    return 0;
  }
  for (int i = 0; i < resp.token_ids_size(); ++i) {
    out_ << resp.token_ids(i) << "\t" << std::quoted(resp.pieces(i)) << "\n";
  }
  return 0;
}

int Command::Metrics() {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::GetMetricsResponse resp;
  grpc::Status s = stub_->GetMetrics(&ctx, v1::GetMetricsRequest(), &resp);
  if (!s.ok()) return Fail(err_, s);
  out_ << resp.prometheus_text();
  return 0;
}

int Command::Top() {
  const double interval = absl::GetFlag(FLAGS_interval);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  if (!(interval > 0) || iterations < 0) {
    err_ << "sluicectl: top needs --interval > 0 seconds and --iterations >= 0\n";
    return 2;
  }
  const bool redraw = !absl::GetFlag(FLAGS_plain) && &out_ == &std::cout && isatty(STDOUT_FILENO);
  const std::string addr = absl::GetFlag(FLAGS_addr);
  std::unique_ptr<TopSample> prev;
  int status = 0;
  for (int i = 0; iterations == 0 || i < iterations; ++i) {
    if (i > 0) absl::SleepFor(absl::Seconds(interval));
    grpc::ClientContext ctx;
    Prepare(&ctx);
    if (!absl::GetFlag(FLAGS_timeout).has_value()) {
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
    v1::GetMetricsResponse resp;
    const grpc::Status s = stub_->GetMetrics(&ctx, v1::GetMetricsRequest(), &resp);
    std::string frame;
    if (s.ok()) {
      auto cur = std::make_unique<TopSample>(MakeTopSample(absl::Now(), std::move(resp)));
      frame = RenderTopFrame(prev.get(), *cur, addr);
      prev = std::move(cur);
      status = 0;
    } else {
      // A restarting daemon is a state to show, not a reason to quit.
      frame = absl::StrCat("sluiced ", addr, "   ", CodeName(s.error_code()), ": ",
                           s.error_message(), "\n");
      status = 1;
    }
    out_ << (redraw ? "\x1b[H\x1b[2J" : "") << frame << (redraw ? "" : "\n") << std::flush;
  }
  return status;
}

}  // namespace

absl::StatusOr<Args> ParseArgs(const std::vector<std::string>& argv,
                               const std::vector<std::string>& known,
                               const std::vector<std::string>& boolean) {
  Args args;
  bool flags_done = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (!flags_done && a == "--") {
      flags_done = true;
      continue;
    }
    if (flags_done || a.size() < 3 || a.rfind("--", 0) != 0) {
      if (args.command.empty()) {
        args.command = a;
      } else {
        args.positional.push_back(a);
      }
      continue;
    }
    const size_t eq = a.find('=');
    std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    const bool is_bool = std::find(boolean.begin(), boolean.end(), name) != boolean.end();
    if (eq != std::string::npos) {
      args.flags[name] = a.substr(eq + 1);
    } else if (is_bool) {
      args.flags[name] = "true";
    } else if (i + 1 < argv.size()) {
      args.flags[name] = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
    }
  }
  return args;
}

int Run(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Args> args = ParseArgs(argv, FlagNames(), BareFlagNames());
  if (!args.ok()) {
    err << "sluicectl: " << args.status().message() << "\n" << kUsage;
    return 2;
  }
  if (args->command.empty() || args->command == "help" || args->flags.count("help")) {
    (args->command.empty() ? err : out) << kUsage;
    return args->command.empty() ? 2 : 0;
  }
  // Needs no daemon: runs before a channel is made.
  if (args->command == "plan") return RunPlan(args->flags, args->positional, out, err);
  return Command(*args, out, err).Dispatch();
}

}  // namespace sluice::ctl
