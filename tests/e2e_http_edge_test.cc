// End-to-end: the HTTP API and metrics ports under the attacks of issue 20,
// each as a raw loopback client would send it. Attackers connect from other
// loopback addresses (127.0.0.2 and up), so that the per-client connection
// cap meets them and not the probes from 127.0.0.1, which must be answered
// within 1 s throughout. Supervisor memory is read from /proc/PID/status.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

// A connection from `source` (a loopback address) to 127.0.0.1:port; -1 on
// failure.
int Connect(int port, const std::string& source = "127.0.0.1") {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

bool SendAll(int fd, const std::string& data) {
  for (size_t at = 0; at < data.size();) {
    const ssize_t n = send(fd, data.data() + at, data.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

// Reads until the peer closes or `timeout` passes.
std::string ReadAll(int fd, absl::Duration timeout) {
  std::string out;
  const absl::Time end = absl::Now() + timeout;
  char buf[65536];
  while (absl::Now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(end - absl::Now()))) <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// One request on a fresh connection from 127.0.0.1; the whole answer.
std::string Exchange(int port, const std::string& request,
                     absl::Duration timeout = absl::Seconds(5)) {
  const int fd = Connect(port);
  if (fd < 0 || !SendAll(fd, request)) return "connect/send failed";
  std::string out = ReadAll(fd, timeout);
  close(fd);
  return out;
}

std::string Post(const std::string& path, const std::string& body) {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
                      "Connection: close\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
}

std::string Get(const std::string& path) {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

constexpr char kChat[] =
    R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "ignore_eos": true})";

int64_t ProcKb(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, field + ":")) {
      int64_t kb = -1;
      // "VmRSS:    12345 kB"
      (void)absl::SimpleAtoi(
          absl::StripSuffix(absl::StripAsciiWhitespace(line.substr(field.size() + 1)), " kB"),
          &kb);
      return kb;
    }
  }
  return -1;
}

// Probes /health, /metrics and a chat completion from 127.0.0.1 every
// 200 ms until stopped, recording the slowest answer and any failure.
class Prober {
 public:
  explicit Prober(Daemon* d) : d_(d), thread_([this] { Run(); }) {}
  ~Prober() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  absl::Duration slowest() const { return slowest_; }
  const std::string& failure() const { return failure_; }
  int rounds() const { return rounds_; }

 private:
  void Check(int port, const std::string& request, const std::string& want) {
    const absl::Time start = absl::Now();
    const std::string answer = Exchange(port, request, absl::Seconds(3));
    slowest_ = std::max(slowest_, absl::Now() - start);
    if (!absl::StrContains(answer, want) && failure_.empty()) {
      failure_ = absl::StrCat(request.substr(0, 30), " -> ", answer.substr(0, 200));
    }
  }
  void Run() {
    while (!stop_) {
      Check(d_->http_port(), Get("/health"), "HTTP/1.1 200");
      Check(d_->metrics_port(), Get("/metrics"), "sluice_requests_waiting");
      Check(d_->http_port(), Post("/v1/chat/completions", kChat), "\"finish_reason\":\"length\"");
      ++rounds_;
      absl::SleepFor(absl::Milliseconds(200));
    }
  }
  Daemon* d_;
  std::atomic<bool> stop_{false};
  absl::Duration slowest_;
  std::string failure_;
  int rounds_ = 0;
  std::thread thread_;
};

class E2eHttpEdgeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto path = WriteMicroModel(MakeTempDir("e2e-http-edge"));
    ASSERT_TRUE(path.ok()) << path.status();
    DaemonOptions options;
    options.model_path = *path;
    options.flags = {"--queue_limit=16", "--http_header_timeout_s=3",
                     "--http_max_body_bytes=8M", "--http_memory_budget=256M",
                     "--http_max_connections_per_client=32"};
    auto d = Daemon::Start(options);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    if (daemon_ == nullptr) return;
    const std::string log = daemon_->Log();
    EXPECT_EQ(daemon_->Stop(), 0) << log;
    delete daemon_;
  }
  static Daemon* daemon_;
};

Daemon* E2eHttpEdgeTest::daemon_ = nullptr;

