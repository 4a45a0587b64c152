// dequant: writes one GGUF tensor, dequantized, as raw little-endian float32
// in GGUF element order.
//
//   bazel run //tools:dequant -- MODEL.gguf TENSOR_NAME OUT.f32
#include <cstdio>

#include "tools/dequant_lib.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf TENSOR_NAME OUT.f32\n", argv[0]);
    return 2;
  }
  absl::StatusOr<int64_t> n = sluice::tools::DequantizeTensorToFile(argv[1], argv[2], argv[3]);
  if (!n.ok()) {
    std::fprintf(stderr, "dequant: %s\n", n.status().ToString().c_str());
    return 1;
  }
  std::printf("%s: wrote %lld float32 values of '%s' to %s\n", argv[1],
              static_cast<long long>(*n), argv[2], argv[3]);
  return 0;
}
