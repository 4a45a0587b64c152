#include "memory/host_probe.h"

#include "gtest/gtest.h"
#include "loader/testing/gguf_bytes.h"

namespace sluice::memory {
namespace {

TEST(HostProbeTest, ParsesMemTotalAndMemAvailable) {
  auto m = ParseMeminfo("MemTotal:       131072 kB\nMemFree:  1 kB\nMemAvailable:    65536 kB\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->total_bytes, 131072ull * 1024);
  EXPECT_EQ(m->available_bytes, 65536ull * 1024);
}

TEST(HostProbeTest, MissingKeyNamesSourceAndKey) {
  auto m = ParseMeminfo("MemTotal: 10 kB\n", "fake");
  EXPECT_EQ(m.status().message(), "fake: MemAvailable is missing or not a number of kB");
}

TEST(HostProbeTest, ProcProbeReadsTheFile) {
  const std::string path = sluice::testing::MakeTempDir() + "/meminfo";
  sluice::testing::WriteFileOrDie(path, "MemTotal: 2048 kB\nMemAvailable: 1024 kB\n");
  ProcHostProbe probe(path);
  auto m = probe.Memory();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->available_bytes, 1024u * 1024);
  FakeHostProbe fake({7, 3});
  EXPECT_EQ(fake.Memory()->total_bytes, 7u);
}

}  // namespace
}  // namespace sluice::memory
