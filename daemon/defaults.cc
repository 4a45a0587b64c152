#include "daemon/defaults.h"

#include <algorithm>

#include "base/cpu_cores.h"

namespace sluice::daemon {

int DefaultThreads() {
  // Capped at the largest value ValidateConfig accepts.
  static const int threads = std::min(PhysicalCoresAvailable(), 1024);
  return threads;
}

}  // namespace sluice::daemon
