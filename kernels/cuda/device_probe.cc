#include "kernels/cuda/device_probe.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_probe_impl.h"

namespace sluice::cuda {
namespace {

absl::Status CudaError(int rc, const char* what) {
  return absl::UnavailableError(
      absl::StrCat(what, ": CUDA error ", rc, " (", internal::ErrorString(rc), ")"));
}

}  // namespace

absl::StatusOr<std::vector<DeviceInfo>> ProbeDevices() {
  int count = 0;
  if (int rc = internal::DeviceCount(&count); rc != 0) {
    return CudaError(rc, "cudaGetDeviceCount");
  }
  if (count == 0) return absl::UnavailableError("no CUDA device is visible");
  std::vector<DeviceInfo> out;
  for (int d = 0; d < count; ++d) {
    internal::RawDeviceInfo raw;
    if (int rc = internal::Probe(d, &raw); rc != 0) {
      return CudaError(rc, absl::StrCat("probing device ", d).c_str());
    }
    DeviceInfo info;
    info.index = d;
    info.name = raw.name;
    info.cc_major = raw.cc_major;
    info.cc_minor = raw.cc_minor;
    info.total_bytes = raw.total_bytes;
    info.free_bytes = raw.free_bytes;
    info.multiprocessors = raw.multiprocessors;
    info.l2_bytes = raw.l2_bytes;
    info.pageable_memory_access = raw.pageable_memory_access;
    info.integrated = raw.integrated;
    info.host_register_supported = raw.host_register_supported;
    info.host_register_read_only_supported = raw.host_register_read_only_supported;
    info.concurrent_managed_access = raw.concurrent_managed_access;
    info.pci_bus = raw.pci_bus;
    info.pci_device = raw.pci_device;
    info.driver_version = raw.driver_version;
    info.runtime_version = raw.runtime_version;
    out.push_back(std::move(info));
  }
  return out;
}

absl::Status RunSelfTest(int device) {
  constexpr int kN = 1000;
  std::vector<float> x(kN), y(kN);
  for (int i = 0; i < kN; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  if (int rc = internal::Axpy(device, kN, 2.0f, x.data(), y.data()); rc != 0) {
    return CudaError(rc, "self-test kernel");
  }
  for (int i = 0; i < kN; ++i) {
    float want = 2.0f * static_cast<float>(i) + 1.0f;
    if (y[i] != want) {
      return absl::InternalError(absl::StrCat("self-test on device ", device, ": y[", i,
                                              "] = ", y[i], ", want ", want));
    }
  }
  return absl::OkStatus();
}

std::string FormatDeviceInfo(const DeviceInfo& i) {
  return absl::StrCat(
      "device=", i.index, "\nname=", i.name, "\ncompute_capability=", i.cc_major, ".",
      i.cc_minor, "\ntotal_bytes=", i.total_bytes, "\nfree_bytes=", i.free_bytes,
      "\nmultiprocessors=", i.multiprocessors, "\nl2_bytes=", i.l2_bytes,
      "\npageable_memory_access=", i.pageable_memory_access, "\nintegrated=", i.integrated,
      "\nhost_register_supported=", i.host_register_supported,
      "\nhost_register_read_only_supported=", i.host_register_read_only_supported,
      "\nconcurrent_managed_access=", i.concurrent_managed_access, "\npci_bus=", i.pci_bus,
      "\npci_device=", i.pci_device, "\ndriver_version=", i.driver_version,
      "\nruntime_version=", i.runtime_version,
      "\ncan_alias_host_memory=", i.CanAliasHostMemory() ? 1 : 0, "\n");
}

}  // namespace sluice::cuda
