#include "tests/e2e_harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "model/testing/mkmodel.h"

namespace sluice::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool PollUntil(absl::Duration timeout, const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace

std::string MakeTempDir(const std::string& name) {
  static std::atomic<int> counter{0};
  const char* base = getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base != nullptr ? base : "/tmp", "/", name, "-", getpid(),
                                 "-", counter++);
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::string RunfilePath(const std::string& path) {
  const char* srcdir = getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/sluice/", path);
}

namespace {

absl::StatusOr<std::string> WriteNamedModel(const std::string& dir, const std::string& name) {
  mkmodel::Options options;
  options.arch = mkmodel::Arch::kQwen35Moe;
  auto shape = mkmodel::NamedShape(options.arch, name);
  if (!shape.ok()) return shape.status();
  options.shape = *shape;
  options.seed = 7;
  const std::string path = dir + "/" + name + "-qwen35moe.gguf";
  auto written = mkmodel::WriteModel(options, path);
  if (!written.ok()) return written.status();
  return path;
}

}  // namespace

absl::StatusOr<std::string> WriteTinyModel(const std::string& dir) {
  return WriteNamedModel(dir, "tiny");
}

absl::StatusOr<std::string> WriteMicroModel(const std::string& dir) {
  mkmodel::Options options;
  options.arch = mkmodel::Arch::kQwen35Moe;
  auto shape = mkmodel::NamedShape(options.arch, "micro");
  if (!shape.ok()) return shape.status();
  options.shape = *shape;
  options.seed = 7;
  const std::string path = dir + "/micro-qwen35moe.gguf";
  auto written = mkmodel::WriteModel(options, path);
  if (!written.ok()) return written.status();
  return path;
}

double MetricSample(const std::string& text, const std::string& sample) {
  const size_t at = ("\n" + text).find("\n" + sample + " ");
  double v = -1;
  if (at == std::string::npos) return v;
  const size_t start = at + sample.size() + 1;
  (void)absl::SimpleAtod(text.substr(start, text.find('\n', start) - start), &v);
  return v;
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonOptions& options) {
  const std::string dir = MakeTempDir("sluiced");
  const std::string port_file = dir + "/ports";
  std::unique_ptr<Daemon> d(new Daemon());
  d->log_path_ = dir + "/sluiced.log";
  std::vector<std::string> args = {
      RunfilePath("daemon/sluiced"),
      "--grpc_address=127.0.0.1:0",
      "--metrics_address=127.0.0.1:0",
      "--http_address=127.0.0.1:0",
      "--port_file=" + port_file,
      "--worker_binary=" + RunfilePath("worker/sluice-worker"),
      absl::StrCat("--context_length=", options.context_length),
  };
  if (!options.model_path.empty()) args.push_back("--model=" + options.model_path);
  // Every test model lives under $TEST_TMPDIR (MakeTempDir).
  args.push_back(absl::StrCat("--model_dir=", getenv("TEST_TMPDIR")));
  if (!options.worker_test_flags.empty()) {
    // sluiced starts workers with --socket_fd only; a wrapper adds the hooks.
    const std::string wrapper = dir + "/sluice-worker-testing.sh";
    {
      std::ofstream out(wrapper);
      out << "#!/bin/sh\nexec '" << RunfilePath("worker/sluice-worker-testing") << "'";
      for (const std::string& f : options.worker_test_flags) out << " '" << f << "'";
      out << " \"$@\"\n";
    }
    chmod(wrapper.c_str(), 0755);
    args.push_back("--worker_binary=" + wrapper);
  }
  args.insert(args.end(), options.flags.begin(), options.flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = open(d->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    for (const auto& [k, v] : options.env) setenv(k.c_str(), v.c_str(), 1);
    dup2(log_fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);
  d->pid_ = pid;
  int status = 0;
  bool exited = false;
  const bool ready = PollUntil(absl::Seconds(60), [&] {
    if (waitpid(pid, &status, WNOHANG) == pid) exited = true;
    return exited || access(port_file.c_str(), F_OK) == 0;
  });
  if (exited || !ready) {
    if (exited) d->pid_ = -1;
    return absl::UnavailableError(absl::StrCat(
        "sluiced did not start (", exited ? "exited" : "timeout", "); log:\n", d->Log()));
  }
  for (absl::string_view line : absl::StrSplit(ReadAll(port_file), '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, '=');
    int port = 0;
    (void)absl::SimpleAtoi(kv.second, &port);
    if (kv.first == "grpc") d->grpc_port_ = port;
    if (kv.first == "metrics") d->metrics_port_ = port;
    if (kv.first == "http") d->http_port_ = port;
  }
  d->channel_ = grpc::CreateChannel(d->address(), grpc::InsecureChannelCredentials());
  d->stub_ = v1::Sluice::NewStub(d->channel_);
  d->health_ = grpc::health::v1::Health::NewStub(d->channel_);
  return d;
}

Daemon::~Daemon() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

int Daemon::Stop() {
  if (pid_ <= 0) return -2000;
  kill(pid_, SIGTERM);
  int status = 0;
  pid_t got = 0;
  const bool exited = PollUntil(absl::Seconds(30), [&] {
    got = waitpid(pid_, &status, WNOHANG);
    return got == pid_;
  });
  if (!exited) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1000;
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

std::string Daemon::address() const { return absl::StrCat("127.0.0.1:", grpc_port_); }

std::string Daemon::Health() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = health_->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &resp);
  if (!s.ok()) return absl::StrCat("error: ", s.error_message());
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
}

bool Daemon::WaitForHealth(const std::string& want, absl::Duration timeout) {
  return PollUntil(timeout, [&] { return Health() == want; });
}

std::string Daemon::HttpGet(const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(metrics_port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "error: connect";
  }
  const std::string req =
      absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return "error: write";
  }
  std::string resp;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, n);
  close(fd);
  const size_t body = resp.find("\r\n\r\n");
  if (resp.rfind("HTTP/1.1 200", 0) != 0 || body == std::string::npos) {
    return "error: " + resp.substr(0, 100);
  }
  return resp.substr(body + 4);
}

std::string Daemon::Log() const { return ReadAll(log_path_); }

std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  DIR* d = opendir(task_dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    for (absl::string_view p : absl::StrSplit(
             ReadAll(absl::StrCat(task_dir, "/", e->d_name, "/children")), ' ',
             absl::SkipEmpty())) {
      pid_t child = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(p), &child)) out.push_back(child);
    }
  }
  closedir(d);
  return out;
}

