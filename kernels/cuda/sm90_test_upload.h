// Test helper shared by the sm90 test sources: a host vector copied into a
// new device buffer (a failure is a test failure, not a crash).
#ifndef SLUICE_KERNELS_CUDA_SM90_TEST_UPLOAD_H_
#define SLUICE_KERNELS_CUDA_SM90_TEST_UPLOAD_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device.h"

namespace sluice::cuda {

template <typename T>
DeviceBuffer Upload(const std::vector<T>& host) {
  auto buf = DeviceBuffer::Create(std::max<uint64_t>(host.size() * sizeof(T), 1));
  EXPECT_TRUE(buf.ok()) << buf.status();
  if (!host.empty()) {
    EXPECT_TRUE(CopyToDevice(buf->data(), host.data(), host.size() * sizeof(T), nullptr).ok());
  }
  return std::move(*buf);
}

}  // namespace sluice::cuda

#endif  // SLUICE_KERNELS_CUDA_SM90_TEST_UPLOAD_H_
