// The public description of a model architecture, shared by every backend.
//
// Each architecture lives in one file (qwen3moe.cc, qwen35moe.cc,
// deepseek2.cc) in two
// parts: its hyper-parameters read from GGUF metadata, and every tensor
// declared with its expected shape (a mismatch is an error naming the file,
// the tensor, the expected and the actual shape). The result is an ArchDesc:
// a trunk of pre-norm residual blocks between the embedding lookup and the
// LM head,
//
//   h   = x + Mixer_il(RMSNorm(x; mixer_norm))   Mixer: attention, DeltaNet
//                                                 or latent attention (MLA)
//   out = h + Ffn_il(RMSNorm(h; ffn_norm))        Ffn: MoE or a dense SwiGLU
//
// which a backend computes (cpu_model.h on the host, model/cuda on a GPU).
// Adding an architecture is one file that fills an ArchDesc and one line in
// the registry (arch.cc).
//
// Every weight in an ArchDesc is a view into the read-only mapping owned by
// ModelFiles, which must outlive it.
#ifndef SLUICE_MODEL_ARCH_H_
#define SLUICE_MODEL_ARCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/arch_util.h"
#include "model/attention.h"
#include "model/delta_net.h"
#include "model/mla.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/state.h"

namespace sluice {

class ModelFiles;

enum class MixerKind { kAttention, kDeltaNet, kLatentAttention };
// A block's FFN: routed experts (every qwen block, deepseek2's later ones)
// or one dense SwiGLU (deepseek2's leading_dense_block_count blocks).
enum class FfnKind { kMoe, kDense };

struct LayerDesc {
  MixerKind mixer = MixerKind::kAttention;
  FfnKind ffn = FfnKind::kMoe;
  const float* mixer_norm = nullptr;  // [n_embd]
  const float* ffn_norm = nullptr;    // [n_embd]
  AttentionWeights attn;              // kAttention blocks
  DeltaNetWeights delta;              // kDeltaNet blocks
  MlaWeights mla;                     // kLatentAttention blocks
  MoeWeights moe;                     // kMoe blocks (empty in kDense ones)
  DenseFfnWeights dense;              // kDense blocks
};

struct ArchDesc {
  ModelInfo info;
  float eps = 0;  // of the block norms and the output norm
  AttentionConfig attn;
  DeltaNetConfig ssm;  // used when some block is kDeltaNet
  MlaConfig mla;       // used when some block is kLatentAttention
  MoeConfig moe;
  OutputHead head;
  std::vector<LayerDesc> layers;

  // What each block keeps between calls (KV or conv/recurrent state).
  std::vector<BlockStateShape> StateShapes() const;
};

// source->Bind with d's shape (RoutingSource, model/moe.h); OK for null.
absl::Status BindRoutingSource(RoutingSource* source, const ArchDesc& d);


using DescribeFn = absl::StatusOr<ArchDesc> (*)(const ModelFiles&);

struct ArchEntry {
  const char* name;  // general.architecture
  DescribeFn describe;
};

// Every supported architecture, in a fixed order.
absl::Span<const ArchEntry> ArchRegistry();

// The description of the model in `files`, by general.architecture.
// InvalidArgument for an architecture not in the registry (the message names
// the file, the value and the supported ones) and for every malformed key or
// tensor.
absl::StatusOr<ArchDesc> DescribeModel(const ModelFiles& files);

// The architectures (qwen3moe.cc, qwen35moe.cc, deepseek2.cc).
absl::StatusOr<ArchDesc> DescribeQwen3Moe(const ModelFiles& files);
absl::StatusOr<ArchDesc> DescribeQwen35Moe(const ModelFiles& files);
absl::StatusOr<ArchDesc> DescribeDeepseek2(const ModelFiles& files);

}  // namespace sluice

#endif  // SLUICE_MODEL_ARCH_H_
