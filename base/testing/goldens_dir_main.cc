// goldens_dir: the goldens lookup of base/testing/goldens.h for shell tests.
// Prints the directory and exits 0; when there is none, prints why on stderr
// and exits 2 (skip) or, under CI=true, 1 (fail).
#include <cstdio>

#include "base/testing/goldens.h"

int main() {
  std::optional<std::string> dir = sluice::testing::GoldensDir();
  if (dir.has_value()) {
    std::printf("%s\n", dir->c_str());
    return 0;
  }
  const bool ci = sluice::testing::InCi();
  std::fprintf(stderr, "%s%s\n", sluice::testing::kNoGoldens, ci ? " under CI=true" : "");
  return ci ? 1 : 2;
}
