// Locating the shared reference goldens from tests.
//
// Tests find goldens through env SLUICE_GOLDENS (an absolute directory; the
// Makefile sets it). When it is unset or absent a test skips with a message,
// except under CI=true, where a missing goldens directory is a failure.
//
//   TEST(Foo, Bar) {
//     SLUICE_REQUIRE_GOLDENS(dir);   // std::string dir
//     ... dir + "/qwen3moe-micro-f32.gguf" ...
//   }
#ifndef SLUICE_TESTS_GOLDENS_H_
#define SLUICE_TESTS_GOLDENS_H_

#include <cstdlib>
#include <optional>
#include <string>
#include <sys/stat.h>

#include "gtest/gtest.h"

namespace sluice::testing {

// The goldens directory, or nullopt when SLUICE_GOLDENS is unset, empty or
// not a directory.
inline std::optional<std::string> GoldensDir() {
  const char* env = std::getenv("SLUICE_GOLDENS");
  if (env == nullptr || env[0] == '\0') return std::nullopt;
  struct stat st;
  if (stat(env, &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return std::string(env);
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
        FAIL() << "SLUICE_GOLDENS unset or not a directory under CI=true"; \
      }                                                                    \
      GTEST_SKIP() << "SLUICE_GOLDENS unset or not a directory; skipping"; \
    }                                                                      \
    var = *sluice_goldens_;                                                \
  } while (false)

#endif  // SLUICE_TESTS_GOLDENS_H_
