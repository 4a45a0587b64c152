// The checkpoint's tensors copied once into device memory, and the
// translation of host views (Matrix, ExpertMatrix, F32 vectors) into device
// addresses.
#ifndef SLUICE_MODEL_CUDA_DEVICE_WEIGHTS_H_
#define SLUICE_MODEL_CUDA_DEVICE_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/device.h"
#include "loader/ggml_type.h"
#include "model/weights.h"

namespace sluice {

class ModelFiles;

// A matrix on the device: rows of `cols` elements of `type`, row-major.
struct DeviceMatrix {
  GgmlType type = GgmlType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

class DeviceWeights {
 public:
  // Copies every tensor of `files` into one device allocation (each at a
  // 256-byte aligned offset), straight from the mapping.
  // RESOURCE_EXHAUSTED names the bytes needed and free.
  static absl::StatusOr<std::unique_ptr<DeviceWeights>> Upload(
      const ModelFiles& files, cuda::Stream stream);

  // The device address of a host pointer into an uploaded tensor.
  // InvalidArgument when it points into none.
  absl::StatusOr<const void*> Translate(const void* host) const;
  absl::StatusOr<DeviceMatrix> Matrix(const sluice::Matrix& m) const;
  absl::StatusOr<const float*> Floats(const float* host) const;

  uint64_t dense_bytes() const { return dense_bytes_; }
  uint64_t expert_bytes() const { return expert_bytes_; }
  uint64_t device_bytes() const { return buffer_.bytes(); }

 private:
  struct Range {
    const uint8_t* begin;
    const uint8_t* end;
    uint64_t offset;  // into buffer_
  };
  cuda::DeviceBuffer buffer_;
  std::vector<Range> ranges_;  // by begin
  uint64_t dense_bytes_ = 0;
  uint64_t expert_bytes_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_DEVICE_WEIGHTS_H_
