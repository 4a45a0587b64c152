#include "base/testing/skip.h"

#include <cstdio>

namespace sluice::testing {

void PrintSkipMarker(const std::string& reason) {
  std::printf("SLUICE_SKIPPED: %s\n", reason.c_str());
  std::fflush(stdout);
}

}  // namespace sluice::testing
