// Load: 1000 concurrent streaming generations against one worker. Waiting
// must cost the supervisor (almost) nothing: issue 11 defect 4 was a 5 ms poll
// per waiting handler that burned two cores and starved the queue.
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

// utime + stime of `pid` in clock ticks, from /proc/PID/stat.
long CpuTicks(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string stat = ss.str();
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  // Fields after "(comm) ": state is [0], utime is field 14 overall = [11].
  if (fields.size() < 13) return -1;
  return std::stol(fields[11]) + std::stol(fields[12]);
}

constexpr int kTokens = 4;

v1::GenerateRequest SeededRequest(int seed) {
  v1::GenerateRequest r;
  // A paragraph of prompt gives the worker real work per request, as a real
  // model would, against which the supervisor's share is measured.
  r.set_prompt("once upon a time a little daemon served many clients at once");
  r.set_max_tokens(kTokens);
  r.set_ignore_eos(true);
  r.mutable_sampling()->set_temperature(0.9f);
  r.mutable_sampling()->set_seed(seed);
  return r;
}

TEST(E2eLoadTest, ThousandConcurrentStreamsFinishWithTheirSingleClientTokens) {
  constexpr int kStreams = 1000;
  constexpr int kSeeds = 8;
  auto path = WriteTinyModel(MakeTempDir("e2e-load"));
  ASSERT_TRUE(path.ok()) << path.status();
  DaemonOptions options;
  options.model_path = *path;
  options.flags = {"--queue_limit=1000"};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  Daemon& daemon = **d;
  std::vector<pid_t> children = ChildrenOf(daemon.pid());
  ASSERT_EQ(children.size(), 1u);
  const pid_t worker = children[0];

  std::map<int, std::vector<int32_t>> reference;
  for (int seed = 0; seed < kSeeds; ++seed) {
    Generation g = RunGenerate(daemon.stub(), SeededRequest(seed));
    ASSERT_TRUE(g.status.ok()) << g.status.error_message();
    ASSERT_EQ(g.token_ids.size(), static_cast<size_t>(kTokens));
    reference[seed] = g.token_ids;
  }

  // A few channels, as many clients would use.
  std::vector<std::unique_ptr<v1::Sluice::Stub>> stubs;
  for (int i = 0; i < 8; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("sluice_test_channel", i);  // distinct channels, not one shared
    stubs.push_back(v1::Sluice::NewStub(
        grpc::CreateCustomChannel(daemon.address(), grpc::InsecureChannelCredentials(), args)));
  }
  const long supervisor_before = CpuTicks(daemon.pid());
  const long worker_before = CpuTicks(worker);
  const absl::Time start = absl::Now();
  std::atomic<int> ok{0}, exhausted{0}, mismatched{0}, other{0};
  std::vector<std::thread> clients;
  clients.reserve(kStreams);
  std::string first_other;
  absl::Mutex other_mu;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      // Waiting for the channel: under 1,000 streams on CI's 2 cores a
      // channel's connection attempt once failed outright (2026-12-06: one
      // of the 8, its 125 streams "failed to connect to all addresses"),
      // which says nothing of the daemon's streams.
      Generation g = RunGenerate(*stubs[i % stubs.size()], SeededRequest(i % kSeeds),
                                 absl::Seconds(400), /*wait_for_ready=*/true);
      if (g.status.ok()) {
        ++ok;
        if (!g.done || g.token_ids != reference[i % kSeeds]) ++mismatched;
      } else if (g.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        ++exhausted;
      } else {
        ++other;
        absl::MutexLock lock(&other_mu);
        if (first_other.empty()) first_other = g.status.error_message();
      }
    });
  }
  for (std::thread& t : clients) t.join();
  const absl::Duration elapsed = absl::Now() - start;
  const long supervisor_ticks = CpuTicks(daemon.pid()) - supervisor_before;
  const long worker_ticks = CpuTicks(worker) - worker_before;
  std::cout << "1000 streams: " << ok << " ok, " << exhausted << " refused, in "
            << absl::FormatDuration(elapsed) << "; supervisor " << supervisor_ticks
            << " ticks, worker " << worker_ticks << " ticks ("
            << 100.0 * supervisor_ticks / std::max(1L, worker_ticks) << "%)" << std::endl;
  EXPECT_EQ(ok + exhausted, kStreams) << "first other error: " << first_other;
  EXPECT_EQ(mismatched, 0);
  EXPECT_GT(ok, kStreams / 2);
  EXPECT_LT(elapsed, absl::Seconds(400));
  EXPECT_LT(supervisor_ticks * 10, worker_ticks)
      << "supervisor " << supervisor_ticks << " ticks vs worker " << worker_ticks;
  EXPECT_EQ(daemon.Stop(), 0) << daemon.Log();
}

}  // namespace
}  // namespace sluice::testing
