// Helpers for the end-to-end tests of sluiced: a tiny model on disk, a daemon
// started as a child process on free ports, and process/fd accounting.
//
// Everything is hermetic: files go under $TEST_TMPDIR, ports are chosen by the
// kernel (port 0, reported back through --port_file), and every wait polls
// with a timeout instead of sleeping a fixed time.
#ifndef SLUICE_TESTS_E2E_HARNESS_H_
#define SLUICE_TESTS_E2E_HARNESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "clients/proto/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "proto/sluice/v1/sluice.grpc.pb.h"

namespace sluice::testing {

// A fresh directory under $TEST_TMPDIR.
std::string MakeTempDir(const std::string& name);

// $TEST_SRCDIR/sluice/<workspace-relative path> of a data dependency.
std::string RunfilePath(const std::string& path);

// Writes the "micro" qwen35moe model (mkmodel, F32, fixed seed) to
// dir/micro-qwen35moe.gguf and returns its path.
absl::StatusOr<std::string> WriteMicroModel(const std::string& dir);
// The same with mkmodel's "tiny" shape (about eight times the compute per
// token), as dir/tiny-qwen35moe.gguf.
absl::StatusOr<std::string> WriteTinyModel(const std::string& dir);

struct DaemonOptions {
  std::string model_path;                 // --model, may be empty
  std::vector<std::string> flags;         // extra sluiced flags
  std::map<std::string, std::string> env; // added to the environment
  // When set, workers are the test-only sluice-worker-testing with these
  // flags (e.g. --test_step_delay_ms=5, --test_hog_memory).
  std::vector<std::string> worker_test_flags;
  int context_length = 512;
};

class Daemon {
 public:
  // Starts sluiced and waits (up to 60 s) until it has written its ports,
  // i.e. it serves and has loaded --model if one was given.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const DaemonOptions& options);
  ~Daemon();  // SIGKILL if still running

  // SIGTERM, then waits up to 30 s. Returns the exit code, or -signal, or
  // -1000 on a timeout (then SIGKILLs).
  int Stop();

  pid_t pid() const { return pid_; }
  std::string address() const;
  int metrics_port() const { return metrics_port_; }
  // The OpenAI-compatible HTTP port (the harness passes --http_address with
  // port 0; a later --http_address=none in the flags turns it off: 0).
  int http_port() const { return http_port_; }
  v1::Sluice::Stub& stub() { return *stub_; }
  std::shared_ptr<grpc::Channel> channel() { return channel_; }

  // "SERVING", "NOT_SERVING", or "error: ..." for the overall service.
  std::string Health();
  // Polls Health() every 10 ms until it equals `want`.
  bool WaitForHealth(const std::string& want, absl::Duration timeout);
  // GET on the metrics port; the body, or "error: ...".
  std::string HttpGet(const std::string& path);
  // The daemon's stderr so far (for failure messages).
  std::string Log() const;

 private:
  Daemon() = default;
  pid_t pid_ = -1;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int http_port_ = 0;
  std::string log_path_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Sluice::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

// The value of one sample of Prometheus text, named exactly as exposed
// (`name` or `name{labels}`); -1 when it is absent.
double MetricSample(const std::string& text, const std::string& sample);

// Direct children of `pid` (from /proc/PID/task/*/children).
std::vector<pid_t> ChildrenOf(pid_t pid);
// Open fds of `pid` (entries of /proc/PID/fd).
int CountFds(pid_t pid);
// The process state letter from /proc/PID/stat ('Z' for a zombie), or 0.
char ProcessState(pid_t pid);

// Runs a command to completion (up to `timeout`), stdin from `stdin_path`
// (or /dev/null), with `env` added to the environment.
struct CommandResult {
  int exit_code = -1;  // -signal when killed; -1000 on a timeout
  std::string out;
  std::string err;
};
// A self-signed certificate for localhost and 127.0.0.1, written by openssl
// as DIR/cert.pem and DIR/key.pem (valid one day).
CommandResult WriteSelfSignedCert(const std::string& dir);

// The first executable `name` on PATH, or "" when there is none.
std::string FindOnPath(const std::string& name);

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {},
                         const std::string& stdin_path = "/dev/null",
                         absl::Duration timeout = absl::Seconds(120));

// The result of one Generate call, collected.
struct Generation {
  grpc::Status status;
  std::vector<int32_t> token_ids;
  std::string text;
  int chunks = 0;
  bool done = false;
  v1::GenerateDone final;
};
// wait_for_ready: the call waits for its channel to connect (within the
// timeout) instead of failing at once when a connection attempt fails.
Generation RunGenerate(v1::Sluice::Stub& stub, const v1::GenerateRequest& request,
                       absl::Duration timeout = absl::Seconds(60),
                       bool wait_for_ready = false);

// A greedy (temperature 0) request for `max_tokens` tokens of `prompt` that
// ignores end-of-sequence.
v1::GenerateRequest GreedyRequest(const std::string& prompt, int max_tokens);

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_E2E_HARNESS_H_