// Item 1: a chunked body is cut at the cap with 413, whatever follows; a body
// under the cap full of an ignored array costs no parse.
TEST_F(E2eHttpEdgeTest, BodiesAreCappedAndParsingIsBoundedWhateverTheFraming) {
  const int64_t rss_before = ProcKb(daemon_->pid(), "VmRSS");
  Prober prober(daemon_);
  std::vector<std::thread> attackers;
  std::vector<std::string> chunked(3), ignored(3);
  for (int i = 0; i < 3; ++i) {
    attackers.emplace_back([&, i] {
      // 200 MB announced in 1 MiB chunks; the cap is 8 MiB.
      const int fd = Connect(daemon_->http_port(), absl::StrCat("127.0.0.", 2 + i));
      SendAll(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n");
      const std::string chunk = absl::StrCat("100000\r\n", std::string(1 << 20, ' '), "\r\n");
      // Stops once the answer is there: sending on would meet a reset.
      for (int c = 0; c < 200 && !Readable(fd) && SendAll(fd, chunk); ++c) {
      }
      chunked[i] = ReadAll(fd, absl::Seconds(5));
      close(fd);
    });
    attackers.emplace_back([&, i] {
      std::string zeros = "0";
      for (size_t n = 1; zeros.size() < (4u << 20) - 1; n *= 2) zeros += "," + zeros;
      const std::string body = absl::StrCat(R"({"x": [)", zeros, R"(], "messages": [{"role":
          "user", "content": "hi"}], "max_tokens": 2, "ignore_eos": true})");
      ignored[i] = Exchange(daemon_->http_port(), Post("/v1/chat/completions", body),
                            absl::Seconds(20));
    });
  }
  for (std::thread& t : attackers) t.join();
  prober.Stop();
  const int64_t hwm_growth_mb = (ProcKb(daemon_->pid(), "VmHWM") - rss_before) / 1024;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(absl::StartsWith(chunked[i], "HTTP/1.1 413")) << chunked[i].substr(0, 300);
    EXPECT_TRUE(absl::StrContains(chunked[i], "the request body exceeds 8388608 bytes"));
    // The unknown field is parsed without being built, then refused by name.
    EXPECT_TRUE(absl::StartsWith(ignored[i], "HTTP/1.1 400")) << ignored[i].substr(0, 300);
    EXPECT_TRUE(absl::StrContains(ignored[i], "x: is not a field Sluice supports"))
        << ignored[i].substr(0, 300);
  }
  std::cout << "supervisor VmHWM grew by " << hwm_growth_mb << " MiB during the attack; slowest "
            << "probe " << absl::FormatDuration(prober.slowest()) << " over " << prober.rounds()
            << " rounds" << std::endl;
  EXPECT_LT(hwm_growth_mb, 160);
  EXPECT_EQ(prober.failure(), "");
  EXPECT_LT(prober.slowest(), absl::Seconds(1));
}

// Item 2: slow clients on both ports; item 2 of the caps too.
TEST_F(E2eHttpEdgeTest, SlowClientsAreCutAtTheHeaderDeadlineAndStarveNobody) {
  Prober prober(daemon_);
  std::vector<int> slow;
  for (int i = 0; i < 100; ++i) {  // one per address: the per-client cap does not apply
    slow.push_back(Connect(daemon_->http_port(), absl::StrCat("127.0.1.", 1 + i)));
  }
  for (int i = 0; i < 50; ++i) {
    slow.push_back(Connect(daemon_->metrics_port(), absl::StrCat("127.0.2.", 1 + i)));
  }
  const absl::Time start = absl::Now();
  std::vector<std::string> answers(slow.size());
  for (int second = 0; second < 5; ++second) {
    for (size_t i = 0; i < slow.size(); ++i) {
      // Once answered, sending on would meet a reset that drops the answer.
      if (!answers[i].empty() || Readable(slow[i])) {
        if (answers[i].empty()) answers[i] = ReadAll(slow[i], absl::Milliseconds(100));
        continue;
      }
      SendAll(slow[i], second == 0 ? "G" : "E");
    }
    absl::SleepFor(absl::Seconds(1));
  }
  prober.Stop();
  int cut = 0;
  for (size_t i = 0; i < slow.size(); ++i) {
    if (answers[i].empty()) answers[i] = ReadAll(slow[i], absl::Milliseconds(200));
    cut += absl::StartsWith(answers[i], "HTTP/1.1 408") ? 1 : 0;
    close(slow[i]);
  }
  // Beyond the cap from one address: 503 at once.
  std::vector<int> crowd;
  for (int i = 0; i < 40; ++i) crowd.push_back(Connect(daemon_->http_port(), "127.0.3.1"));
  const std::string refused = ReadAll(crowd.back(), absl::Seconds(1));
  for (int fd : crowd) close(fd);
  std::cout << cut << " of " << slow.size() << " slow connections got 408 within "
            << absl::FormatDuration(absl::Now() - start) << "; slowest probe "
            << absl::FormatDuration(prober.slowest()) << std::endl;
  EXPECT_EQ(cut, 150);
  EXPECT_TRUE(absl::StartsWith(refused, "HTTP/1.1 503")) << refused;
  EXPECT_TRUE(absl::StrContains(refused, "too many connections from 127.0.3.1 (at most 32)"));
  // Every refusal is counted, by port and reason (the last of the crowd was
  // answered, so the ones before it were counted).
  const std::string metrics = daemon_->HttpGet("/metrics");
  const auto counted = [&](const std::string& labels) {
    return MetricSample(metrics, "sluice_http_refused_total{" + labels + "}");
  };
  EXPECT_EQ(counted("port=\"http\",reason=\"client_connections\""), 8);
  // The 150 slow connections: 100 on the HTTP port, 50 on the metrics port.
  EXPECT_EQ(counted("port=\"http\",reason=\"timeout\""), 100);
  EXPECT_EQ(counted("port=\"metrics\",reason=\"timeout\""), 50);
  EXPECT_EQ(prober.failure(), "");
  EXPECT_LT(prober.slowest(), absl::Seconds(1));
}

