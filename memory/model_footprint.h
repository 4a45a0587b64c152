// A model's byte figures for the fit planner, read from its tensor table and
// GGUF metadata only (no weights are touched), so that `sluicectl plan` and
// the worker plan from the same numbers before anything is loaded.
//
// Routed experts are the tensors blk.N.ffn_{gate,up,down}_exps.weight (3-D,
// the expert the slowest dimension): a slot holds one expert's three slices
// of the largest layer. KV and recurrent state follow the backends' layout
// (F32): per attention block 2 x kv_dim floats per token (kv_dim = rows of
// blk.N.attn_k.weight); per latent-attention (MLA, deepseek2) block one row
// of kv_lora_rank + n_rot floats (rows of blk.N.attn_kv_a_mqa.weight); blocks
// without routed experts (deepseek2's dense lead blocks) add no slots; per
// DeltaNet block (kernel - 1) x channels conv
// floats (blk.N.ssm_conv1d.weight) and v_heads x state^2 recurrent floats
// (blk.N.ssm_a, blk.N.ssm_norm.weight). The workspace is an estimate of the
// CUDA backend's activations for one micro-batch of 512 tokens.
#ifndef SLUICE_MEMORY_MODEL_FOOTPRINT_H_
#define SLUICE_MEMORY_MODEL_FOOTPRINT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "loader/model_files.h"
#include "loader/tensor_table.h"
#include "memory/fit_planner.h"

namespace sluice::memory {

// INVALID_ARGUMENT (naming the model and tensor) when an expert tensor is not
// 3-D or the three tensors of a layer disagree on the number of experts;
// context >= 1 and sessions >= 1 are preconditions checked the same way.
absl::StatusOr<ModelFootprint> FootprintOf(const TensorTable& table, int64_t context,
                                           int64_t sessions);

// The same, with experts_used from the metadata's
// <general.architecture>.expert_used_count, which a model with routed
// experts must have (the error names the file and key), in [1, the experts
// of a layer] (INVALID_ARGUMENT otherwise).
absl::StatusOr<ModelFootprint> FootprintOf(const ModelFiles& files, int64_t context,
                                           int64_t sessions);

}  // namespace sluice::memory

#endif  // SLUICE_MEMORY_MODEL_FOOTPRINT_H_
