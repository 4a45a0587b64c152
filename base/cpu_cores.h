// How many compute threads this process should use: one per physical core it
// may run on. Hyper-threads of a core share its vector units, so a second
// thread per core adds contention, not mat-vec throughput.
//
// Thread-safety: all functions are reentrant.
#ifndef SLUICE_BASE_CPU_CORES_H_
#define SLUICE_BASE_CPU_CORES_H_

#include <string>
#include <vector>

namespace sluice {

// The CPUs this process may run on (sched_getaffinity), ascending; empty when
// the call fails.
std::vector<int> AffinityCpus();

// The number of physical cores among `cpus`: distinct (package, core) pairs
// read from `<sysfs_cpu_dir>/cpuN/topology/{physical_package_id,core_id}`
// (core ids repeat across packages). When any of those files is missing or
// unreadable it counts every CPU in `cpus` as a core. At least 1.
int CountPhysicalCores(const std::vector<int>& cpus, const std::string& sysfs_cpu_dir);

// CountPhysicalCores(AffinityCpus(), "/sys/devices/system/cpu"); 1 when the
// affinity mask cannot be read.
int PhysicalCoresAvailable();

}  // namespace sluice

#endif  // SLUICE_BASE_CPU_CORES_H_
