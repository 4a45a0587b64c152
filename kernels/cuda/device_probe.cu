#include <cuda_runtime.h>

#include "kernels/cuda/device_probe_impl.h"

namespace sluice::cuda::internal {
namespace {

__global__ void AxpyKernel(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int Attr(cudaDeviceAttr attr, int device, int* out) {
  return static_cast<int>(cudaDeviceGetAttribute(out, attr, device));
}

}  // namespace

const char* ErrorString(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

int DeviceCount(int* count) { return static_cast<int>(cudaGetDeviceCount(count)); }

int Probe(int device, RawDeviceInfo* out) {
  cudaDeviceProp prop;
  int rc = static_cast<int>(cudaGetDeviceProperties(&prop, device));
  if (rc != 0) return rc;
  for (int i = 0; i < static_cast<int>(sizeof(out->name)) - 1 && prop.name[i]; ++i) {
    out->name[i] = prop.name[i];
  }
  out->cc_major = prop.major;
  out->cc_minor = prop.minor;
  out->multiprocessors = prop.multiProcessorCount;
  out->l2_bytes = prop.l2CacheSize;
  out->pci_bus = prop.pciBusID;
  out->pci_device = prop.pciDeviceID;
  const struct {
    cudaDeviceAttr attr;
    int* dst;
  } attrs[] = {
      {cudaDevAttrPageableMemoryAccess, &out->pageable_memory_access},
      {cudaDevAttrIntegrated, &out->integrated},
      {cudaDevAttrHostRegisterSupported, &out->host_register_supported},
      {cudaDevAttrHostRegisterReadOnlySupported, &out->host_register_read_only_supported},
      {cudaDevAttrConcurrentManagedAccess, &out->concurrent_managed_access},
  };
  for (const auto& a : attrs) {
    rc = Attr(a.attr, device, a.dst);
    if (rc != 0) return rc;
  }
  rc = static_cast<int>(cudaSetDevice(device));
  if (rc != 0) return rc;
  size_t free_bytes = 0, total_bytes = 0;
  rc = static_cast<int>(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (rc != 0) return rc;
  out->free_bytes = free_bytes;
  out->total_bytes = total_bytes;
  rc = static_cast<int>(cudaDriverGetVersion(&out->driver_version));
  if (rc != 0) return rc;
  return static_cast<int>(cudaRuntimeGetVersion(&out->runtime_version));
}

int Axpy(int device, int n, float a, const float* x, float* y) {
  int rc = static_cast<int>(cudaSetDevice(device));
  if (rc != 0) return rc;
  float* dx = nullptr;
  float* dy = nullptr;
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if ((rc = static_cast<int>(cudaMalloc(&dx, bytes))) != 0) return rc;
  if ((rc = static_cast<int>(cudaMalloc(&dy, bytes))) != 0) {
    cudaFree(dx);
    return rc;
  }
  rc = static_cast<int>(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice));
  if (rc == 0) rc = static_cast<int>(cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice));
  if (rc == 0) {
    AxpyKernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    rc = static_cast<int>(cudaGetLastError());
  }
  if (rc == 0) rc = static_cast<int>(cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(dy);
  return rc;
}

}  // namespace sluice::cuda::internal
