// Internal to mkmodel_lib: the tensor list, per-tensor types and the
// generator shared by mkmodel_lib.cc, mkmodel_types.cc and mkmodel_gen.cc.
#ifndef SLUICE_MODEL_TESTING_MKMODEL_INTERNAL_H_
#define SLUICE_MODEL_TESTING_MKMODEL_INTERNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loader/gguf_writer.h"
#include "model/testing/mkmodel.h"

namespace sluice::mkmodel::internal {

// How a tensor's values are drawn.
enum class Init {
  kMatrix,     // N(0,1) / sqrt(ne[0]) * scale
  kEmbedding,  // N(0,1)
  kOutput,     // kMatrix with a log-normal (sigma 0.5) norm per row
  kNorm,       // 1 + 0.05 N(0,1)
  kSsmA,       // -exp(0.5 N(0,1)): negative decay rates
  kDtBias,     // -2 + 0.5 N(0,1): softplus of it is ~0.1
  kBias,       // 0.1 N(0,1) (deepseek2's exp_probs_b)
  // deepseek2's fused attn_kv_b: per head the attn_k_b values transposed,
  // then attn_v_b's (the split tensors' draws), so the fused and the split
  // files hold the same model.
  kFusedKvB,
};

struct Spec {
  std::string name;
  std::vector<uint64_t> ne;
  Init init = Init::kMatrix;
  float scale = 1.0f;
  bool quantizable = false;  // may take a quantized type (else F32)
  int layer = -1;            // block index; -1 outside the blocks
  GgmlType type = GgmlType::kF32;  // set by AssignTypes
};

// Output projections of residual branches are drawn this much smaller.
inline constexpr float kResidualScale = 0.3f;

// A quantizable matrix (N(0,1)/sqrt(ne[0]) * scale) and an F32 vector.
Spec Matrix(std::string name, std::vector<uint64_t> ne, float scale = 1.0f);
Spec Vector(std::string name, uint64_t n, Init init);

// The tokenizer keys every file carries (tokenizer.ggml.*).
void AddTokenizer(const Vocab& v, std::vector<GgufKv>& kv);

// deepseek2 (mkmodel_deepseek2.cc): block il's tensors with prefix p, the
// named shapes, the shape checks and the metadata.
void AddDeepseek2Block(const ModelShape& s, uint32_t l, const std::string& p,
                       std::vector<Spec>& out);
absl::StatusOr<ModelShape> Deepseek2Shape(const std::string& name);
absl::Status CheckDeepseek2Shape(const ModelShape& s);
std::vector<GgufKv> Deepseek2Metadata(const Options& o, const Vocab& v);

// Tensor list in the order of the golden F32 files (types not yet set).
std::vector<Spec> TensorSpecs(Arch arch, const ModelShape& s, uint64_t n_vocab);

// Sets every spec's file type from Options::mix / Options::type
// (mkmodel_types.cc holds the tables).
void AssignTypes(const Options& o, std::vector<Spec>& specs);
// general.file_type for the options (llama_ftype numbering).
uint32_t FileTypeId(const Options& o);

// Rows of a spec (product of ne[1..]).
uint64_t Rows(const Spec& spec);

// Rows [first_row, first_row + n_rows) of `spec` as WriteModel draws them
// (routing locality applied). Any split into ranges gives the same values.
void DrawRows(const Options& o, const Spec& spec, uint64_t first_row, uint64_t n_rows,
              std::vector<float>& out);

// values in `type`'s file layout (F32, F16, Q8_0 or a kernels::QuantizeRow
// type) into out (replaced).
absl::Status Encode(const std::vector<float>& values, GgmlType type,
                    std::vector<uint8_t>& out);

// One chunk's buffers, kept across chunks and tensors (fresh multi-MB
// buffers cost page faults and zeroing comparable to generating them).
struct ChunkSlot {
  std::vector<float> values;
  std::vector<uint8_t> bytes;
  absl::Status status;
};

// Draws, converts to spec.type and appends the tensor's data, chunks of
// Options::chunk_elements generated and quantized on Options::threads
// threads while the previous batch is written. `slots` is reused scratch.
absl::Status WriteTensorData(const Options& o, const Spec& spec, GgufWriter& w,
                             std::vector<ChunkSlot>& slots);

}  // namespace sluice::mkmodel::internal

#endif  // SLUICE_MODEL_TESTING_MKMODEL_INTERNAL_H_
