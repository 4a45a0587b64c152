// mla_ops.h's switch (the kernels are in mla_ops.cu).
#include "base/env_switch.h"
#include "kernels/cuda/mla_ops.h"

namespace sluice::cuda {
namespace {

EnvSwitch staged("SLUICE_CUDA_MLA_STAGED", false);

}  // namespace

bool MlaStagedEnabled() { return staged.on(); }

void SetMlaStagedEnabled(bool enabled) { staged.Set(enabled); }

}  // namespace sluice::cuda
