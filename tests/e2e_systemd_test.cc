// End-to-end: sluiced's systemd integration. The notification protocol is
// checked against a datagram socket of our own standing in for systemd
// (NOTIFY_SOCKET, WATCHDOG_USEC), and the unit file against systemd-analyze.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"

namespace sluice::testing {
namespace {

class NotifySocket {
 public:
  // An abstract socket (no file, no sun_path length limit on the temp dir);
  // NOTIFY_SOCKET spells it with a leading '@'.
  NotifySocket() : name_(absl::StrCat("@sluice-notify-test-", getpid())) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path + 1, name_.data() + 1, name_.size() - 1);
    ok_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr),
               offsetof(sockaddr_un, sun_path) + name_.size()) == 0;
    timeval tv{0, 100000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~NotifySocket() { close(fd_); }
  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  // Messages until one contains `want` (true) or `timeout` passes (false).
  bool WaitFor(const std::string& want, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    char buf[4096];
    while (absl::Now() < deadline) {
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) continue;
      received_.append(buf, n).append("|");
      if (std::string(buf, n).find(want) != std::string::npos) return true;
    }
    return false;
  }
  const std::string& received() const { return received_; }

 private:
  std::string name_;
  int fd_ = -1;
  bool ok_ = false;
  std::string received_;
};

TEST(E2eSystemdTest, NotifiesReadyWatchdogAndStopping) {
  const std::string dir = MakeTempDir("e2e-notify");
  NotifySocket notify;
  ASSERT_TRUE(notify.ok());
  DaemonOptions options;
  options.env = {{"NOTIFY_SOCKET", notify.name()}, {"WATCHDOG_USEC", "300000"}};
  auto d = Daemon::Start(options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(notify.WaitFor("READY=1\nSTATUS=serving, no model loaded", absl::Seconds(10)))
      << notify.received();
  EXPECT_TRUE(notify.WaitFor("WATCHDOG=1", absl::Seconds(5))) << notify.received();
  EXPECT_TRUE(notify.WaitFor("WATCHDOG=1", absl::Seconds(5))) << notify.received();
  auto model = WriteMicroModel(dir);
  ASSERT_TRUE(model.ok());
  grpc::ClientContext ctx;
  v1::LoadModelRequest load;
  load.set_path(*model);
  v1::LoadModelResponse resp;
  ASSERT_TRUE((*d)->stub().LoadModel(&ctx, load, &resp).ok());
  EXPECT_TRUE(notify.WaitFor("STATUS=serving", absl::Seconds(10))) << notify.received();
  EXPECT_EQ((*d)->Stop(), 0);
  EXPECT_TRUE(notify.WaitFor("STOPPING=1", absl::Seconds(5))) << notify.received();
}

TEST(E2eSystemdTest, UnitFileVerifies) {
  const char* analyze = "/usr/bin/systemd-analyze";
  if (access(analyze, X_OK) != 0) SLUICE_SKIP("systemd-analyze is not installed");
  std::ifstream in(RunfilePath("deploy/systemd/sluiced.service"));
  std::stringstream ss;
  ss << in.rdbuf();
  ASSERT_NE(ss.str().find("Type=notify"), std::string::npos);
  ASSERT_NE(ss.str().find("Delegate=yes"), std::string::npos);
  // Point ExecStart at the built binary so that verify can check it.
  const std::string unit = absl::StrReplaceAll(
      ss.str(), {{"/usr/local/bin/sluiced", RunfilePath("daemon/sluiced")}});
  const std::string path = MakeTempDir("unit") + "/sluiced.service";
  std::ofstream(path) << unit;
  CommandResult r = RunCommand({analyze, "verify", path});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("sluiced.service"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sluice::testing
