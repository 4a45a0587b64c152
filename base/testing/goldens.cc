#include "base/testing/goldens.h"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>

namespace sluice::testing {
namespace {

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::optional<std::string> GoldensDir() {
  const char* env = std::getenv("SLUICE_GOLDENS");
  if (env != nullptr && env[0] != '\0') {
    if (IsDir(env)) return std::string(env);
    return std::nullopt;
  }
  // In a Bazel test the runfiles WORKSPACE is a symlink into the source tree;
  // its target's directory is the repository root.
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
  if (IsDir(fallback)) return fallback;
  return std::nullopt;
}

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

}  // namespace sluice::testing
