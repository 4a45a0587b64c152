// Where the shared reference goldens are, for tests at every layer.
//
// The lookup: env SLUICE_GOLDENS (an absolute directory; the Makefile sets
// it), else ../shared/goldens beside the repository root (found through the
// WORKSPACE file in a Bazel test's runfiles, or from the working directory
// outside Bazel). When neither is a directory a test skips (SLUICE_SKIP),
// except under CI=true, where a missing goldens directory is a failure.
//
// This is the only implementation: shell tests get the same answer from the
// //base:goldens_dir binary through sluice_require_goldens in
// base/testing/testing.sh.
//
//   TEST(Foo, Bar) {
//     SLUICE_REQUIRE_GOLDENS(dir);   // std::string dir
//     ... dir + "/qwen3moe-micro-f32.gguf" ...
//   }
#ifndef SLUICE_BASE_TESTING_GOLDENS_H_
#define SLUICE_BASE_TESTING_GOLDENS_H_

#include <optional>
#include <string>

#include "base/testing/skip.h"
#include "gtest/gtest.h"

namespace sluice::testing {

// The goldens directory, or nullopt when the lookup above finds none.
std::optional<std::string> GoldensDir();

// The deepseek2 goldens (../shared/goldens-deepseek2, beside goldens/ so
// that nothing counting the goldens changes): env SLUICE_GOLDENS_DEEPSEEK2
// (an absolute directory), else goldens-deepseek2 beside a SLUICE_GOLDENS
// directory, else ../shared/goldens-deepseek2 beside the repository root;
// nullopt when that is not a directory. SLUICE_REQUIRE_GOLDENS_DEEPSEEK2
// skips or fails (CI=true) as SLUICE_REQUIRE_GOLDENS does.
std::optional<std::string> GoldensDeepseek2Dir();

// True when env CI is "true" (missing goldens must then fail, not skip).
bool InCi();

// The message for a missing goldens directory.
inline constexpr char kNoGoldens[] =
    "no goldens directory (SLUICE_GOLDENS or ../shared/goldens)";
inline constexpr char kNoGoldensDeepseek2[] =
    "no deepseek2 goldens directory (SLUICE_GOLDENS_DEEPSEEK2 or "
    "../shared/goldens-deepseek2)";

}  // namespace sluice::testing

// Declares `std::string var` holding the goldens directory, or ends the
// current test: skipped normally, a failure under CI=true.
#define SLUICE_REQUIRE_GOLDENS(var) \
  SLUICE_REQUIRE_GOLDENS_IMPL_(var, GoldensDir, kNoGoldens)
#define SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(var) \
  SLUICE_REQUIRE_GOLDENS_IMPL_(var, GoldensDeepseek2Dir, kNoGoldensDeepseek2)

#define SLUICE_REQUIRE_GOLDENS_IMPL_(var, lookup, message)                  \
  std::string var;                                                           \
  do {                                                                       \
    std::optional<std::string> sluice_goldens_ =                             \
        ::sluice::testing::lookup();                                         \
    if (!sluice_goldens_.has_value()) {                                      \
      if (::sluice::testing::InCi()) {                                       \
        FAIL() << ::sluice::testing::message << " under CI=true";           \
      }                                                                      \
      SLUICE_SKIP(::sluice::testing::message);                               \
    }                                                                        \
    var = *sluice_goldens_;                                                  \
  } while (false)

#endif  // SLUICE_BASE_TESTING_GOLDENS_H_
