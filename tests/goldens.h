// Locating the shared reference goldens from tests.
//
// Tests find goldens through env SLUICE_GOLDENS (an absolute directory; the
// Makefile sets it), else ../shared/goldens beside the repository root. When
// neither is a directory a test skips with a message,
// except under CI=true, where a missing goldens directory is a failure.
//
//   TEST(Foo, Bar) {
//     SLUICE_REQUIRE_GOLDENS(dir);   // std::string dir
//     ... dir + "/qwen3moe-micro-f32.gguf" ...
//   }
#ifndef SLUICE_TESTS_GOLDENS_H_
#define SLUICE_TESTS_GOLDENS_H_

#include <climits>
#include <cstdlib>
#include <optional>
#include <string>
#include <sys/stat.h>

#include "gtest/gtest.h"

namespace sluice::testing {

// The goldens directory: env SLUICE_GOLDENS when set, else `../shared/goldens`
// beside the repository root (found through the WORKSPACE file in a Bazel
// test's runfiles, or from the working directory outside Bazel); nullopt when
// that is not a directory.
inline std::optional<std::string> GoldensDir() {
  auto is_dir = [](const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  };
  const char* env = std::getenv("SLUICE_GOLDENS");
  if (env != nullptr && env[0] != '\0') {
    if (is_dir(env)) return std::string(env);
    return std::nullopt;
  }
  std::string root = ".";
  if (const char* srcdir = std::getenv("TEST_SRCDIR"); srcdir != nullptr) {
    std::string workspace = std::string(srcdir) + "/sluice/WORKSPACE";
    if (char* real = realpath(workspace.c_str(), nullptr); real != nullptr) {
      root = real;
      free(real);
      root.resize(root.rfind('/'));
    }
  }
  std::string fallback = root + "/../shared/goldens";
  if (is_dir(fallback)) return fallback;
  return std::nullopt;
}

// True when env CI is "true" (missing goldens must then fail, not skip).
inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

}  // namespace sluice::testing

// Declares `std::string var` holding the goldens directory, or ends the
// current test: GTEST_SKIP normally, a failure under CI=true.
#define SLUICE_REQUIRE_GOLDENS(var)                                        \
  std::string var;                                                         \
  do {                                                                     \
    std::optional<std::string> sluice_goldens_ =                           \
        ::sluice::testing::GoldensDir();                                   \
    if (!sluice_goldens_.has_value()) {                                    \
      if (::sluice::testing::InCi()) {                                     \
        FAIL() << "no goldens directory (SLUICE_GOLDENS or ../shared/goldens) under CI=true"; \
      }                                                                    \
      GTEST_SKIP() << "no goldens directory (SLUICE_GOLDENS or ../shared/goldens); skipping"; \
    }                                                                      \
    var = *sluice_goldens_;                                                \
  } while (false)

#endif  // SLUICE_TESTS_GOLDENS_H_
