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

// In a Bazel test the runfiles WORKSPACE is a symlink into the source tree;
// its target's directory is the repository root.
std::string RepositoryRoot() {
  std::string root = ".";
  if (const char* srcdir = std::getenv("TEST_SRCDIR"); srcdir != nullptr) {
    std::string workspace = std::string(srcdir) + "/sluice/WORKSPACE";
    if (char* real = realpath(workspace.c_str(), nullptr); real != nullptr) {
      root = real;
      free(real);
      root.resize(root.rfind('/'));
    }
  }
  return root;
}

// The directory env names (set and non-empty), or nullopt when it names no
// directory; unset: `fallback`.
std::optional<std::string> FromEnvOr(const char* env_name,
                                     const std::string& fallback) {
  const char* env = std::getenv(env_name);
  if (env != nullptr && env[0] != '\0') {
    if (IsDir(env)) return std::string(env);
    return std::nullopt;
  }
  if (IsDir(fallback)) return fallback;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> GoldensDir() {
  return FromEnvOr("SLUICE_GOLDENS", RepositoryRoot() + "/../shared/goldens");
}

std::optional<std::string> GoldensDeepseek2Dir() {
  std::string fallback = RepositoryRoot() + "/../shared/goldens-deepseek2";
  if (const char* g = std::getenv("SLUICE_GOLDENS"); g != nullptr && g[0] != '\0') {
    std::string dir = g;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    const size_t slash = dir.rfind('/');
    fallback = (slash == std::string::npos ? std::string(".") : dir.substr(0, slash)) +
               "/goldens-deepseek2";
  }
  return FromEnvOr("SLUICE_GOLDENS_DEEPSEEK2", fallback);
}

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

}  // namespace sluice::testing
