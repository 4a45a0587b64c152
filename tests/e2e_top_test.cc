// End-to-end, issue 25: `sluicectl top` driven in a real terminal (a tmux
// session), its screen read back while requests stream.
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

class Tmux {
 public:
  // The socket lives in a short /tmp directory: $TEST_TMPDIR is deeper
  // than a Unix socket path may be.
  explicit Tmux(std::string tmux) : tmux_(std::move(tmux)) {
    char dir[] = "/tmp/sluice-tmux-XXXXXX";
    dir_ = mkdtemp(dir) ? dir : "/tmp";
    socket_ = dir_ + "/s";
  }
  ~Tmux() {
    Run({"kill-server"});
    unlink(socket_.c_str());
    rmdir(dir_.c_str());
  }
  CommandResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {tmux_, "-S", socket_});
    return RunCommand(args, {{"TERM", "xterm"}}, "/dev/null", absl::Seconds(10));
  }
  std::string Screen() { return Run({"capture-pane", "-p", "-t", "top"}).out; }

 private:
  std::string tmux_;
  std::string dir_;
  std::string socket_;
};

TEST(E2eTopTest, LiveViewInATerminalFollowsTheDaemon) {
  const std::string tmux = FindOnPath("tmux");
  ASSERT_FALSE(tmux.empty()) << "tmux is not installed (make deps installs it)";
  auto model = WriteMicroModel(MakeTempDir("e2e-top"));
  ASSERT_TRUE(model.ok()) << model.status();
  DaemonOptions options;
  options.model_path = *model;
  options.worker_test_flags = {"--test_step_delay_ms=5"};
  // One generation at a time on the worker, so that the other waits.
  options.flags = {"--max_sequences=1"};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  Tmux term(tmux);
  const CommandResult started = term.Run(
      {"new-session", "-d", "-s", "top", "-x", "110", "-y", "30",
       absl::StrCat(RunfilePath("clients/sluicectl"), " --addr=", (*d)->address(),
                    " top --interval=0.25")});
  ASSERT_EQ(started.exit_code, 0) << started.err;

  // Requests one after another, so that one is running and tokens stream.
  std::atomic<bool> stop{false};
  std::thread load([&] {
    while (!stop) RunGenerate((*d)->stub(), GreedyRequest("watch me", 40));
  });
  std::thread waiting([&] {
    while (!stop) RunGenerate((*d)->stub(), GreedyRequest("and me", 40));
  });
  std::string screen;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  bool seen = false;
  while (!seen && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
    screen = term.Screen();
    // A rate that moved, with one request running and the other waiting.
    seen = absl::StrContains(screen, "requests   running 1   waiting 1") &&
           absl::StrContains(screen, "tokens/s   streamed ") &&
           !absl::StrContains(screen, "streamed -") && !absl::StrContains(screen, "streamed 0.0");
  }
  stop = true;
  load.join();
  waiting.join();
  EXPECT_TRUE(seen) << screen;
  EXPECT_TRUE(absl::StrContains(screen, absl::StrCat("sluiced ", (*d)->address(), "   worker up")))
      << screen;
  EXPECT_TRUE(absl::StrContains(screen, "ITL        p50 ")) << screen;
  EXPECT_TRUE(absl::StrContains(screen, "experts    all resident")) << screen;
  // The screen is redrawn in place: one frame, not a scroll of them.
  EXPECT_EQ(screen.find("requests "), screen.rfind("requests ")) << screen;

  // The daemon goes away: top shows it and keeps running.
  ASSERT_EQ((*d)->Stop(), 0);
  bool shown = false;
  for (int i = 0; i < 100 && !shown; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    screen = term.Screen();
    shown = absl::StrContains(screen, "UNAVAILABLE");
  }
  EXPECT_TRUE(shown) << screen;
}

}  // namespace
}  // namespace sluice::testing
