// The one way a test says "this cannot run here" (no GPU, no goldens).
//
// Bazel 4 has no skipped status: a test that returns early passes. So every
// skip path prints a marker line, "SLUICE_SKIPPED: <reason>", on stdout before
// it ends the test case; tests/run_all.sh finds the line in the target's
// test.log and counts the target as skipped, not passed. The shell twin is
// sluice_skip in base/testing/testing.sh. Convention: docs/ARCHITECTURE.md,
// "Tests that cannot run here".
//
//   TEST(Foo, NeedsAGpu) {
//     auto devices = ProbeDevices();
//     if (!devices.ok()) SLUICE_SKIP("no CUDA device here: " + devices.status().ToString());
//     ...
//   }
#ifndef SLUICE_BASE_TESTING_SKIP_H_
#define SLUICE_BASE_TESTING_SKIP_H_

#include <string>

#include "gtest/gtest.h"

namespace sluice::testing {

// Prints the marker line and flushes stdout (the test may end abnormally
// later; the line must already be in test.log).
void PrintSkipMarker(const std::string& reason);

}  // namespace sluice::testing

// Ends the current test case as skipped with `reason` (a std::string
// expression). Only in a function returning void, like GTEST_SKIP.
#define SLUICE_SKIP(reason)                                \
  do {                                                     \
    const std::string sluice_skip_reason_ = (reason);      \
    ::sluice::testing::PrintSkipMarker(sluice_skip_reason_); \
    GTEST_SKIP() << sluice_skip_reason_;                   \
  } while (false)

#endif  // SLUICE_BASE_TESTING_SKIP_H_