// Item 5: a number that overflows a double is bad input, in any field.
TEST_F(E2eHttpEdgeTest, NumberOverflowIs400NamingIt) {
  for (const char* body : {R"({"messages": [], "temperature": 1e309})",
                           R"({"ignored": 1e309, "messages": []})"}) {
    const std::string answer = Exchange(daemon_->http_port(), Post("/v1/chat/completions", body));
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 400")) << answer;
    EXPECT_TRUE(absl::StrContains(answer, "number overflow parsing '1e309'")) << answer;
  }
}

// Item 7: pipelined requests each get their answer; a half-close after the
// request is not a cancel; a long model id is quoted short.
TEST_F(E2eHttpEdgeTest, PipelinedAndHalfClosedRequestsAreAnswered) {
  const std::string keep = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string both = Exchange(daemon_->http_port(), keep + Get("/v1/models"));
  EXPECT_TRUE(absl::StartsWith(both, "HTTP/1.1 200")) << both;
  EXPECT_TRUE(absl::StrContains(both, "{\"status\":\"ok\"}")) << both;
  EXPECT_TRUE(absl::StrContains(both, "\"object\":\"list\"")) << both;

  const int fd = Connect(daemon_->http_port());
  SendAll(fd, Post("/v1/chat/completions", kChat));
  shutdown(fd, SHUT_WR);
  const std::string half = ReadAll(fd, absl::Seconds(10));
  close(fd);
  EXPECT_TRUE(absl::StrContains(half, "HTTP/1.1 200")) << half;
  EXPECT_TRUE(absl::StrContains(half, "\"finish_reason\":\"length\"")) << half;

  const std::string missing =
      Exchange(daemon_->http_port(), Get("/v1/models/" + std::string(256, 'm')));
  EXPECT_TRUE(absl::StartsWith(missing, "HTTP/1.1 404")) << missing;
  EXPECT_TRUE(absl::StrContains(missing, "... (256 bytes)")) << missing;
  EXPECT_FALSE(absl::StrContains(missing, std::string(64, 'm'))) << missing;
}

// Item 4 and the metrics address rule of item 7.
TEST_F(E2eHttpEdgeTest, PortsAreNotSharedAndMetricsStayOnLoopback) {
  const std::string sluiced = RunfilePath("daemon/sluiced");
  const std::string worker = "--worker_binary=" + RunfilePath("worker/sluice-worker");
  const std::string http = absl::StrCat("127.0.0.1:", daemon_->http_port());
  CommandResult clash = RunCommand({sluiced, "--grpc_address=127.0.0.1:0",
                                    "--metrics_address=none", "--http_address=" + http, worker},
                                   {}, "/dev/null", absl::Seconds(30));
  EXPECT_EQ(clash.exit_code, 1) << clash.err;
  EXPECT_TRUE(absl::StrContains(clash.err, "fatal: cannot listen on --http_address=" + http))
      << clash.err;
  CommandResult open = RunCommand(
      {sluiced, "--grpc_address=127.0.0.1:0", "--metrics_address=0.0.0.0:0", worker}, {},
      "/dev/null", absl::Seconds(30));
  EXPECT_EQ(open.exit_code, 2) << open.err;
  EXPECT_TRUE(absl::StrContains(open.err, "--metrics_address='0.0.0.0:0' is reachable from "
                                          "other hosts"))
      << open.err;
  EXPECT_EQ(daemon_->Health(), "SERVING");
}

}  // namespace
}  // namespace sluice::testing
