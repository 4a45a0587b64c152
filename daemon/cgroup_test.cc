#include "daemon/cgroup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sluice::daemon {
namespace {

// A plain directory stands in for a cgroup directory: the containment code
// only creates directories and reads/writes files, so what it would tell the
// kernel can be read back.
std::string FakeDir(const std::string& name) {
  const std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/", name);
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(OomContainmentTest, V1WritesTheLimitAndReadsOomKills) {
  const std::string base = FakeDir("v1");
  std::ofstream(base + "/memory.limit_in_bytes") << "9223372036854771712\n";
  auto c = OomContainment::Create("v1", base, 256u << 20);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->mode(), OomMode::kCgroupV1);
  EXPECT_EQ((*c)->description(),
            absl::StrCat("cgroup v1 under ", base, ", memory limit 268435456 bytes"));
  auto cg = (*c)->PrepareWorker(3);
  ASSERT_TRUE(cg.ok()) << cg.status();
  EXPECT_EQ(cg->dir, absl::StrCat(base, "/sluice-worker-", getpid(), "-3"));
  EXPECT_EQ(cg->procs_file, cg->dir + "/cgroup.procs");
  EXPECT_EQ(Slurp(cg->dir + "/memory.limit_in_bytes"), "268435456");
  EXPECT_FALSE((*c)->OomKilled(*cg));
  std::ofstream(cg->dir + "/memory.oom_control") << "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n";
  EXPECT_TRUE((*c)->OomKilled(*cg));
}

TEST(OomContainmentTest, V2MovesItselfToALeafAndSetsGroupKill) {
  const std::string base = FakeDir("v2");
  std::ofstream(base + "/cgroup.controllers") << "cpu io memory pids\n";
  std::ofstream(base + "/cgroup.procs") << getpid() << "\n";
  auto c = OomContainment::Create("v2", base, 1u << 30);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->mode(), OomMode::kCgroupV2);
  EXPECT_EQ(Slurp(base + "/supervisor/cgroup.procs"), absl::StrCat(getpid()));
  EXPECT_EQ(Slurp(base + "/cgroup.subtree_control"), "+memory");
  std::ofstream(base + "/sluice-worker-probe-template");  // unrelated files are ignored
  auto cg = (*c)->PrepareWorker(1);
  ASSERT_TRUE(cg.ok()) << cg.status();
  EXPECT_EQ(Slurp(cg->dir + "/memory.max"), "1073741824");
  EXPECT_EQ(Slurp(cg->dir + "/memory.oom.group"), "1");
  std::ofstream(cg->dir + "/memory.events") << "low 0\nhigh 0\nmax 12\noom 1\noom_kill 0\n";
  EXPECT_FALSE((*c)->OomKilled(*cg));
  std::ofstream(cg->dir + "/memory.events") << "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n";
  EXPECT_TRUE((*c)->OomKilled(*cg));
}

TEST(OomContainmentTest, V2WithoutMemoryControllerExplainsWhy) {
  const std::string base = FakeDir("v2-nomem");
  std::ofstream(base + "/cgroup.controllers") << "cpu pids\n";
  auto c = OomContainment::Create("v2", base, 0);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("has no memory controller"), std::string::npos)
      << c.status();
  // auto falls through to v1 (not at this path either) and then to none.
  auto fallback = OomContainment::Create("auto", base, 0);
  ASSERT_TRUE(fallback.ok());
  EXPECT_EQ((*fallback)->mode(), OomMode::kNone);
  EXPECT_NE((*fallback)->description().find("has no memory controller"), std::string::npos)
      << (*fallback)->description();
  EXPECT_NE((*fallback)->description().find("oom_score_adj 1000 alone"), std::string::npos);
}

TEST(OomContainmentTest, NoneModeCreatesNothing) {
  auto c = OomContainment::Create("none", "", 0);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->mode(), OomMode::kNone);
  EXPECT_EQ(OomModeName((*c)->mode()), "none");
  auto cg = (*c)->PrepareWorker(1);
  ASSERT_TRUE(cg.ok());
  EXPECT_TRUE(cg->dir.empty());
  EXPECT_FALSE((*c)->OomKilled(*cg));
}

// Issue 11: a SIGKILLed sluiced left its worker cgroups behind.
TEST(CgroupTest, StaleWorkerCgroupsOfDeadDaemonsAreRemoved) {
  const std::string base = FakeDir("stale");
  // pid 2^22+1 exceeds the kernel's pid_max limit: never a live process.
  const std::string dead = base + "/sluice-worker-4194305-3";
  const std::string mine = absl::StrCat(base, "/sluice-worker-", getpid(), "-1");
  const std::string other = base + "/not-ours";
  for (const std::string& d : {dead, mine, other}) ASSERT_EQ(mkdir(d.c_str(), 0755), 0) << d;
  EXPECT_EQ(RemoveStaleWorkerCgroups(base), 1);
  struct stat st;
  EXPECT_NE(stat(dead.c_str(), &st), 0);
  EXPECT_EQ(stat(mine.c_str(), &st), 0);
  EXPECT_EQ(stat(other.c_str(), &st), 0);
}

}  // namespace
}  // namespace sluice::daemon
