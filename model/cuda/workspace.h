// The device buffers one forward pass of a micro-batch uses (activations,
// routing, expert products, logits), carved from one allocation sized for
// the largest micro-batch.
#ifndef SLUICE_MODEL_CUDA_WORKSPACE_H_
#define SLUICE_MODEL_CUDA_WORKSPACE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"
#include "model/arch.h"

namespace sluice {

struct Workspace {
  // Sizes every buffer for `max_tokens` tokens of `desc`. Logits are held
  // for at most logits_rows rows (max_tokens, fewer for a large
  // vocabulary).
  absl::Status Allocate(const ArchDesc& desc, int64_t max_tokens);
  uint64_t bytes() const { return buffer.bytes(); }

  cuda::DeviceBuffer buffer;
  int64_t logits_rows = 0;

  int32_t* ids_in = nullptr;  // [tokens]
  int32_t* pos0 = nullptr;    // [1]
  // A pass of several sequences (ops.h SeqBatch): each one's rows, each
  // row's sequence, and each layer's state pointers ([layers][sequences]).
  cuda::SeqRows* seq_rows = nullptr;    // [tokens]
  int32_t* row_seq = nullptr;           // [tokens]
  cuda::SeqState* seq_states = nullptr;  // [layers * tokens]
  float *x = nullptr, *xn = nullptr, *y = nullptr;  // [tokens][n_embd]
  // Attention.
  float *q = nullptr, *k = nullptr, *v = nullptr, *attn_o = nullptr;
  // Gated DeltaNet.
  float *qkv = nullptr, *z = nullptr, *beta = nullptr, *g = nullptr,
        *ssm_o = nullptr;
  // MoE.
  float* router_logits = nullptr;  // [tokens][n_expert]
  int32_t* ids = nullptr;          // [tokens][k]
  int32_t* paired_ids = nullptr;   // [tokens][2k]: ids, then ids + n_expert
  float* weights = nullptr;        // [tokens][k]
  int32_t* group_begin = nullptr;  // [n_expert + 1]
  // GroupByExpert's non-empty groups: their experts, their bounds.
  int32_t *active_experts = nullptr, *active_begin = nullptr;  // [n_expert (+1)]
  int32_t *entry_token = nullptr, *slot_entry = nullptr;  // [tokens * k]
  // A mixed pass's long rows grouped apart from its short ones (whose
  // groups take the arrays above; their entries follow the short rows' in
  // entry_token and slot_entry).
  int32_t* long_group_begin = nullptr;  // [n_expert + 1]
  int32_t *long_active_experts = nullptr, *long_active_begin = nullptr;  // [n_expert (+1)]
  // A one-token pass's slots ordered for the overlap of misses: [4k]
  // (batch_pass.h OverlapMissesEnabled).
  int32_t* overlap_slots = nullptr;
  int32_t* zeros = nullptr;  // [2k]: every decode slot reads activation row 0
  int32_t* iota = nullptr;   // [k]: decode slot s is entry s
  float *expert_g = nullptr, *expert_u = nullptr;  // [tokens * k][ff]
  float* expert_y = nullptr;                       // [tokens * k][n_embd]
  float *shared_g = nullptr, *shared_u = nullptr;  // [tokens][shared_ff]
  float* shared_y = nullptr;                       // [tokens][n_embd]
  // Latent attention (carved only for a model with it; mla_ops.h): the q
  // LoRA rows, the queries, the kv_a rows, the absorbed queries and the
  // latent outputs head major ([heads][tokens][...]), the V_b outputs head
  // major, then token major; the per-head products' group bounds and rows.
  float* mla_qa = nullptr;     // [tokens][q_lora_rank]
  float* mla_q = nullptr;      // [tokens][n_head * head_k]
  float* mla_ckv = nullptr;    // [tokens][kv_lora_rank + n_rot]
  float* mla_q_abs = nullptr;  // [n_head * tokens][kv_lora_rank + n_rot]
  float* mla_o_lat = nullptr;  // [n_head * tokens][kv_lora_rank]
  float* mla_part = nullptr;   // MlaAttend's split partials (MlaAttendScratchFloats)
  float* mla_o_heads = nullptr;  // [n_head * tokens][head_v]
  float* mla_o = nullptr;      // [tokens][n_head * head_v]
  int32_t* mla_head_begin = nullptr;  // [n_head + 1]
  int32_t* mla_x_row = nullptr;       // [n_head * tokens]
  // Dense FFN blocks (carved only for a model with them).
  float *dense_g = nullptr, *dense_u = nullptr;  // [tokens][dense ff]
  float* logits = nullptr;                         // [logits_rows][n_vocab]
  // Decode (decode_ops.h): arrival counters (the route's top-k, then the
  // attention's per KV head, then the routed gate/up's per slot from
  // GateUpCountersAt; zero between launches), the attention's
  // partial results and the shared expert's gate logit.
  int32_t* decode_counters = nullptr;
  float* attn_scratch = nullptr;
  float* shared_logit = nullptr;
  // Decode inputs quantized once (decode_ops.h DecodeQ8): a block's input
  // vector, and the routed and shared experts' hidden rows.
  uint8_t* decode_q8 = nullptr;
  uint8_t* decode_q8_h = nullptr;
  // A batch pass's 8-bit activation rows (cuda::RoundActivationsQ8): xn in
  // each format (Q8_K, Q8_0), rounded once for all the products that read
  // it, and the rows of any other product input.
  uint8_t* xn_q8[2] = {nullptr, nullptr};  // [tokens][<= Q8 bytes of n_embd]
  uint8_t* act_q8 = nullptr;               // [the widest other input]
  static int64_t DecodeCounters(const ArchDesc& d);
  static int64_t GateUpCountersAt(const ArchDesc& d);
  static int64_t AttendScratchFloats(const ArchDesc& d);
};

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_WORKSPACE_H_
