// Test helpers shared by model/cuda's sm90 tests (they compare device ops
// with the CPU's): random inputs, the relative error of a result, and
// device buffers that free themselves. A failed CUDA call is a test
// failure, not a crash.
#ifndef SLUICE_MODEL_CUDA_TESTING_SM90_H_
#define SLUICE_MODEL_CUDA_TESTING_SM90_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device.h"

namespace sluice::sm90 {

// n normal values of standard deviation `scale`, the same for a seed.
inline std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// max |gpu - cpu| over max |cpu|.
inline double RelErr(const std::vector<float>& gpu, const std::vector<float>& cpu) {
  double max_diff = 0, max_ref = 1e-30;
  for (size_t i = 0; i < cpu.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(gpu[i]) - cpu[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(cpu[i])));
  }
  return max_diff / max_ref;
}

// Device buffers of a test, freed with it.
class Dev {
 public:
  template <typename T>
  T* Zeros(size_t n) {
    auto b = cuda::DeviceBuffer::Create(std::max<size_t>(n, 1) * sizeof(T));
    EXPECT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(cuda::Memset(b->data(), 0, n * sizeof(T), nullptr).ok());
    bufs_.push_back(*std::move(b));
    return bufs_.back().as<T>();
  }
  template <typename T>
  T* Put(const std::vector<T>& h) {
    T* p = Zeros<T>(h.size());
    EXPECT_TRUE(cuda::CopyToDevice(p, h.data(), h.size() * sizeof(T), nullptr).ok());
    return p;
  }
  // Waits for the default stream, then copies n values back.
  template <typename T>
  std::vector<T> Get(const T* d, size_t n) {
    std::vector<T> h(n);
    EXPECT_TRUE(cuda::Synchronize(nullptr).ok());
    EXPECT_TRUE(cuda::CopyToHost(h.data(), d, n * sizeof(T), nullptr).ok());
    EXPECT_TRUE(cuda::Synchronize(nullptr).ok());
    return h;
  }

 private:
  std::vector<cuda::DeviceBuffer> bufs_;
};

}  // namespace sluice::sm90

#endif  // SLUICE_MODEL_CUDA_TESTING_SM90_H_
