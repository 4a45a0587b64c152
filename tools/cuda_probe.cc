// Prints every CUDA device's attributes and runs a self-test kernel on each.
// Exit status: 0 all devices passed, 1 a self-test failed, 2 no device.
//
//   bazel run //tools:cuda_probe
#include <cstdio>

#include "kernels/cuda/device_probe.h"

int main() {
  auto devices = sluice::cuda::ProbeDevices();
  if (!devices.ok()) {
    std::fprintf(stderr, "cuda_probe: %s\n", devices.status().ToString().c_str());
    return 2;
  }
  int rc = 0;
  for (const auto& d : *devices) {
    std::printf("%s", sluice::cuda::FormatDeviceInfo(d).c_str());
    absl::Status self_test = sluice::cuda::RunSelfTest(d.index);
    std::printf("self_test=%s\n", self_test.ok() ? "ok" : self_test.ToString().c_str());
    if (!self_test.ok()) rc = 1;
  }
  return rc;
}
