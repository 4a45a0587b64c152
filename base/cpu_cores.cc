#include "base/cpu_cores.h"

#include <sched.h>

#include <fstream>
#include <optional>
#include <set>
#include <utility>

namespace sluice {
namespace {

std::optional<long> ReadNumber(const std::string& path) {
  std::ifstream in(path);
  long value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

}  // namespace

std::vector<int> AffinityCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

int CountPhysicalCores(const std::vector<int>& cpus, const std::string& sysfs_cpu_dir) {
  std::set<std::pair<long, long>> cores;
  for (int cpu : cpus) {
    const std::string topology = sysfs_cpu_dir + "/cpu" + std::to_string(cpu) + "/topology/";
    std::optional<long> package = ReadNumber(topology + "physical_package_id");
    std::optional<long> core = ReadNumber(topology + "core_id");
    // Without the topology (some containers, other kernels) hyper-threads
    // cannot be told apart; every allowed CPU is the honest fallback.
    if (!package.has_value() || !core.has_value()) {
      return cpus.empty() ? 1 : static_cast<int>(cpus.size());
    }
    cores.emplace(*package, *core);
  }
  return cores.empty() ? 1 : static_cast<int>(cores.size());
}

int PhysicalCoresAvailable() {
  return CountPhysicalCores(AffinityCpus(), "/sys/devices/system/cpu");
}

}  // namespace sluice