int CountFds(pid_t pid) {
  int n = 0;
  DIR* d = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return pid == getpid() ? n - 1 : n;  // not counting the DIR's own fd
}

char ProcessState(pid_t pid) {
  const std::string stat = ReadAll(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? 0 : stat[paren + 2];
}

CommandResult WriteSelfSignedCert(const std::string& dir) {
  return RunCommand(
      {"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
       "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
       "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem"});
}

std::string FindOnPath(const std::string& name) {
  const char* path = getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env,
                         const std::string& stdin_path, absl::Duration timeout) {
  CommandResult r;
  const std::string dir = MakeTempDir("cmd");
  const std::string out_path = dir + "/out", err_path = dir + "/err";
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return r;
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    const int in = open(stdin_path.c_str(), O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  int status = 0;
  const bool exited = PollUntil(timeout, [&] { return waitpid(pid, &status, WNOHANG) == pid; });
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    r.exit_code = -1000;
  } else {
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  r.out = ReadAll(out_path);
  r.err = ReadAll(err_path);
  return r;
}

Generation RunGenerate(v1::Sluice::Stub& stub, const v1::GenerateRequest& request,
                       absl::Duration timeout, bool wait_for_ready) {
  Generation g;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx.set_wait_for_ready(wait_for_ready);
  auto reader = stub.Generate(&ctx, request);
  v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
    if (resp.has_chunk()) {
      ++g.chunks;
      for (int32_t id : resp.chunk().token_ids()) g.token_ids.push_back(id);
      g.text += resp.chunk().text();
    } else if (resp.has_done()) {
      g.done = true;
      g.final = resp.done();
    }
  }
  g.status = reader->Finish();
  return g;
}

v1::GenerateRequest GreedyRequest(const std::string& prompt, int max_tokens) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.set_max_tokens(max_tokens);
  r.set_ignore_eos(true);
  r.mutable_sampling()->set_temperature(0);
  return r;
}

}  // namespace sluice::testing
