// inspect: dumps a GGUF model (any shard of a split set opens the whole set).
//
//   bazel run //tools:inspect -- FILE.gguf [--summary] [--array-elements N]
//
// With --summary only the shard list and, last, the line
// "tensors=N bytes=B dense_bytes=D expert_bytes=E shards=S" are printed.
#include <cstdio>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "tools/inspect_lib.h"

int main(int argc, char** argv) {
  std::string path;
  bool summary = false;
  int max_elements = 8;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--summary") {
      summary = true;
    } else if ((arg == "--array-elements" || arg == "--array_elements") && i + 1 < argc &&
               absl::SimpleAtoi(argv[i + 1], &max_elements)) {
      ++i;
    } else if (arg.rfind("--", 0) != 0 && path.empty()) {
      path = arg;
    } else {
      std::fprintf(stderr,
                   "usage: inspect FILE.gguf [--summary] [--array-elements N]\n");
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: inspect FILE.gguf [--summary] [--array-elements N]\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<sluice::ModelFiles>> files = sluice::ModelFiles::Open(path);
  if (!files.ok()) {
    std::fprintf(stderr, "inspect: %s\n", files.status().ToString().c_str());
    return 1;
  }
  sluice::inspect::Dump(**files, summary, max_elements, std::cout);
  return 0;
}
