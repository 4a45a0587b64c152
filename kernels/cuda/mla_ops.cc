// mla_ops.h's switch (the kernels are in mla_ops.cu).
#include "base/env_switch.h"
#include "kernels/cuda/mla_ops.h"

namespace sluice::cuda {
namespace {

EnvSwitch tensor_cores("SLUICE_CUDA_MLA_TENSOR_CORES", true);
// Off until run on a GPU (emulated: the same bits, mla_attend_emulation_test).
EnvSwitch few_heads("SLUICE_CUDA_MLA_FEW_HEADS", false);

}  // namespace

bool MlaTensorCoresEnabled() { return tensor_cores.on(); }

void SetMlaTensorCoresEnabled(bool enabled) { tensor_cores.Set(enabled); }

bool MlaFewHeadsEnabled() { return few_heads.on(); }

void SetMlaFewHeadsEnabled(bool enabled) { few_heads.Set(enabled); }

}  // namespace sluice::cuda
