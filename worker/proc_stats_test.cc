#include "worker/proc_stats.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace sluice::worker {
namespace {

TEST(ProcStatsTest, ParsesStatusAndStat) {
  const std::string dir = getenv("TEST_TMPDIR");
  std::ofstream(dir + "/status") << "Name:\tw\nVmRSS:\t  900 kB\nRssAnon:\t  100 kB\n"
                                    "RssFile:\t  800 kB\nVmSwap:\t      3 kB\n";
  std::ofstream(dir + "/stat")
      << "77 (sluice worker) S 1 77 77 0 -1 4194560 1234 0 56 0 9 8 0 0 20 0 3 0\n";
  ProcStats s = ReadProcStats(dir + "/status", dir + "/stat");
  EXPECT_EQ(s.rss_anon_bytes, 100u * 1024);
  EXPECT_EQ(s.rss_file_bytes, 800u * 1024);
  EXPECT_EQ(s.swap_bytes, 3u * 1024);
  EXPECT_EQ(s.major_faults, 56u);
}

TEST(ProcStatsTest, ReadsTheLiveProcess) {
  ProcStats s = ReadProcStats();
  EXPECT_GT(s.rss_anon_bytes + s.rss_file_bytes, 0u);
}

}  // namespace
}  // namespace sluice::worker
