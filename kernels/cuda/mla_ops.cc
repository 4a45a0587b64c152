// mla_ops.h's switch (the kernels are in mla_ops.cu).
#include "base/env_switch.h"
#include "kernels/cuda/mla_ops.h"

namespace sluice::cuda {
namespace {

EnvSwitch tensor_cores("SLUICE_CUDA_MLA_TENSOR_CORES", true);
// The same bits (mla_attend_emulation_test, mla_ops_sm90_test); Kimi-K2's
// decode at depth 512 went from 568 to 602 tok/s with 16 heads (run 14).
EnvSwitch few_heads("SLUICE_CUDA_MLA_FEW_HEADS", true);

}  // namespace

bool MlaTensorCoresEnabled() { return tensor_cores.on(); }

void SetMlaTensorCoresEnabled(bool enabled) { tensor_cores.Set(enabled); }

bool MlaFewHeadsEnabled() { return few_heads.on(); }

void SetMlaFewHeadsEnabled(bool enabled) { few_heads.Set(enabled); }

}  // namespace sluice::cuda
