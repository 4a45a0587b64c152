#include "model/cuda/device_weights.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/quant_matmul.h"
#include "loader/model_files.h"
#include "loader/tensor_table.h"

namespace sluice {
absl::StatusOr<std::unique_ptr<DeviceWeights>> DeviceWeights::Upload(
    const ModelFiles& files, int device, cuda::Stream stream, bool upload_experts,
    const std::function<void(std::string_view phase, uint64_t done, uint64_t total)>& progress) {
  auto w = std::unique_ptr<DeviceWeights>(new DeviceWeights());
  ASSIGN_OR_RETURN(w->platform_, memory::CudaPlatform::Create(device));
  ASSIGN_OR_RETURN(std::vector<memory::DenseTensor> dense,
                   memory::DenseTensorsOf(files.tensors()));
  memory::DenseResidency::Progress dense_progress;
  if (progress) {
    dense_progress = [&progress](uint64_t done, uint64_t all) { progress("dense", done, all); };
  }
  ASSIGN_OR_RETURN(w->dense_, memory::DenseResidency::Place(*w->platform_, std::move(dense),
                                                            dense_progress));
  uint64_t total = 0;
  if (!upload_experts) return w;
  for (const TensorEntry& t : files.tensors().entries()) {
    if (t.kind != TensorKind::kRoutedExpert) continue;
    w->ranges_.push_back({t.data, t.data + t.n_bytes, total});
    total += memory::AlignUp(t.n_bytes);
  }
  ASSIGN_OR_RETURN(w->experts_, cuda::DeviceBuffer::Create(total));
  auto* base = w->experts_.as<uint8_t>();
  uint64_t copied = 0, expert_bytes = 0;
  for (const Range& r : w->ranges_) expert_bytes += r.end - r.begin;
  for (const Range& r : w->ranges_) {
    RETURN_IF_ERROR(cuda::CopyToDevice(base + r.offset, r.begin,
                                       r.end - r.begin, stream));
    copied += r.end - r.begin;
    // The copies are asynchronous: "done" is what was enqueued, which the
    // pageable source makes close to what has landed.
    if (progress) progress("experts", copied, expert_bytes);
  }
  RETURN_IF_ERROR(cuda::Synchronize(stream));
  std::sort(w->ranges_.begin(), w->ranges_.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  return w;
}

DeviceWeights::~DeviceWeights() = default;

uint64_t DeviceWeights::dense_bytes() const {
  return dense_->counters().device_bytes_owned;
}

absl::StatusOr<const void*> DeviceWeights::Translate(const void* host) const {
  const auto* p = static_cast<const uint8_t*>(host);
  auto it = std::upper_bound(
      ranges_.begin(), ranges_.end(), p,
      [](const uint8_t* v, const Range& r) { return v < r.begin; });
  if (it != ranges_.begin() && p < std::prev(it)->end) {
    --it;
    return static_cast<const void*>(experts_.as<uint8_t>() + it->offset +
                                    (p - it->begin));
  }
  absl::StatusOr<void*> d = dense_->DevicePointer(host);
  if (!d.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device weights: a weight view points outside every tensor (",
        d.status().message(), ")"));
  }
  return static_cast<const void*>(*d);
}

absl::StatusOr<DeviceMatrix> DeviceWeights::Matrix(const sluice::Matrix& m) const {
  if (!cuda::MatMulSupported(m.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda backend: no device kernel for weights of type ",
                     std::string(TraitsOf(m.type).name), " (", m.rows, " x ",
                     m.cols, ")"));
  }
  ASSIGN_OR_RETURN(const void* d, Translate(m.data));
  return DeviceMatrix{m.type, d, m.rows, m.cols};
}

absl::StatusOr<const float*> DeviceWeights::Floats(const float* host) const {
  ASSIGN_OR_RETURN(const void* d, Translate(host));
  return static_cast<const float*>(d);
}

}  // namespace sluice
