// The checkpoint's tensors copied once into device memory, and the
// translation of host views (Matrix, ExpertMatrix, F32 vectors) into device
// addresses.
#ifndef SLUICE_MODEL_CUDA_DEVICE_WEIGHTS_H_
#define SLUICE_MODEL_CUDA_DEVICE_WEIGHTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "format/ggml_type.h"
#include "kernels/cuda/device.h"
#include "memory/cuda_platform.h"
#include "memory/dense_residency.h"
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

// Dense tensors are placed by memory::DenseResidency (on a discrete GPU one
// device copy each, made straight from the mapping; an alias of the mapping
// on unified-memory parts). Routed experts are all copied into one device
// block: the arena at 100% of the expert bytes, until the slot cache keeps
// only some of them.
class DeviceWeights {
 public:
  // RESOURCE_EXHAUSTED names the bytes needed and free. With
  // `upload_experts` false the routed experts stay in the mapping (the
  // expert stream brings them into slots) and Translate refuses them.
  static absl::StatusOr<std::unique_ptr<DeviceWeights>> Upload(
      const ModelFiles& files, int device, cuda::Stream stream,
      bool upload_experts = true,
      const std::function<void(std::string_view phase, uint64_t done, uint64_t total)>&
          progress = nullptr);
  ~DeviceWeights();

  // The device address of a host pointer into an uploaded tensor.
  // InvalidArgument when it points into none.
  absl::StatusOr<const void*> Translate(const void* host) const;
  absl::StatusOr<DeviceMatrix> Matrix(const sluice::Matrix& m) const;
  absl::StatusOr<const float*> Floats(const float* host) const;

  // Device bytes holding dense tensors (copies; 0 where aliased) and the
  // routed experts.
  uint64_t dense_bytes() const;
  uint64_t expert_bytes() const { return experts_.bytes(); }

 private:
  struct Range {
    const uint8_t* begin;
    const uint8_t* end;
    uint64_t offset;  // into experts_
  };
  DeviceWeights() = default;

  std::unique_ptr<memory::CudaPlatform> platform_;
  std::unique_ptr<memory::DenseResidency> dense_;
  cuda::DeviceBuffer experts_;
  std::vector<Range> ranges_;  // expert tensors, by begin
};

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_DEVICE_WEIGHTS_H_
