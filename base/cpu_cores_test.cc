#include "base/cpu_cores.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

// A fake /sys/devices/system/cpu under TEST_TMPDIR.
class FakeSysfs {
 public:
  explicit FakeSysfs(const std::string& name)
      : dir_(std::string(std::getenv("TEST_TMPDIR")) + "/" + name) {
    mkdir(dir_.c_str(), 0755);
  }
  void AddCpu(int cpu, int package, int core) {
    const std::string cpu_dir = dir_ + "/cpu" + std::to_string(cpu);
    mkdir(cpu_dir.c_str(), 0755);
    mkdir((cpu_dir + "/topology").c_str(), 0755);
    std::ofstream(cpu_dir + "/topology/physical_package_id") << package << "\n";
    std::ofstream(cpu_dir + "/topology/core_id") << core << "\n";
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

TEST(CountPhysicalCoresTest, HyperThreadSiblingsCountOnce) {
  FakeSysfs sys("smt");
  // 4 cores, 2 threads each; Linux numbers the siblings n and n + 4.
  for (int cpu = 0; cpu < 8; ++cpu) sys.AddCpu(cpu, 0, cpu % 4);
  EXPECT_EQ(CountPhysicalCores({0, 1, 2, 3, 4, 5, 6, 7}, sys.dir()), 4);
  // An affinity mask of both threads of cores 0 and 1, one of core 2.
  EXPECT_EQ(CountPhysicalCores({0, 4, 1, 5, 2}, sys.dir()), 3);
}

TEST(CountPhysicalCoresTest, SameCoreIdOnTwoPackagesIsTwoCores) {
  FakeSysfs sys("packages");
  sys.AddCpu(0, 0, 0);
  sys.AddCpu(1, 1, 0);
  sys.AddCpu(2, 0, 1);
  sys.AddCpu(3, 1, 1);
  EXPECT_EQ(CountPhysicalCores({0, 1, 2, 3}, sys.dir()), 4);
}

TEST(CountPhysicalCoresTest, MissingTopologyFallsBackToTheAffinityCount) {
  FakeSysfs sys("partial");
  sys.AddCpu(0, 0, 0);
  sys.AddCpu(1, 0, 0);
  // cpu2 has no topology directory.
  EXPECT_EQ(CountPhysicalCores({0, 1, 2}, sys.dir()), 3);
  EXPECT_EQ(CountPhysicalCores({0, 1}, sys.dir() + "/nonexistent"), 2);
}

TEST(CountPhysicalCoresTest, NoCpusIsOneThread) {
  EXPECT_EQ(CountPhysicalCores({}, "/nonexistent"), 1);
}

TEST(PhysicalCoresAvailableTest, BetweenOneAndTheAffinityCount) {
  const std::vector<int> cpus = AffinityCpus();
  ASSERT_FALSE(cpus.empty());
  const int cores = PhysicalCoresAvailable();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(cpus.size()));
}

}  // namespace
}  // namespace sluice
