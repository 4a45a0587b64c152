// mla_ops.h's switch (the kernels are in mla_ops.cu).
#include "base/env_switch.h"
#include "kernels/cuda/mla_ops.h"

namespace sluice::cuda {
namespace {

EnvSwitch tensor_cores("SLUICE_CUDA_MLA_TENSOR_CORES", true);

}  // namespace

bool MlaTensorCoresEnabled() { return tensor_cores.on(); }

void SetMlaTensorCoresEnabled(bool enabled) { tensor_cores.Set(enabled); }

}  // namespace sluice::cuda
